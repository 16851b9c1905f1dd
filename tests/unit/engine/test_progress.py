"""Start progress (terminal bar, status steps), the GPU memory sampler, and where vLLM's log goes."""
from __future__ import annotations

import asyncio
import io
import json
import logging
import logging.config

from app.engine.host import EngineHost, EngineHostOptions
from app.engine.progress import StartProgressBar
from app.engine.status import START_STEPS, EngineState, StartStep
from app.planning.engine_plan import EnginePlan
from app.runtime import GpuMemoryWatch
from app.telemetry import AppMetrics, route_vllm_logs


def _host() -> EngineHost:
    def no_engine(path, plan):
        raise AssertionError("these tests drive the status only; no engine is started")

    plan = EnginePlan(profile="cpu", device="cpu", gpu=None, reasons={}, max_concurrent=2,
                      engine_args={"max_model_len": 4096})
    return EngineHost(EngineHostOptions(lambda progress: "unused", plan, AppMetrics(),
                                        engine_factory=no_engine))


def test_status_reports_the_start_step_and_seconds_while_starting():
    host = _host()
    host._set(EngineState.LOADING, "finding the model", StartStep.MODEL)
    host._set(EngineState.LOADING, "loading the model into the engine", StartStep.ENGINE)
    out = host.status.to_dict()
    assert (out["step"], out["steps"]) == (3, START_STEPS) and out["starting_seconds"] >= 0
    host._set(EngineState.READY, "ready in 1.0s")
    assert "step" not in host.status.to_dict() and not host.status.starting


def test_terminal_bar_follows_the_steps_and_ends_full():
    stream = io.StringIO()
    bar = StartProgressBar(stream, refresh_s=0.05)
    host = _host()
    host.add_listener(bar)
    host._set(EngineState.LOADING, "downloading baidu/ERNIE-4.5-0.3B-PT: 12.0 / 721.0 MB (2%)", StartStep.MODEL)
    host._set(EngineState.LOADING, "loading the model into the engine", StartStep.ENGINE)
    host._set(EngineState.WARMING, "engine up in 20.0s; first request", StartStep.WARMUP)
    host._set(EngineState.READY, "ready in 21.0s")
    text = stream.getvalue()
    assert "starting [1/4] downloading baidu/ERNIE-4.5-0.3B-PT: 12.0 / 721.0 MB (2%)" in text
    assert "starting [3/4] loading the model into the engine" in text and "2/4 steps" in text
    assert "ready: ready in 21.0s" in text and "4/4 steps" in text
    # Closed after ready: a later state change draws nothing.
    before = stream.getvalue()
    host._set(EngineState.STOPPED)
    assert stream.getvalue() == before


def test_terminal_bar_shows_a_restart_and_a_failure():
    stream = io.StringIO()
    host = _host()
    host.add_listener(StartProgressBar(stream, refresh_s=0.05))
    host._set(EngineState.RESTARTING, "engine process died")  # no step yet: nothing to draw
    host._set(EngineState.RESTARTING, "loading the model into the engine", StartStep.ENGINE)
    host._set(EngineState.FAILED, "engine start failed (boom)")
    text = stream.getvalue()
    assert "restarting [3/4] loading the model into the engine" in text
    assert "failed: engine start failed (boom)" in text


def test_gpu_peak_is_taken_while_generating_even_between_slow_samples():
    """A short answer's peak falls between idle samples; the sampler speeds up while answering."""
    readings = iter([1000] * 3 + [5000] * 3 + [1200] * 1000)
    reads: list[int] = []

    def read() -> int:
        reads.append(next(readings))
        return reads[-1]

    watch = GpuMemoryWatch(read)
    metrics = AppMetrics()
    # The sampler asks "generating?" once a round, after the round before has sampled and set the metrics:
    # two idle rounds, an answer of six rounds, one idle round; then the test has seen it all.
    answers = [False] * 2 + [True] * 6 + [False]
    seen: list[tuple] = []  # (samples taken, peak, last) as each round began

    async def scenario():
        done = asyncio.Event()

        def generating() -> bool:
            seen.append((len(reads), watch.peak, watch.last))
            if len(seen) > len(answers):
                done.set()
                return False
            return answers[len(seen) - 1]

        task = asyncio.create_task(watch.follow(generating, metrics, busy_every_s=0.01, idle_every_s=10))
        await asyncio.wait_for(done.wait(), 30)
        task.cancel()

    asyncio.run(scenario())
    assert seen[1] == (1, None, 1000)  # idle: one sample, no peak yet (the next is 10 s away)
    assert seen[8] == (7, 5000, 1200)  # the answer: fast samples caught the spike
    assert seen[9] == seen[8]  # idle again: no more samples
    sample = metrics.registry.get_sample_value
    assert sample("ernie_chat_gpu_memory_peak_bytes", {"gpu": "0"}) == 5000
    assert sample("ernie_chat_gpu_memory_used_bytes", {"gpu": "0"}) == 1200  # the newest reading


def test_no_gpu_memory_series_where_nothing_is_measured():
    """On the CPU or with --remote-url no watch runs; /metrics must not claim 0 bytes of GPU memory."""
    families = {family.name: family for family in AppMetrics().registry.collect()}
    for name in ("ernie_chat_gpu_memory_used_bytes", "ernie_chat_gpu_memory_peak_bytes"):
        assert families[name].type == "gauge" and families[name].samples == [], name


def test_vllm_logs_go_to_our_file_from_every_process(tmp_path):
    env: dict[str, str] = {}
    log_file = tmp_path / "llm.log"
    assert route_vllm_logs(log_file, "WARNING", env)
    config = json.loads(open(env["VLLM_LOGGING_CONFIG_PATH"]).read())
    assert config["handlers"]["file"]["filename"] == str(log_file)
    assert config["handlers"]["console"]["level"] == "WARNING"
    # The same config, applied as vLLM applies it in each process, writes INFO to the file only.
    logging.config.dictConfig(config)
    stream = io.StringIO()
    console = next(h for h in logging.getLogger("vllm").handlers if not isinstance(h, logging.FileHandler))
    console.setStream(stream)
    logging.getLogger("vllm.test").info("an info line")
    logging.getLogger("vllm.test").warning("a warning line")
    for handler in logging.getLogger("vllm").handlers:
        handler.flush()
    assert "an info line" in log_file.read_text() and "a warning line" in log_file.read_text()
    assert "an info line" not in stream.getvalue() and "a warning line" in stream.getvalue()
    for handler in list(logging.getLogger("vllm").handlers):
        logging.getLogger("vllm").removeHandler(handler)
        handler.close()


def test_a_users_own_vllm_logging_config_is_left_alone(tmp_path):
    env = {"VLLM_LOGGING_CONFIG_PATH": "/etc/mine.json"}
    assert not route_vllm_logs(tmp_path / "llm.log", None, env)
    assert env == {"VLLM_LOGGING_CONFIG_PATH": "/etc/mine.json"}
    assert not route_vllm_logs(tmp_path / "llm.log", None, {"VLLM_CONFIGURE_LOGGING": "0"})
