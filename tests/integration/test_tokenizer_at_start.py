"""EngineHost's start with the model's real tokenizer: it loads beside the engine's start, and a broken one
fails the start in one line.

Slow: the tiny model is built with torch and its tokenizer loads through transformers (seconds of imports);
the engine itself is the stand-in of the unit tests (tests/unit/engine/test_starting.py)."""
from __future__ import annotations

import asyncio
import time

from app.engine.host import EngineHost, EngineHostOptions
from app.engine.status import EngineState
from app.planning.engine_plan import EnginePlan
from app.telemetry import AppMetrics
from tests.support.fakes import FakeEngine, start_until_settled

PLAN = EnginePlan(profile="auto", device="cuda", gpu=None, reasons={}, max_concurrent=12,
                  engine_args={"kv_cache_memory_bytes": 2 * 2**30, "max_model_len": 32768, "max_num_seqs": 12})


def test_the_tokenizer_loads_while_the_engine_starts(tiny_model_dir, monkeypatch):
    """ModelFiles.provide returns once the files are here; the tokenizer loads beside the engine's start, and
    "ready" waits for it (a chat needs it)."""
    from transformers import AutoTokenizer

    from app.model_source import ModelFiles
    from app.settings import ModelSettings

    real_load = AutoTokenizer.from_pretrained

    def slow_load(*args, **kwargs):  # the real tokenizer, loaded as slowly as a big SentencePiece one
        time.sleep(1.0)
        return real_load(*args, **kwargs)

    monkeypatch.setattr(AutoTokenizer, "from_pretrained", slow_load)
    files = ModelFiles(ModelSettings(model=str(tiny_model_dir)))
    order: list[str] = []

    def factory(path, plan):
        # The engine is being built while the tokenizer is still loading: the two overlap.
        order.append("engine built" + (" (tokenizer still loading)" if not files._loading.done() else ""))
        return FakeEngine(plan)

    def tokenizer_ready():
        files.wait_loaded()
        order.append("tokenizer loaded")

    host = EngineHost(EngineHostOptions(files.provide, PLAN, AppMetrics(), engine_factory=factory,
                                        health_interval=60, before_ready=tokenizer_ready))
    host.add_listener(lambda status: status.state is EngineState.READY and order.append("ready"))

    async def run():
        host.start_in_background()
        assert await host.wait_ready(60)
        await host.shutdown()

    asyncio.run(run())
    assert order == ["engine built (tokenizer still loading)", "tokenizer loaded", "ready"]
    assert files.tokenizer is not None and files.tokenizer("hello")["input_ids"]


def test_a_broken_tokenizer_fails_the_start_in_one_line(tmp_path, tiny_model_dir):
    import shutil

    from app.model_source import ModelFiles
    from app.settings import ModelSettings

    broken = tmp_path / "model"
    shutil.copytree(tiny_model_dir, broken)
    (broken / "tokenizer.json").write_text("{not json")
    files = ModelFiles(ModelSettings(model=str(broken)))
    fatal: list[str] = []
    host = EngineHost(EngineHostOptions(files.provide, PLAN, AppMetrics(),
                                        engine_factory=lambda path, plan: FakeEngine(plan), health_interval=60,
                                        before_ready=files.wait_loaded, on_fatal=fatal.append))

    start_until_settled(host, timeout=60)
    assert len(fatal) == 1 and "\n" not in fatal[0]
