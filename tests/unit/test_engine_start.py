"""EngineHost's start: one retry with half the KV cache after an out-of-memory start, then one clear line.

No GPU here, so the engine factory stands in for AsyncLLM and raises what vLLM/torch raise on a full card;
everything else (the host's loop thread, warm-up through vLLM's SamplingParams, states, on_fatal) is real.
"""
from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace

from app.engine import EngineHost, EngineState
from app.profiles import EnginePlan
from app.telemetry import AppMetrics

GIB = 2**30
PLAN = EnginePlan(profile="auto", device="cuda", gpu=None, reasons={},
                  engine_args={"kv_cache_memory_bytes": 2 * GIB, "max_model_len": 32768, "max_num_seqs": 12})
CUDA_OOM = RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 22.06 GiB")


class FakeEngine:
    errored = False

    async def generate(self, prompt, params, request_id):
        yield SimpleNamespace(finished=True, outputs=[SimpleNamespace(text="ok", token_ids=[5], finish_reason="length")])

    async def check_health(self):
        return None

    async def abort(self, request_id):
        return None

    def shutdown(self):
        pass


def start(factory) -> tuple[EngineHost, list[str]]:
    fatal: list[str] = []
    host = EngineHost(lambda progress: "/models/ernie", PLAN, AppMetrics(), max_concurrent=2,
                      engine_factory=factory, health_interval=60)
    host.on_fatal = fatal.append

    async def run():
        host.start_in_background()
        deadline = time.time() + 30
        while host.status.state not in (EngineState.READY, EngineState.FAILED) and time.time() < deadline:
            await asyncio.sleep(0.05)
        await host.shutdown()

    asyncio.run(run())
    return host, fatal


def test_out_of_memory_at_start_retries_once_with_half_the_kv_cache():
    tried = []

    def factory(path, plan):
        tried.append(plan.engine_args["kv_cache_memory_bytes"])
        if len(tried) == 1:
            raise CUDA_OOM
        return FakeEngine()

    host, fatal = start(factory)
    assert tried == [2 * GIB, GIB]
    assert host.status.ready_seconds is not None and not fatal
    assert host.plan.engine_args["kv_cache_memory_bytes"] == GIB  # the plan that worked is kept for restarts


def test_out_of_memory_twice_stops_with_one_line_saying_what_was_tried_and_what_to_change():
    def factory(path, plan):
        raise CUDA_OOM

    host, fatal = start(factory)
    assert host.status.last_error.startswith("engine start failed")
    assert len(fatal) == 1 and "\n" not in fatal[0]
    line = fatal[0]
    assert f"KV cache {2 * GIB} bytes" in line and f"then KV cache {GIB} bytes" in line
    assert "Free GPU memory (nvidia-smi)" in line and "--max-model-len" in line


def test_other_start_failures_are_not_retried():
    calls = []

    def factory(path, plan):
        calls.append(plan)
        raise ValueError("unknown architecture Foo")

    host, fatal = start(factory)
    assert len(calls) == 1 and len(fatal) == 1
    assert "unknown architecture Foo" in fatal[0] and "See the log file" in fatal[0]
