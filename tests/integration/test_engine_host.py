"""The app's EngineHost on the REAL vLLM CPU engine with the tiny model (one engine per session)."""
import asyncio
import time

import psutil
import pytest

from app.conversation import ChatTemplate
from app.engine.protocol import Sampling
from app.engine.status import EngineState
from app.errors import EngineDied

pytestmark = pytest.mark.timeout(600)


def run(loop, coro, timeout=120):
    return loop.submit(coro).result(timeout)


def exactly(max_tokens):
    """An answer of exactly ``max_tokens`` tokens (vLLM's default sampling, the end of the answer ignored)."""
    return Sampling(temperature=1.0, top_p=1.0, max_tokens=max_tokens, ignore_eos=True)


async def collect(host, ids, max_tokens, ignore_eos=False):
    text, tokens = [], 0
    async for delta in host.stream(ids, Sampling(temperature=0.8, top_p=0.8, max_tokens=max_tokens,
                                                  ignore_eos=ignore_eos)):
        text.append(delta.text)
        tokens += delta.new_tokens
    return "".join(text), tokens


def test_multi_turn_streamed_chat_uses_the_chat_template(engine_host, caller_loop):
    tok = engine_host.tokenizer
    first_q = "请用三句话解释量子纠缠，要求通俗易懂"
    ids1 = ChatTemplate(tok).encode([{"role": "user", "content": first_q}])
    answer1, n1 = run(caller_loop, collect(engine_host, ids1, max_tokens=24, ignore_eos=True))
    assert n1 == 24 and answer1
    history = [{"role": "user", "content": first_q}, {"role": "assistant", "content": answer1},
               {"role": "user", "content": "再说一遍"}]
    rendered = tok.apply_chat_template(history, tokenize=False, add_generation_prompt=True)
    assert rendered.startswith("<|begin_of_sentence|>User: " + first_q + "\nAssistant: ")
    assert "<|end_of_sentence|>User: 再说一遍\nAssistant: " in rendered
    ids2 = ChatTemplate(tok).encode(history)
    assert len(ids2) > len(ids1)
    answer2, n2 = run(caller_loop, collect(engine_host, ids2, max_tokens=16, ignore_eos=True))
    assert n2 == 16 and answer2


def test_stop_aborts_the_engine_request(engine_host, caller_loop):
    ids = ChatTemplate(engine_host.tokenizer).encode([{"role": "user", "content": "write a very long story"}])

    async def start_then_stop():
        seen = 0
        stream = engine_host.stream(ids, exactly(900))
        async for delta in stream:
            seen += delta.new_tokens
            if seen >= 10:
                break
        running_during = await engine_host.running_requests()
        await stream.aclose()  # what Chainlit's task cancel does to our generator
        deadline = time.time() + 5
        while await engine_host.running_requests() and time.time() < deadline:
            await asyncio.sleep(0.05)
        return seen, running_during, await engine_host.running_requests()

    seen, during, after = run(caller_loop, start_then_stop())
    assert seen >= 10 and during == 1
    assert after == 0, "the engine kept generating after stop"


def test_rapid_stop_and_resend_leaves_nothing_running(engine_host, caller_loop):
    ids = ChatTemplate(engine_host.tokenizer).encode([{"role": "user", "content": "again and again"}])

    async def stop_resend():
        for _ in range(6):
            stream = engine_host.stream(ids, exactly(500))
            async for _delta in stream:
                break  # stop at the first piece
            await stream.aclose()
        answer, n = await collect(engine_host, ids, max_tokens=8, ignore_eos=True)
        await asyncio.sleep(0.5)
        return n, await engine_host.running_requests()

    n, running = run(caller_loop, stop_resend())
    assert n == 8 and running == 0
    assert engine_host.gate.active == 0


def test_queue_at_limit_plus_three_drops_nothing(engine_host, caller_loop):
    limit = engine_host.gate.limit
    ids = ChatTemplate(engine_host.tokenizer).encode([{"role": "user", "content": "hello"}])
    positions = {}

    async def one(i):
        async def told(p):
            positions.setdefault(i, []).append(p)
        tokens = 0
        async for delta in engine_host.stream(ids, exactly(40), on_queued=told):
            tokens += delta.new_tokens
        return tokens

    async def many():
        tasks = []
        for i in range(limit + 3):
            tasks.append(asyncio.create_task(one(i)))
            await asyncio.sleep(0)
        return await asyncio.gather(*tasks)

    results = run(caller_loop, many())
    assert results == [40] * (limit + 3)
    assert sorted(positions) == [limit, limit + 1, limit + 2]
    assert [positions[i][0] for i in sorted(positions)] == [1, 2, 3]
    assert engine_host.gate.active == 0 and engine_host.gate.queued == 0


def test_killed_engine_core_is_reported_restarted_and_answers_again(engine_host, caller_loop):
    """Kill the engine core mid-answer: the answer errors, the host restarts it, the next answer works."""
    ids = ChatTemplate(engine_host.tokenizer).encode([{"role": "user", "content": "tell me everything"}])
    restarts_before = engine_host.status.restarts

    def engine_core_pids():
        found = []
        for p in psutil.Process().children(recursive=True):
            try:  # an engine core retired by an earlier test may linger as a zombie until it is reaped
                if p.status() != psutil.STATUS_ZOMBIE and "EngineCore" in p.name() + " ".join(p.cmdline()):
                    found.append(p.pid)
            except psutil.Error:
                pass
        return found

    async def kill_mid_answer():
        seen = 0
        try:
            async for delta in engine_host.stream(ids, exactly(900)):
                seen += delta.new_tokens
                if seen >= 5 and seen - delta.new_tokens < 5:
                    for pid in engine_core_pids():
                        psutil.Process(pid).kill()
        except EngineDied as err:
            return seen, str(err)
        return seen, None

    pids = engine_core_pids()
    assert pids, "no EngineCore process found"
    seen, error = run(caller_loop, kill_mid_answer(), timeout=60)
    assert error is not None, f"the answer finished ({seen} tokens) although the engine was killed"
    assert run(caller_loop, engine_host.wait_ready(300), timeout=330), engine_host.status.detail
    assert engine_host.status.state is EngineState.READY
    assert engine_host.status.restarts == restarts_before + 1
    assert "died" in engine_host.status.last_error or "Engine" in engine_host.status.last_error
    answer, n = run(caller_loop, collect(engine_host, ids, max_tokens=12, ignore_eos=True))
    assert n == 12
    assert set(engine_core_pids()).isdisjoint(pids)
