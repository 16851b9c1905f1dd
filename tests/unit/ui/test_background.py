"""Every task app/ui starts without awaiting it is held until it ends, and a failed one says so in the log
(app/ui/background.py; issue 33 item 2)."""
import asyncio
import gc
import logging

from app.ui.background import running, spawn


def test_a_spawned_task_is_held_until_it_ends_and_then_let_go():
    async def main():
        release = asyncio.Event()
        done = []

        async def work():
            await release.wait()
            done.append(True)

        task = spawn(work(), name="held")
        del task
        gc.collect()  # nobody else holds it: the set must
        await asyncio.sleep(0)
        assert [t.get_name() for t in running()] == ["held"]
        release.set()
        await asyncio.sleep(0.01)
        assert done == [True] and not running()

    asyncio.run(main())


def test_a_failed_task_is_logged_and_a_cancelled_one_is_not(caplog):
    async def fails():
        raise ValueError("boom")

    async def waits():
        await asyncio.sleep(10)

    async def main():
        spawn(fails(), name="fails")
        cancelled = spawn(waits(), name="cancelled")
        await asyncio.sleep(0)
        cancelled.cancel()
        await asyncio.sleep(0.01)
        assert not running()

    with caplog.at_level(logging.ERROR, logger="ernie_chat.chat"):
        asyncio.run(main())
    failures = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(failures) == 1 and "fails" in failures[0].getMessage()
    assert isinstance(failures[0].exc_info[1], ValueError)
