"""The fair gate: limit respected, order kept, positions reported, cancellation safe."""
import asyncio

from app.engine.queueing import FairGate


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


def test_owners_take_turns_and_positions_follow_the_turns():
    """One owner's backlog holds another back by one turn at most (issue 36 N6); within an owner, first come first
    served; waiters without an owner share one turn."""
    async def scenario():
        gate = FairGate(1)
        order, first_position = [], {}
        release = asyncio.Event()

        async def holder():
            async with gate.slot(owner="mallory"):
                await release.wait()

        async def job(name, owner):
            async def told(p):
                first_position.setdefault(name, p)

            async with gate.slot(told, owner=owner):
                order.append(name)

        tasks = [asyncio.create_task(holder())]
        await asyncio.sleep(0)
        for name, owner in [("m1", "mallory"), ("m2", "mallory"), ("m3", "mallory"), ("a1", "alice"),
                            ("b1", "bob"), ("a2", "alice")]:
            tasks.append(asyncio.create_task(job(name, owner)))
            await asyncio.sleep(0)
        release.set()
        await asyncio.gather(*tasks)
        return gate, order, first_position

    gate, order, first_position = asyncio.run(scenario())
    # mallory holds the slot: alice and bob go before her next one, then the owners alternate
    assert order == ["a1", "b1", "m1", "a2", "m2", "m3"]
    assert first_position["a1"] == 1 and first_position["b1"] == 2  # told their turn, not the length of the pile
    assert gate.active == 0 and gate.queued == 0


def test_one_owner_holds_at_most_its_share_and_another_gets_the_slot_left():
    """With a slot more than one owner's share, another user's job starts at once while one user's long jobs run
    and more of theirs wait; a cancelled waiter leaves without taking a slot."""
    async def scenario():
        gate = FairGate(2, per_owner=1)
        started, release = [], asyncio.Event()

        async def job(name, owner, wait=True):
            async with gate.slot(owner=owner):
                started.append(name)
                if wait:
                    await release.wait()

        long_one = asyncio.create_task(job("m1", "mallory"))
        more = [asyncio.create_task(job(f"m{n}", "mallory")) for n in (2, 3)]
        await asyncio.sleep(0)
        assert started == ["m1"] and gate.active == 1 and gate.queued == 2  # mallory's share is one slot
        more[0].cancel()
        await asyncio.gather(more[0], return_exceptions=True)
        await asyncio.wait_for(job("a1", "alice", wait=False), 1)  # the slot left is alice's at once
        assert started == ["m1", "a1"] and gate.active == 1
        release.set()
        await asyncio.gather(long_one, more[1])
        return gate, started

    gate, started = asyncio.run(scenario())
    assert started == ["m1", "a1", "m3"] and gate.active == 0 and gate.queued == 0


def test_a_share_is_at_least_one_slot():
    import pytest

    with pytest.raises(ValueError):
        FairGate(2, per_owner=0)


def test_several_answers_at_once_take_one_turn_each_so_another_user_waits_one_turn_at_most():
    """Four answers at once to one question are four requests of one owner: another user who asks meanwhile gets the
    next free slot, not the one after all four (the per-user share holds for answers at once)."""
    async def scenario():
        gate = FairGate(2)
        order, release = [], asyncio.Event()

        async def answer(name, owner):
            async with gate.slot(owner=owner):
                order.append(name)
                await release.wait()

        tasks = [asyncio.create_task(answer(f"m{i}", "mallory")) for i in range(4)]
        await asyncio.sleep(0)
        tasks.append(asyncio.create_task(answer("a1", "alice")))
        await asyncio.sleep(0)
        release.set()
        await asyncio.gather(*tasks)
        return order

    order = asyncio.run(scenario())
    assert order[:2] == ["m0", "m1"] and order[2] == "a1"  # alice's one answer goes before mallory's third


def test_a_stop_while_the_page_is_told_its_place_leaves_no_slot_behind():
    """The position callback sends a line to the page; a Stop landing during that send (or the send failing) used to
    leave the waiter queued, later given a slot that nobody released."""
    async def scenario():
        gate = FairGate(2, per_owner=1)
        release, telling = asyncio.Event(), asyncio.Event()

        async def holder():
            async with gate.slot(owner="mallory"):
                await release.wait()

        async def slow_tell(position):
            telling.set()
            await asyncio.Event().wait()  # the page's socket never answers

        async def failing_tell(position):
            raise ConnectionError("the page went away")

        async def carol(tell):
            async with gate.slot(tell, owner="carol"):
                pass

        mallory = asyncio.create_task(holder())
        first = asyncio.create_task(holder())  # mallory's second job waits: she holds her share
        await asyncio.sleep(0)
        async with gate.slot(owner="carol"):  # carol holds the other slot, so her next one waits and is told
            stopped = asyncio.create_task(carol(slow_tell))
            await telling.wait()
            stopped.cancel()
            failed = asyncio.create_task(carol(failing_tell))
            results = await asyncio.gather(stopped, failed, return_exceptions=True)
        release.set()
        await asyncio.gather(mallory, first)
        return gate, results

    gate, results = asyncio.run(scenario())
    assert isinstance(results[0], asyncio.CancelledError) and isinstance(results[1], ConnectionError)
    assert gate.active == 0 and gate.queued == 0 and not gate._holding


def test_a_waiter_is_told_its_place_in_its_own_context_whoever_moved_the_queue():
    """A later position is told in a task of its own, started by whoever moved the queue (another user's answer
    ending). It ran in that user's context, and Chainlit's context is a context variable: the waiter's "Queued" line
    was updated in the other user's page and chat (the load run: 236 such writes refused in 10 minutes)."""
    import contextvars

    whose = contextvars.ContextVar("whose", default="nobody")

    async def scenario():
        gate = FairGate(1)
        told: list[tuple[int, str]] = []
        release = asyncio.Event()

        async def tell(position):
            told.append((position, whose.get()))

        async def alice():
            whose.set("alice")
            async with gate.slot(owner="alice"):
                await release.wait()

        async def waiter(name):
            whose.set(name)
            async with gate.slot(tell, owner=name):
                pass

        holding = asyncio.create_task(alice())
        await asyncio.sleep(0)
        first, second = asyncio.create_task(waiter("bob")), asyncio.create_task(waiter("carol"))
        await asyncio.sleep(0.01)
        first.cancel()  # bob leaves the queue: carol is told her new place, in a task bob's leaving starts
        await asyncio.sleep(0.01)
        release.set()
        await asyncio.gather(holding, second, first, return_exceptions=True)
        return told

    told = asyncio.run(scenario())
    assert told == [(1, "bob"), (2, "carol"), (1, "carol")]
