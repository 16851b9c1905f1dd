"""EngineHost's start: one retry with half the KV cache after an out-of-memory start, then one clear line.

No GPU here, so the engine factory stands in for vLLM's engine (the engine protocol) and raises what
vLLM/torch raise on a full card; everything else (the host's loop thread, warm-up, states, on_fatal) is real.
"""
from __future__ import annotations

import asyncio
import time

from app.engine.host import EngineHost, EngineHostOptions
from app.engine.prefill_rate import MIN_MEASURED_TOKENS
from app.engine.protocol import Sampling
from app.engine.status import EngineState, Speed
from app.planning.engine_plan import EnginePlan
from app.planning.profiles import with_smaller_kv
from app.telemetry import AppMetrics, LogTail
from tests.support.fakes import FakeEngine, start_until_settled

GIB = 2**30
PLAN = EnginePlan(profile="auto", device="cuda", gpu=None, reasons={}, max_concurrent=12,
                  engine_args={"kv_cache_memory_bytes": 2 * GIB, "max_model_len": 32768, "max_num_seqs": 12})
CUDA_OOM = RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 22.06 GiB")


def start(factory, log_tail=None, details=None, plan=PLAN, launched_at=None) -> tuple[EngineHost, list[str]]:
    fatal: list[str] = []
    host = EngineHost(EngineHostOptions(lambda progress: "/models/ernie", plan, AppMetrics(),
                                        engine_factory=factory, health_interval=60, log_tail=log_tail,
                                        on_fatal=fatal.append, launched_at=launched_at,
                                        plan_after_out_of_memory=with_smaller_kv))
    if details is not None:  # what /readyz, the status panel and the bar show, in order
        host.add_listener(lambda status: details.append(status.detail))

    start_until_settled(host)
    return host, fatal


def test_out_of_memory_at_start_retries_once_with_half_the_kv_cache():
    tried = []

    def factory(path, plan):
        tried.append(plan.engine_args["kv_cache_memory_bytes"])
        if len(tried) == 1:
            raise CUDA_OOM
        return FakeEngine(plan)

    details: list[str] = []
    host, fatal = start(factory, details=details)
    assert tried == [2 * GIB, GIB]
    # the retry is visible to the user while it runs (an H200 run showed it overwritten at once)
    assert "out of memory; retrying with a smaller KV cache (KV cache 1.00 GiB)" in details
    assert host.status.ready_seconds is not None and not fatal
    assert host.plan.engine_args["kv_cache_memory_bytes"] == GIB  # the plan that worked is kept for restarts


def test_out_of_memory_twice_stops_with_one_line_saying_what_was_tried_and_what_to_change():
    def factory(path, plan):
        raise CUDA_OOM

    host, fatal = start(factory)
    assert host.status.last_error.startswith("engine start failed")
    assert len(fatal) == 1 and "\n" not in fatal[0]
    line = fatal[0]
    assert "KV cache 2.00 GiB, max_model_len 32768; then KV cache 1.00 GiB" in line
    assert "Free GPU memory (nvidia-smi)" in line and "--max-model-len" in line


def test_other_start_failures_are_not_retried():
    calls = []

    def factory(path, plan):
        calls.append(plan)
        raise ValueError("unknown architecture Foo")

    host, fatal = start(factory)
    assert len(calls) == 1 and len(fatal) == 1
    assert "unknown architecture Foo" in fatal[0] and "See the log file" in fatal[0]


# What vLLM 0.26 wrote on an H200 when another program took 60 GiB during the start (bench/start_retry_check.py):
# this process only got the generic RuntimeError; the cause is in the engine process's log.
ENGINE_CORE_LOG = """\
2026-12-02 21:52:52,405 ERROR vllm.v1.engine.core [EngineCore]: EngineCore failed to start.
Traceback (most recent call last):
  File "/tmp/site/vllm/v1/worker/utils.py", line 526, in request_memory
    raise ValueError(
ValueError: Free memory on device cuda:0 (78.77/139.8 GiB) on startup is less than desired GPU memory \
utilization (0.74, 103.45 GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes.
"""
GENERIC = RuntimeError("Engine core initialization failed. See root cause above. Failed core proc(s): {}")


def test_root_cause_from_the_engine_process_log_triggers_the_retry(tmp_path):
    log_file = tmp_path / "llm.log"
    log_file.write_text("2026-12-02 21:52:22,614 INFO ernie_chat: an older line\nValueError: from an older start\n")
    tried = []

    def factory(path, plan):
        tried.append(plan.engine_args["kv_cache_memory_bytes"])
        if len(tried) == 1:
            with open(log_file, "a") as f:
                f.write(ENGINE_CORE_LOG)
            raise GENERIC
        return FakeEngine(plan)

    host, fatal = start(factory, LogTail(log_file))
    assert tried == [2 * GIB, GIB] and not fatal


def test_the_final_line_names_the_engine_process_cause_not_see_above(tmp_path):
    log_file = tmp_path / "llm.log"

    def factory(path, plan):
        with open(log_file, "a") as f:
            f.write(ENGINE_CORE_LOG)
        raise GENERIC

    host, fatal = start(factory, LogTail(log_file))
    assert len(fatal) == 1
    assert "ValueError: Free memory on device cuda:0 (78.77/139.8 GiB)" in fatal[0]
    assert "See root cause above" not in fatal[0]


def test_log_tail_reads_only_what_was_written_after_the_mark(tmp_path):
    log_file = tmp_path / "llm.log"
    log_file.write_text("ValueError: old\n")
    tail = LogTail(log_file)
    mark = tail.mark()
    assert tail.root_cause_since(mark) is None
    with open(log_file, "a") as f:
        f.write("2026 ERROR x: RuntimeError: Engine core initialization failed. See root cause above.\n"
                "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n")
    assert tail.root_cause_since(mark) == "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"
    assert LogTail(tmp_path / "missing.log").root_cause_since(0) is None


def test_warm_up_samples_a_batch_of_eight_like_chats_do_before_ready():
    """vLLM compiles its Triton top-p kernel on the first sampled batch of >= 8 (1.5 s on an H200)."""
    seen = {"calls": 0, "in_flight": 0, "most": 0, "params": []}

    class CountingEngine(FakeEngine):
        async def generate(self, token_ids, sampling, request_id):
            seen["calls"] += 1
            seen["in_flight"] += 1
            seen["most"] = max(seen["most"], seen["in_flight"])
            seen["params"].append((sampling.temperature, sampling.top_p, sampling.seed))
            await asyncio.sleep(0.05)
            seen["in_flight"] -= 1
            async for out in super().generate(token_ids, sampling, request_id):
                yield out

    host, fatal = start(lambda path, plan: CountingEngine(plan))
    assert host.status.ready_seconds is not None and not fatal
    # 12 at once: a chat-like request and a seeded one, the prefill calibration's two reads, then 8 at once
    assert seen["calls"] == 2 + 2 + 8 and seen["most"] == 8
    assert all(t > 0 and p < 1 for t, p, _ in seen["params"])  # sampled, so the top-p path runs
    # Chats send no seed: the unseeded path is the one warmed for them (a seeded-only warm-up left it cold).
    assert [seed for _, _, seed in seen["params"]].count(None) == 11


def test_the_queue_and_the_warm_up_read_the_answers_at_once_from_the_plan():
    """plan.max_concurrent, not max_num_seqs (vLLM's batch, rounded up for CUDA graphs): the app never sends more
    than it at once, so a batch larger than it is never warmed, and the fair queue lets that many through."""
    import dataclasses

    in_flight, most = [0], [0]

    class CountingEngine(FakeEngine):
        async def generate(self, token_ids, sampling, request_id):
            in_flight[0] += 1
            most[0] = max(most[0], in_flight[0])
            await asyncio.sleep(0.05)
            in_flight[0] -= 1
            async for out in super().generate(token_ids, sampling, request_id):
                yield out

    plan = dataclasses.replace(PLAN, max_concurrent=4, engine_args={**PLAN.engine_args, "max_num_seqs": 16})
    host, fatal = start(lambda path, engine_plan: CountingEngine(engine_plan), plan=plan)
    assert host.status.ready_seconds is not None and not fatal
    assert most[0] == 2  # the first round only (a chat-like request and a seeded one): 4 is below a batch of 8
    assert host.gate.limit == 4


def test_chats_are_fitted_to_the_context_of_the_plan_that_started():
    """After the retry halves max_model_len, the runtime must not fit chats to the first plan's length."""
    from app.model_source import ModelFiles
    from app.runtime import Runtime
    from app.settings import ModelSettings

    calls = []

    def factory(path, plan):
        calls.append(plan)
        if len(calls) == 1:
            raise CUDA_OOM
        return FakeEngine(plan)

    host, fatal = start(factory)
    runtime = Runtime(settings=None, plan=PLAN, host=host, metrics=AppMetrics(),
                      model=ModelFiles(ModelSettings(model="/models/ernie")))
    assert runtime.max_model_len == 16384 == host.plan.engine_args["max_model_len"]


def test_cpu_warm_up_is_one_round_and_the_prefill_calibration():
    """The CPU build samples without Triton: no batch to compile for, so start-up pays for one round only
    (a chat-like request, and a seeded one beside it), then the two reads that measure the engine's prefill rate
    (app/engine/prefill_rate.py: the first long document's time estimate)."""
    calls = []

    class CountingEngine(FakeEngine):
        async def generate(self, token_ids, sampling, request_id):
            calls.append(len(token_ids))
            async for out in super().generate(token_ids, sampling, request_id):
                yield out

    cpu = EnginePlan(profile="cpu", device="cpu", gpu=None, reasons={},
                     engine_args={"max_model_len": 4096, "max_num_seqs": 12})
    host, fatal = start(lambda path, plan: CountingEngine(plan), plan=cpu)
    assert host.status.ready_seconds is not None and not fatal
    assert sorted(calls) == [4, 4, MIN_MEASURED_TOKENS, MIN_MEASURED_TOKENS]


def test_the_full_speed_engine_is_built_while_the_starting_engine_starts():
    """--quick-start: both builds begin at once (the full engine's compile overlaps the starting engine's load),
    the starting engine answers first, and the full one takes over when it is up."""
    import dataclasses
    import threading

    starter_plan = dataclasses.replace(PLAN, engine_args={**PLAN.engine_args, "enforce_eager": True})
    plan = dataclasses.replace(PLAN, starter=starter_plan)
    started: list[str] = []
    both_started = threading.Event()

    def factory(path, engine_plan):
        started.append("starter" if engine_plan is starter_plan else "full")
        if len(started) == 2:
            both_started.set()
        # Each build waits until the other has begun: this start only finishes if they overlap.
        assert both_started.wait(10), "the two engines were not built at the same time"
        return FakeEngine(engine_plan)

    speeds: list = []
    host = EngineHost(EngineHostOptions(lambda progress: "/models/ernie", plan, AppMetrics(),
                                        engine_factory=factory, health_interval=60))
    host.add_listener(lambda status: speeds.append(status.speed))

    async def run():
        host.start_in_background()
        assert await host.wait_ready(30)
        deadline = time.time() + 30
        while host.status.speed is not Speed.FULL and time.time() < deadline:
            await asyncio.sleep(0.05)
        await host.shutdown()

    asyncio.run(run())
    assert sorted(started) == ["full", "starter"]
    assert host.status.speed is Speed.FULL and host.status.full_speed_seconds is not None
    assert host.plan is plan  # restarts start the full-speed engine directly


def test_each_start_step_is_logged_with_its_second_from_launch(caplog):
    """The log alone times the start: every step's line says when it began, counted from the launch."""
    class SlowEngine(FakeEngine):
        def __init__(self, plan=PLAN):
            time.sleep(0.5)  # the engine step takes a moment, as vLLM's does
            super().__init__(plan)

    with caplog.at_level("INFO", logger="ernie_chat.engine"):
        # launched 100 s ago: the imports and the web server took that long, in this story
        host, fatal = start(lambda path, plan: SlowEngine(plan), launched_at=time.time() - 100)
    assert not fatal
    lines = [r.getMessage() for r in caplog.records]
    steps = [line for line in lines if line.startswith(("engine loading [", "engine warming ["))]
    seconds = [float(line.split("] at ")[1].split("s")[0]) for line in steps]
    # (step 2, the tokenizer, is ModelFiles' own: this provider has none)
    assert [line.split(" at ")[0] for line in steps] == ["engine loading [1/4]", "engine loading [3/4]",
                                                       "engine warming [4/4]"]
    assert seconds[0] >= 100 and seconds == sorted(seconds) and seconds[2] - seconds[1] >= 0.3


FULL_ENGINE_CORE_LOG = """\
2026-12-04 10:02:11,020 ERROR vllm.v1.engine.core [EngineCore]: EngineCore failed to start.
Traceback (most recent call last):
  File "/tmp/site/torch/_inductor/codecache.py", line 1040, in dumps
    return super().dumps(obj)
KeyError: 'torch'
"""


def test_a_full_speed_engine_that_fails_is_told_in_the_terminal_readyz_panel_and_metrics(tmp_path, caplog):
    """The eager starting engine keeps answering, about 5x slower on a GPU: the user is told so and why, once,
    everywhere they look, and a metric counts it."""
    import dataclasses
    from types import SimpleNamespace

    from app.ui.status_panel import status_markdown

    log_file = tmp_path / "llm.log"
    starter_plan = dataclasses.replace(PLAN, engine_args={**PLAN.engine_args, "enforce_eager": True})
    plan = dataclasses.replace(PLAN, starter=starter_plan)

    def factory(path, engine_plan):
        if engine_plan is starter_plan:
            return FakeEngine(engine_plan)
        with open(log_file, "a") as f:
            f.write(FULL_ENGINE_CORE_LOG)
        raise GENERIC

    metrics = AppMetrics()
    host = EngineHost(EngineHostOptions(lambda progress: "/models/ernie", plan, metrics,
                                        engine_factory=factory, health_interval=60, log_tail=LogTail(log_file),
                                        full_speed_retry_delays=(0.05, 0.05)))

    async def run():
        host.start_in_background()
        assert await host.wait_ready(30)
        deadline = time.time() + 30
        while host.status.speed is not Speed.STARTING_ONLY and time.time() < deadline:
            await asyncio.sleep(0.01)
        answer = [delta.text async for delta in host.stream([1, 2], Sampling(temperature=1.0, top_p=1.0, max_tokens=1))]
        await host.shutdown()
        return answer

    with caplog.at_level("ERROR", logger="ernie_chat.engine"):
        assert asyncio.run(run()) == ["ok"]  # the starting engine still answers
    terminal = [r.getMessage() for r in caplog.records if getattr(r, "console", True)]
    assert terminal == ["answering with the starting engine (eager, about 5x slower): KeyError: 'torch'; see the log"]
    readyz = host.status.to_dict()
    assert readyz["speed"] == "starting_only" and readyz["speed_reason"] == "KeyError: 'torch'"
    assert (readyz["full_speed_try"], readyz["full_speed_tries"]) == (3, 3)
    assert metrics.registry.get_sample_value("ernie_chat_full_speed_engine_failures_total") == 3  # every try
    runtime = SimpleNamespace(host=host, plan=plan, gpu=None, gpu_memory=None, max_model_len=32768, history=None,
                              settings=SimpleNamespace(model=SimpleNamespace(model="baidu/ERNIE-4.5-0.3B-PT")))
    assert ("**Speed:** starting engine only (eager, about 5x slower): the full-speed engine did not start: "
            "KeyError: 'torch' (see the log)") in status_markdown(runtime, "en-US")
    assert "**速度:** 仅启动引擎（eager，约慢 5 倍）：全速引擎未能启动：KeyError: 'torch'（详见日志）" in \
        status_markdown(runtime, "zh-CN")


def test_the_panel_says_when_chats_wait_for_the_database(monkeypatch):
    """Writes the database refuses are kept and retried; past a few seconds the panel says so, in both languages."""
    from types import SimpleNamespace

    from app.engine.status import EngineStatus
    from app.ui.status_panel import status_markdown

    history = SimpleNamespace(unsaved_seconds=12.4, over_share=lambda user: user == "mallory")
    runtime = SimpleNamespace(host=SimpleNamespace(status=EngineStatus()), plan=PLAN, gpu=None, gpu_memory=None,
                              max_model_len=4096, history=history,
                              settings=SimpleNamespace(model=SimpleNamespace(model="baidu/ERNIE-4.5-0.3B-PT")))
    assert "**History:** not saved yet: waiting 12 s for the chat database, trying again" in \
        status_markdown(runtime, "en-US")
    assert "**聊天记录:** 尚未保存：已等待聊天数据库 12 秒，正在重试" in status_markdown(runtime, "zh-CN")
    history.unsaved_seconds = 1.0  # a moment's wait is normal: nothing said
    assert "History" not in status_markdown(runtime, "en-US")
    # A user whose own changes are over their share of the waiting writes is told, in their panel only.
    import app.ui.status_panel

    monkeypatch.setattr(app.ui.status_panel, "session_user_identifier", lambda: "mallory")
    assert "**History:** not saved: too many of your changes wait for the chat database; yours are saved again " \
           "once those land" in status_markdown(runtime, "en-US")
    assert "**聊天记录:** 未保存：你有过多的更改正在等待聊天数据库" in status_markdown(runtime, "zh-CN")
    monkeypatch.setattr(app.ui.status_panel, "session_user_identifier", lambda: "alice")
    assert "History" not in status_markdown(runtime, "en-US")


def test_the_panel_says_how_long_the_start_took_in_the_pages_language():
    from types import SimpleNamespace

    from app.engine.status import EngineStatus
    from app.i18n import Phrase
    from app.ui.status_panel import status_markdown

    status = EngineStatus(state=EngineState.READY, detail=Phrase("ready_took", seconds=18.66), ready_took=18.66)
    runtime = SimpleNamespace(host=SimpleNamespace(status=status), plan=PLAN, gpu=None, gpu_memory=None,
                              max_model_len=4096, history=None,
                              settings=SimpleNamespace(model=SimpleNamespace(model="baidu/ERNIE-4.5-0.3B-PT")))
    assert "**Engine:** ready — ready in 18.7s" in status_markdown(runtime, "en-US")
    assert "**引擎:** 就绪 — 18.7 秒就绪" in status_markdown(runtime, "zh-CN")


def test_a_full_speed_engine_that_fails_once_is_tried_again_while_the_starter_answers(tmp_path):
    """Whatever made the full-speed engine's start fail (a fork refused on a new machine's first launch, issue 31),
    it is tried again with backoff while the starting engine answers, and /readyz and the panel say so meanwhile;
    the second try takes over at full speed."""
    import dataclasses
    import threading
    from types import SimpleNamespace

    from app.ui.status_panel import status_markdown

    starter_plan = dataclasses.replace(PLAN, engine_args={**PLAN.engine_args, "enforce_eager": True})
    plan = dataclasses.replace(PLAN, starter=starter_plan)
    full_tries, second_try_may_finish = [], threading.Event()

    def factory(path, engine_plan):
        if engine_plan is starter_plan:
            return FakeEngine(engine_plan)
        full_tries.append(time.time())
        if len(full_tries) == 1:
            raise RuntimeError("os.fork is unsafe while filelock is changing descriptor ownership")
        second_try_may_finish.wait(30)
        return FakeEngine(engine_plan)

    host = EngineHost(EngineHostOptions(lambda progress: "/models/ernie", plan, AppMetrics(),
                                        engine_factory=factory, health_interval=60,
                                        full_speed_retry_delays=(0.3, 5.0)))
    runtime = SimpleNamespace(host=host, plan=plan, gpu=None, gpu_memory=None, max_model_len=32768, history=None,
                              settings=SimpleNamespace(model=SimpleNamespace(model="baidu/ERNIE-4.5-0.3B-PT")))

    async def run():
        host.start_in_background()
        assert await host.wait_ready(30)
        deadline = time.time() + 30
        while len(full_tries) < 2 and time.time() < deadline:
            await asyncio.sleep(0.01)
        seen = (host.status.to_dict(), status_markdown(runtime, "en-US"), status_markdown(runtime, "zh-CN"))
        answer = [delta.text async for delta in host.stream([1, 2], Sampling(temperature=1.0, top_p=1.0, max_tokens=1))]
        second_try_may_finish.set()
        while host.status.speed is not Speed.FULL and time.time() < deadline:
            await asyncio.sleep(0.01)
        final = host.status.to_dict()
        await host.shutdown()
        return seen, answer, final

    (readyz, english, chinese), answer, final = asyncio.run(run())
    assert answer == ["ok"]  # the starting engine answered while the full-speed one was tried again
    assert readyz["speed"] == "retrying" and readyz["speed_reason"].startswith("RuntimeError: os.fork is unsafe")
    assert (readyz["full_speed_try"], readyz["full_speed_tries"]) == (2, 3)
    assert full_tries[1] - full_tries[0] >= 0.3  # the backoff
    assert "the full-speed engine did not start (RuntimeError: os.fork is unsafe while filelock is changing " \
           "descriptor ownership) and is being tried again, try 2 of 3" in english
    assert "全速引擎未能启动（RuntimeError: os.fork is unsafe while filelock is changing descriptor ownership），" \
           "正在重试：第 2/3 次" in chinese
    assert final["speed"] == "full" and "speed_reason" not in final and len(full_tries) == 2
