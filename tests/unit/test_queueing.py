"""The fair gate: limit respected, order kept, positions reported, cancellation safe."""
import asyncio

from app.queueing import FairGate


def test_limit_order_and_positions():
    async def scenario():
        gate = FairGate(2)
        running, max_running, order, positions = 0, 0, [], {}

        async def job(i):
            nonlocal running, max_running

            async def told(p):
                positions.setdefault(i, []).append(p)

            async with gate.slot(told):
                running += 1
                max_running = max(max_running, running)
                order.append(i)
                await asyncio.sleep(0.01)
                running -= 1

        tasks = []
        for i in range(6):
            tasks.append(asyncio.create_task(job(i)))
            await asyncio.sleep(0)
        await asyncio.gather(*tasks)
        return gate, max_running, order, positions

    gate, max_running, order, positions = asyncio.run(scenario())
    assert max_running == 2
    assert order == list(range(6))
    assert positions[2][0] == 1 and positions[5][0] == 4
    assert positions[5][-1] == 1  # moved up as others finished
    assert gate.active == 0 and gate.queued == 0


def test_cancelled_waiter_leaves_the_queue():
    async def scenario():
        gate = FairGate(1)
        release = asyncio.Event()

        async def holder():
            async with gate.slot():
                await release.wait()

        async def waiter():
            async with gate.slot():
                return "ran"

        h = asyncio.create_task(holder())
        await asyncio.sleep(0)
        w1 = asyncio.create_task(waiter())
        w2 = asyncio.create_task(waiter())
        await asyncio.sleep(0)
        assert gate.queued == 2
        w1.cancel()
        await asyncio.sleep(0)
        release.set()
        await h
        return await w2, gate

    result, gate = asyncio.run(scenario())
    assert result == "ran" and gate.active == 0 and gate.queued == 0
