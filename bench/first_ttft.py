"""Is the first answer after "ready" as fast as the later ones? (issue 13: "ready" means the first answer is fast)

Starts the app's own EngineHost (warm-up included) on the CPU build or a GPU, then sends four chat-templated
prompts of different lengths one after another, the first one with a seed (as a /v1 client may send) when
``--seeded-first``, and prints each one's time to first token. The first used to take 1.85 s on this CPU
where later ones took 0.014 s: the warm-up sampled with a seed, and chats do not.

    python -m bench.first_ttft --model DIR [--seeded-first]
"""
from __future__ import annotations

import argparse
import asyncio
import json
import time
from pathlib import Path

from app.conversation import ChatTemplate
from app.engine.host import EngineHost, EngineHostOptions
from app.engine.protocol import Sampling
from app.engine.vllm_engine import create_vllm_engine
from app.planning.engine_plan import ModelShape
from app.planning.hardware import cpu_facts, detect_vllm_build, probe_gpus
from app.planning.profiles import plan_engine, with_smaller_kv
from app.settings import EngineSettings
from app.telemetry import AppMetrics

PROMPTS = ["hello", "请用三句话解释量子纠缠，要求通俗易懂", "what is the capital of France, tell me more please", "hi"]


async def run(model: str, seeded_first: bool) -> None:
    from transformers import AutoTokenizer

    shape = ModelShape.from_config(json.loads((Path(model) / "config.json").read_text()))
    plan = plan_engine(EngineSettings(), probe_gpus(), detect_vllm_build(), shape, cpu_facts())
    template = ChatTemplate(AutoTokenizer.from_pretrained(model))
    host = EngineHost(EngineHostOptions(lambda progress: model, plan, AppMetrics(), 4,
                                        engine_factory=create_vllm_engine, plan_after_out_of_memory=with_smaller_kv))
    host.start_in_background()
    assert await host.wait_ready(900), host.status.detail
    print("| request | prompt tokens | seed | time to first token |\n|---|---|---|---|")
    for i, text in enumerate(PROMPTS):
        ids = template.encode([{"role": "user", "content": text}])
        sampling = Sampling(temperature=0.8, top_p=0.8, max_tokens=16, seed=5 if seeded_first and i == 0 else None)
        started, first = time.perf_counter(), None
        async for delta in host.stream(ids, sampling):
            if first is None and delta.new_tokens:
                first = time.perf_counter() - started
        print(f"| {i + 1} | {len(ids)} | {'-' if sampling.seed is None else sampling.seed} | {first:.3f} s |")
    await host.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--seeded-first", action="store_true")
    args = parser.parse_args()
    asyncio.run(run(args.model, args.seeded_first))


if __name__ == "__main__":  # vLLM's CPU build spawns its engine and re-imports this file
    main()
