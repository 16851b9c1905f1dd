"""Attached documents (issue 23): extraction time of a 100-page PDF, and time to first token with a ~20,000-token
document in the prompt, through the app's own code (the worker process, the <document> delimiter, EngineHost).

    python -m bench.documents --out DIR [--model DIR] [--tokens 20000] [--pages 100 | --pdf FILE]

Without ``--model`` it builds the tiny random ERNIE of tests/tiny_model.py with a 32,768-token context (the
CPU figure); on a GPU pass the real model (ERNIE-4.5-0.3B-PT reads 131,072 tokens). Writes DIR/documents.json and
prints a Markdown table last.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import time
from pathlib import Path

from app.conversation import ChatTemplate, fit_to_context
from app.documents.extract import extract
from app.documents.limits import MAX_DOCUMENT_CHARS, Kind
from app.documents.prompt import render_turn
from app.documents.worker import read_in_worker

WORDS = ["pump", "valve", "pressure", "schedule", "report", "quarter", "revenue", "harbour", "north", "gate",
         "access", "visitor", "reception", "parking", "building", "engine", "manual", "section", "warning", "oil",
         "weekly", "monthly", "inspection"]


def prose(rng: random.Random, chars: int) -> str:
    out, length = [], 0
    while length < chars:
        sentence = " ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 16))).capitalize() + ". "
        out.append(sentence)
        length += len(sentence)
    return "".join(out)


def make_pdf(path: Path, pages: int) -> Path:
    from tests.sample_documents import pdf

    rng = random.Random(23)
    return pdf(path, [f"Page {n}. " + prose(rng, 2500) for n in range(1, pages + 1)])


def time_extraction(path: Path, runs: int = 3) -> dict:
    in_process, worker = [], []
    for _ in range(runs):
        started = time.perf_counter()
        text = extract(path, path.name, Kind.PDF, MAX_DOCUMENT_CHARS).text
        in_process.append(time.perf_counter() - started)
        started = time.perf_counter()
        asyncio.run(read_in_worker(path, path.name, Kind.PDF, MAX_DOCUMENT_CHARS))
        worker.append(time.perf_counter() - started)
    return {"bytes": path.stat().st_size, "characters": len(text), "in_process_s": statistics.median(in_process),
            "worker_s": statistics.median(worker)}


async def time_first_token(model: str, tokens: int, runs: int = 3) -> dict:
    from transformers import AutoTokenizer

    from app.engine.host import EngineHost, EngineHostOptions
    from app.engine.protocol import Sampling
    from app.engine.vllm_engine import create_vllm_engine
    from app.planning.engine_plan import ModelShape
    from app.planning.hardware import cpu_facts, detect_vllm_build, probe_gpus
    from app.planning.profiles import plan_engine, with_smaller_kv
    from app.settings import EngineSettings
    from app.telemetry import AppMetrics

    shape = ModelShape.from_config(json.loads((Path(model) / "config.json").read_text()))
    context = min(shape.max_position_embeddings, 131072)
    plan = plan_engine(EngineSettings(max_model_len=context), probe_gpus(), detect_vllm_build(), shape, cpu_facts())
    template = ChatTemplate(AutoTokenizer.from_pretrained(model))
    host = EngineHost(EngineHostOptions(lambda progress: model, plan, AppMetrics(), 4,
                                        engine_factory=create_vllm_engine, plan_after_out_of_memory=with_smaller_kv))
    host.start_in_background()
    assert await host.wait_ready(900), host.status.detail
    rng = random.Random(7)
    text = prose(rng, tokens * 3)
    while template.count([text])[0] > tokens:  # trim to about ``tokens``
        text = text[: int(len(text) * 0.97)]
    results = []
    for run in range(runs):
        # A different first line each run: vLLM's prefix cache must not serve the document from an earlier run.
        document = [{"name": "manual.txt", "text": f"Copy {run} {rng.random()}\n" + text}]
        question = "What does the manual say about the north gate?"
        started = time.perf_counter()
        fitted = fit_to_context("", [], render_turn(question, document), plan.engine_args["max_model_len"], 16,
                                template)
        built = time.perf_counter()
        first = None
        async for delta in host.stream(fitted.token_ids, Sampling(temperature=0.8, top_p=0.8, max_tokens=16)):
            if first is None and delta.new_tokens:
                first = time.perf_counter()
        results.append({"prompt_tokens": len(fitted.token_ids), "prompt_build_s": built - started,
                        "ttft_s": first - built})
    await host.shutdown()
    return {"model": model, "device": plan.device, "context": context,
            "prompt_tokens": results[0]["prompt_tokens"],
            "prompt_build_s": statistics.median(r["prompt_build_s"] for r in results),
            "ttft_s": statistics.median(r["ttft_s"] for r in results), "runs": results}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="model directory (default: the tiny ERNIE with a 32k context, built here)")
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--tokens", type=int, default=20000)
    parser.add_argument("--pages", type=int, default=100)
    parser.add_argument("--pdf", type=Path, help="time this PDF instead of writing one (fpdf2, a dev package, "
                        "writes it: a GPU machine without the dev install reads one made elsewhere)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    model = args.model
    if model is None:
        from tests.tiny_model import build

        model = str(build(args.out / "tiny-32k", max_positions=32768))
    pdf = args.pdf or make_pdf(args.out / f"{args.pages}-pages.pdf", args.pages)
    extraction = time_extraction(pdf)
    first_token = asyncio.run(time_first_token(model, args.tokens))
    result = {"date": time.strftime("%Y-%m-%d"), "pdf": pdf.name, "extraction": extraction,
              "first_token": first_token}
    (args.out / "documents.json").write_text(json.dumps(result, indent=1))
    print(f"\n| measure | value |\n|---|---|\n"
          f"| {pdf.name} ({extraction['bytes'] / 2**20:.1f} MB, {extraction['characters']:,} characters): "
          f"extraction in the worker process (spawn included) | {extraction['worker_s']:.2f} s |\n"
          f"| the same, in process (pypdf alone) | {extraction['in_process_s']:.2f} s |\n"
          f"| prompt of {first_token['prompt_tokens']:,} tokens (a document of ~{args.tokens:,}): building it "
          f"(template, tokenizer) | {first_token['prompt_build_s']:.2f} s |\n"
          f"| time to first token, {Path(model).name} | {first_token['ttft_s']:.2f} s |")


if __name__ == "__main__":  # vLLM's CPU build spawns its engine and re-imports this file
    main()
