"""--quick-start on two REAL vLLM CPU engines (issue 13, item 1): an eager engine answers first; the full-speed
engine is built beside it and takes over; an answer streaming across the switch finishes on the engine it
began on, complete and correct; the starting engine's processes are gone after its last answer, and nothing
is left running after shutdown."""
import asyncio
import json
import threading
import time

import psutil
import pytest

from app.engine.host import EngineHost, EngineHostOptions
from app.engine.protocol import Sampling
from app.engine.status import Speed
from app.engine.vllm_engine import create_vllm_engine
from app.planning.engine_plan import ModelShape
from app.planning.hardware import VllmBuild
from app.planning.profiles import plan_engine
from app.settings import EngineSettings
from app.telemetry import AppMetrics

pytestmark = pytest.mark.timeout(900)

GREEDY_LONG = Sampling(temperature=0.0, top_p=1.0, max_tokens=3000, ignore_eos=True)  # 3-12 s at the tiny model's speed


def children(keep) -> set[int]:
    """This process's children whose command line and name pass ``keep``."""
    pids = set()
    for child in psutil.Process().children(recursive=True):
        try:
            if keep(" ".join(child.cmdline()) + " " + child.name()):
                pids.add(child.pid)
        except psutil.NoSuchProcess:
            pass
    return pids


def child_pids() -> set[int]:
    """Less multiprocessing's resource tracker: it lives as long as this process does."""
    return children(lambda text: "resource_tracker" not in text)


def engine_cores() -> set[int]:
    """vLLM's engine-core processes (one per engine)."""
    return children(lambda text: "EngineCore" in text)


def wait_until(condition, timeout: float, what: str) -> None:
    deadline = time.time() + timeout
    while not condition():
        assert time.time() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def test_answer_streaming_across_the_switch_is_complete_and_nothing_is_left_running(tiny_model_dir, caller_loop):
    shape = ModelShape.from_config(json.loads((tiny_model_dir / "config.json").read_text()))
    plan = plan_engine(EngineSettings(max_model_len=4096, max_concurrent_chats=4, quick_start="on"), [],
                       VllmBuild(True, "0.29.0", "cpu"), shape)
    assert plan.starter is not None and plan.starter.engine_args["enforce_eager"]
    assert plan.reasons["quick_start"].startswith("on (set by you)")

    # The full-speed engine is built at the same time as the starting one; once built it waits (on its own loop
    # thread) until an answer is streaming on the starting engine.
    full_built, go = threading.Event(), threading.Event()
    full_began: list[float] = []

    def factory(model_path, engine_plan):
        if engine_plan is plan:
            full_began.append(time.time())
        engine = create_vllm_engine(model_path, engine_plan)
        if engine_plan is plan:
            full_built.set()
            assert go.wait(600)
        return engine

    before = child_pids()  # other tests' engines (the session's engine_host) are not this test's
    threads_before = set(threading.enumerate())

    def new_loop_threads(name_start: str) -> list[str]:
        return [t.name for t in threading.enumerate() if t not in threads_before and t.name.startswith(name_start)]
    host = EngineHost(EngineHostOptions(lambda progress: str(tiny_model_dir), plan, AppMetrics(),
                                        engine_factory=factory, health_interval=0.5))
    switched_at: list[float] = []
    host.add_listener(lambda status: status.speed is Speed.FULL and not switched_at and switched_at.append(time.time()))
    ready_at: list[float] = []
    host.add_listener(lambda status: status.state.value == "ready" and not ready_at and ready_at.append(time.time()))

    async def start():
        host.start_in_background()
        return await host.wait_ready(300)

    try:
        assert caller_loop.submit(start()).result(330), host.status.detail
        assert full_began and full_began[0] < ready_at[0], "the full-speed engine's build began with the first"
        assert host.status.speed is Speed.STARTING
        assert host.status.to_dict()["speed"] == "starting"
        assert full_built.wait(300), "the full-speed engine was not built"
        assert len(engine_cores() - before) == 2, "both engines run during the overlap"

        first_delta = threading.Event()
        prompt = list(range(10, 40))

        async def answer(across_the_switch: bool):
            pieces, tokens, times = [], 0, []
            async for delta in host.stream(prompt, GREEDY_LONG):
                pieces.append(delta.text)
                tokens += delta.new_tokens
                times.append(time.time())
                if across_the_switch and not first_delta.is_set():
                    first_delta.set()
                    # Read on only once the full-speed engine took over: on a quiet machine the tiny model
                    # writes all 3,000 tokens before the switch, and the answer must be open across it.
                    while not switched_at:
                        await asyncio.sleep(0.01)
            return "".join(pieces), tokens, times

        across = caller_loop.submit(answer(True))
        assert first_delta.wait(60)
        go.set()
        wait_until(lambda: switched_at, 300, "the switch to the full-speed engine")
        text, tokens, times = across.result(300)
        assert tokens == GREEDY_LONG.max_tokens, "the answer streaming across the switch was cut"
        assert times[0] < switched_at[0] < times[-1]

        # The same greedy request on the full-speed engine gives the same text: nothing was lost or mixed up.
        after_text, after_tokens, after_times = caller_loop.submit(answer(False)).result(300)
        assert after_times[0] > switched_at[0] and after_tokens == tokens
        assert after_text == text

        # The starting engine went away after its last answer; the full-speed one still runs.
        wait_until(lambda: len(engine_cores() - before) == 1, 60, "the starting engine's processes to exit")
        assert host.status.speed is Speed.FULL and host.status.to_dict()["full_speed_seconds"] > 0
        assert new_loop_threads("vllm-engine-loop") == ["vllm-engine-loop-full"]  # the starting one's loop ended
    finally:
        go.set()
        caller_loop.submit(host.shutdown()).result(120)
    wait_until(lambda: not (child_pids() - before), 30, "every engine process to exit after shutdown")
    assert not new_loop_threads("vllm-engine-loop")
