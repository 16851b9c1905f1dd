"""Several answers to one question on the CPU build: one engine request with ``n`` against ``n`` separate requests.

    python -m bench.n_answers --model DIR [--model DIR2 ...] [--answers 2,3,4] [--rounds 3] [--tokens 64]

For each model one engine is built as the app builds it on a CPU (app.planning.profiles, app.engine.vllm_engine),
then each round measures, for each N, both ways back to back (their order alternates by round, so drift on a
noisy machine hits both alike): the time until all N answers have finished, and the tokens of all N per second.
The same prompt (the model's chat template over one question) and sampling (temperature 0.8, every answer writes
``--tokens`` tokens: ignore_eos), so both ways do the same work. One JSON line per measurement, then a table.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
import uuid
from pathlib import Path

from app.engine.vllm_engine import VllmEngine, create_vllm_engine
from app.planning.engine_plan import ModelShape
from app.planning.hardware import detect_vllm_build
from app.planning.profiles import plan_engine
from app.settings import EngineSettings

QUESTION = "Write a short poem about the sea."
WAYS = ("one request, n=N", "N requests")


def prompt_ids(model_dir: str) -> list[int]:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    ids = tokenizer.apply_chat_template([{"role": "user", "content": QUESTION}], tokenize=True,
                                        add_generation_prompt=True)
    return list(ids["input_ids"] if isinstance(ids, dict) or hasattr(ids, "input_ids") else ids)


def sampling_params(tokens: int, n: int, seed: int):
    from vllm import SamplingParams
    from vllm.sampling_params import RequestOutputKind

    return SamplingParams(n=n, temperature=0.8, top_p=0.8, max_tokens=tokens, ignore_eos=True, seed=seed,
                          output_kind=RequestOutputKind.DELTA)


async def one_request(engine: VllmEngine, prompt: list[int], tokens: int, n: int) -> int:
    written = 0
    async for out in engine._llm.generate({"prompt_token_ids": prompt}, sampling_params(tokens, n, 1),
                                          f"bench-{uuid.uuid4().hex}"):
        written += sum(len(piece.token_ids) for piece in out.outputs)
    return written


async def separate_requests(engine: VllmEngine, prompt: list[int], tokens: int, n: int) -> int:
    async def one(index: int) -> int:
        written = 0
        async for out in engine._llm.generate({"prompt_token_ids": prompt}, sampling_params(tokens, 1, 1 + index),
                                              f"bench-{uuid.uuid4().hex}"):
            written += len(out.outputs[0].token_ids)
        return written

    return sum(await asyncio.gather(*(one(i) for i in range(n))))


async def measure_model(model_dir: str, args: argparse.Namespace) -> list[dict]:
    shape = ModelShape.from_config(json.loads((Path(model_dir) / "config.json").read_text()))
    plan = plan_engine(EngineSettings(max_model_len=2048, max_concurrent_chats=max(args.answers)), [],
                       detect_vllm_build(), shape)
    engine = create_vllm_engine(model_dir, plan)
    prompt = prompt_ids(model_dir)
    rows: list[dict] = []
    try:
        await one_request(engine, prompt, 8, 2)  # warm-up: both paths once
        await separate_requests(engine, prompt, 8, 2)
        for rnd in range(args.rounds):
            for n in args.answers:
                ways = WAYS if rnd % 2 == 0 else WAYS[::-1]
                for way in ways:
                    run = one_request if way == WAYS[0] else separate_requests
                    started = time.perf_counter()
                    written = await run(engine, prompt, args.tokens, n)
                    seconds = time.perf_counter() - started
                    row = {"model": Path(model_dir).name, "n": n, "way": way, "round": rnd,
                           "seconds": round(seconds, 3), "tokens": written, "tps": round(written / seconds, 1)}
                    print(json.dumps(row), flush=True)
                    rows.append(row)
    finally:
        engine.shutdown()
    return rows


def table(rows: list[dict]) -> str:
    out = ["| model | N | way | s to all N finished (3 rounds) | median s | tok/s of all N (median) |",
           "|---|---|---|---|---|---|"]
    keys = dict.fromkeys((r["model"], r["n"], r["way"]) for r in rows)
    for model, n, way in keys:
        mine = [r for r in rows if (r["model"], r["n"], r["way"]) == (model, n, way)]
        seconds = " / ".join(f"{r['seconds']:.2f}" for r in mine)
        out.append(f"| {model} | {n} | {way} | {seconds} | {statistics.median(r['seconds'] for r in mine):.2f} | "
                   f"{statistics.median(r['tps'] for r in mine):.0f} |")
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", action="append", required=True)
    parser.add_argument("--answers", type=lambda text: [int(n) for n in text.split(",")], default=[2, 3, 4])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tokens", type=int, default=64)
    args = parser.parse_args()
    rows: list[dict] = []
    for model in args.model:
        rows += asyncio.run(measure_model(model, args))
    print(table(rows))


if __name__ == "__main__":
    main()
