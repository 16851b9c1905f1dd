"""Benchmark the project's own EngineHost per profile: start time, GPU memory, TTFT, decode, aggregate.

    python -m bench.engine_bench --model DIR [--profiles auto,tutorial-a100,...] [--rounds 2] [--out results.jsonl]
    python -m bench.engine_bench --table results.jsonl [more.jsonl ...]   # the rows as a Markdown table
    python -m bench.engine_bench --build-model DIR   # random-weight model of the real ERNIE-4.5-0.3B config
    python -m bench.engine_bench --model DIR --profiles auto,auto+async_scheduling=false,auto+stream_interval=8

A profile may carry engine arguments on top of its plan, ``PROFILE+ARG=JSON_VALUE[+...]``: the same plan with
one setting changed, measured interleaved with the plain one; ``PROFILE+env.NAME=VALUE`` sets an environment
variable for that engine's core only (the plan's ``core_env``), e.g. ``auto+env.VLLM_USE_FLASHINFER_SAMPLER=0``.
``--sampled`` samples as the chat does (temperature 0.8, top_p 0.8) instead of greedily, so the sampler runs.

Profiles run interleaved (a, b, c, a, b, c, ...) so drift on a noisy machine hits them alike; compare
only numbers from one run. Each profile is planned by app.planning.profiles for the card NVML reports, started
through app.engine.host.EngineHost (warm-up included), measured, and shut down.
Token-id prompts and skip_tokenizer_init: speed per token does not depend on the tokenizer.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import statistics
import threading
import time
from dataclasses import replace
from pathlib import Path

from app.engine.host import EngineHost, EngineHostOptions
from app.engine.protocol import Sampling
from app.engine.vllm_engine import create_vllm_engine
from app.planning.engine_plan import ModelShape
from app.planning.hardware import detect_vllm_build, gpu_memory_used, probe_gpus
from app.planning.profiles import plan_engine, with_smaller_kv
from app.settings import PROFILES, EngineSettings
from app.telemetry import AppMetrics

REAL_CONFIG = Path(__file__).resolve().parent.parent / "tests" / "data" / "ernie-4.5-0.3b" / "config.json"
PROMPT_TOKENS = 128


def build_real_shaped_model(out: str) -> None:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.for_model(**json.loads(REAL_CONFIG.read_text()))
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config).to(torch.bfloat16)
    model.save_pretrained(out)
    print(f"built {out}: {sum(p.numel() for p in model.parameters()) / 1e6:.1f}M params", flush=True)


def compile_cache_present() -> bool:
    """vLLM keeps torch.compile results here; a later start with the same shapes reuses them."""
    cache = Path(os.environ.get("VLLM_CACHE_ROOT", Path.home() / ".cache" / "vllm")) / "torch_compile_cache"
    return cache.is_dir() and any(cache.iterdir())


class PeakSampler:
    """NVML used memory sampled every 50 ms while generating."""

    def __init__(self, gpu):
        self.gpu, self.peak, self._stop = gpu, 0, threading.Event()

    def __enter__(self):
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def _run(self):
        while not self._stop.is_set():
            self.peak = max(self.peak, gpu_memory_used(self.gpu) or 0)
            time.sleep(0.05)

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


# What --sampled decodes with: the chat's defaults (app/settings.py), which run the top-p sampler every token.
SAMPLED = {"temperature": 0.8, "top_p": 0.8}
GREEDY = {"temperature": 0.0, "top_p": 1.0}


async def one_stream(host, vocab, max_tokens, seed, sampled=False):
    """One answer through the app's queue (EngineHost.stream): TTFT counts the wait for a free slot too."""
    rng = random.Random(seed)
    prompt = [rng.randrange(10, vocab - 1) for _ in range(PROMPT_TOKENS)]
    # Not detokenized: skip_tokenizer_init (below) leaves the engine without a tokenizer.
    sampling = Sampling(**(SAMPLED if sampled else GREEDY), max_tokens=max_tokens, ignore_eos=True)
    queued = False

    async def on_queued(position):
        nonlocal queued
        queued = True

    start = time.perf_counter()
    first = None
    tokens = 0
    async for delta in host.stream(prompt, sampling, on_queued):
        if first is None and delta.new_tokens:
            first = time.perf_counter()
        tokens += delta.new_tokens
    end = time.perf_counter()
    return {"ttft": first - start, "tokens": tokens, "decode_tps": (tokens - 1) / (end - first),
            "seconds": end - start, "queued": queued}


async def chats_at_once(host, vocab, max_tokens, n, sampled=False) -> dict:
    """n answers sent together: aggregate tok/s, and what each chat saw (its tok/s, its time to first token)."""
    t0 = time.perf_counter()
    results = await asyncio.gather(*(one_stream(host, vocab, max_tokens, 1000 + i, sampled) for i in range(n)))
    wall = time.perf_counter() - t0
    ttfts = sorted(r["ttft"] for r in results)
    waited = [r["ttft"] for r in results if r["queued"]]
    return {"agg_tps": round(sum(r["tokens"] for r in results) / wall, 1),
            "chat_tps": round(statistics.median(r["decode_tps"] for r in results), 1),
            "ttft_ms": round(statistics.median(ttfts) * 1000, 1),
            "ttft_p95_ms": round(ttfts[max(0, int(0.95 * n + 0.5) - 1)] * 1000, 1),
            "queued": len(waited), "queued_ttft_ms": round(statistics.median(waited) * 1000, 1) if waited else None}


BENCH_PROFILES = (*PROFILES, "auto-N")  # auto-N: auto with --max-concurrent-chats N (auto-64: 64 chats at once)
CHATS_PROFILE = re.compile(r"auto-(\d+)")
ENV_PREFIX = "env."


def split_variant(name: str) -> tuple[str, dict]:
    """'auto+async_scheduling=false+stream_interval=8' -> ('auto', {'async_scheduling': False,
    'stream_interval': 8}); 'env.NAME=VALUE' settings are kept as text under their 'env.NAME' key. Raises
    argparse.ArgumentTypeError (one line) for anything else."""
    base, *settings = name.split("+")
    if base not in BENCH_PROFILES and not CHATS_PROFILE.fullmatch(base):
        raise argparse.ArgumentTypeError(f"'{base}' is not a profile; allowed: {', '.join(BENCH_PROFILES)}")
    extra = {}
    for setting in settings:
        key, sep, value = setting.partition("=")
        try:
            if not (key and sep):
                raise ValueError
            extra[key] = value if key.startswith(ENV_PREFIX) else json.loads(value)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"'{setting}' in '{name}' is not ARG=JSON_VALUE (e.g. auto+stream_interval=8)") from None
    return base, extra


def profile_list(text: str) -> list[str]:
    """--profiles, every variant checked before any engine starts."""
    names = [name for name in text.split(",") if name]
    for name in names:
        split_variant(name)
    return names


async def measure(name, model_dir, gpus, build, shape, vocab, args):
    profile, extra = split_variant(name)
    # One engine per profile (quick-start off): the starting engine's figures are bench/start_bench.py's.
    chats = CHATS_PROFILE.fullmatch(profile)
    settings = EngineSettings(profile="auto" if chats else profile, quick_start="off",
                              **({"max_concurrent_chats": int(chats.group(1))} if chats else {}))
    plan = plan_engine(settings, gpus, build, shape)
    env = {key.removeprefix(ENV_PREFIX): value for key, value in extra.items() if key.startswith(ENV_PREFIX)}
    args_extra = {key: value for key, value in extra.items() if not key.startswith(ENV_PREFIX)}
    plan = replace(plan, engine_args={**plan.engine_args, "skip_tokenizer_init": True, **args_extra},
                   core_env={**plan.core_env, **env})
    gpu = plan.gpu
    before = gpu_memory_used(gpu) if gpu else None
    host = EngineHost(EngineHostOptions(lambda progress: model_dir, plan, AppMetrics(),
                                        engine_factory=create_vllm_engine, max_restarts=0,
                                        start_timeout=args.start_timeout, plan_after_out_of_memory=with_smaller_kv))
    started = time.perf_counter()
    host.start_in_background()
    ok = await host.wait_ready(args.start_timeout)
    row = {"profile": name, "engine_args": plan.engine_args, "core_env": plan.core_env, "ok": ok,
           "sampling": SAMPLED if args.sampled else GREEDY}
    if not ok:
        row["error"] = host.status.detail
        await host.shutdown()
        return row
    row["start_s"] = round(time.perf_counter() - started, 1)
    row["mem_before_gib"] = round((before or 0) / 2**30, 2)
    row["mem_after_load_gib"] = round((gpu_memory_used(gpu) or 0) / 2**30, 2) if gpu else None
    with PeakSampler(gpu) if gpu else _null() as sampler:
        singles = [await one_stream(host, vocab, args.decode_tokens, i, args.sampled) for i in range(args.repeats)]
        row["ttft_ms"] = round(statistics.median(s["ttft"] for s in singles) * 1000, 1)
        row["ttft_ms_all"] = [round(s["ttft"] * 1000, 1) for s in singles]
        row["decode_tps"] = round(statistics.median(s["decode_tps"] for s in singles), 1)
        row["decode_tps_all"] = [round(s["decode_tps"], 1) for s in singles]
        for n in args.chats:
            row[f"chats_{n}"] = await chats_at_once(host, vocab, args.batch_tokens, n, args.sampled)
            row[f"agg_tps_{n}"] = row[f"chats_{n}"]["agg_tps"]
        row["mem_peak_gib"] = round(sampler.peak / 2**30, 2) if gpu else None
    await host.shutdown()
    return row


class _null:
    peak = 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


async def main_async(args):
    gpus = probe_gpus()
    build = detect_vllm_build()
    config = json.loads((Path(args.model) / "config.json").read_text())
    shape = ModelShape.from_config(config)
    vocab = int(config["vocab_size"])
    out = open(args.out, "a") if args.out else None
    meta = {"date": time.strftime("%Y-%m-%d"), "gpu": gpus[0].to_dict() if gpus else "cpu",
            "vllm": build.version, "torch_cuda": build.torch_cuda}
    try:
        import torch

        meta["torch"] = torch.__version__
    except ImportError:
        pass
    print(json.dumps(meta), flush=True)
    if out:
        out.write(json.dumps({"meta": meta}) + "\n")
    for rnd in range(args.rounds):
        for profile in args.profiles:
            if rnd > 0 and profile in args.once.split(","):
                continue
            cache_warm = compile_cache_present()
            row = await measure(profile, args.model, gpus, build, shape, vocab, args)
            row["round"] = rnd
            row["compile_cache"] = ("n/a (eager)" if row.get("engine_args", {}).get("enforce_eager") else
                                    "warm" if cache_warm else "cold")
            print(json.dumps(row), flush=True)
            if out:
                out.write(json.dumps(row) + "\n")
                out.flush()


def markdown_table(paths) -> str:
    """One line per profile, each figure listed in run order (rounds of all files, interleaved as run)."""
    rows: dict[str, list[dict]] = {}
    for path in paths:
        for line in Path(path).read_text().splitlines():
            row = json.loads(line)
            if "profile" in row:
                rows.setdefault(row["profile"], []).append(row)

    def figures(items, key, fmt="{:,.0f}"):
        return " / ".join("failed" if not r.get("ok") else "-" if r.get(key) is None else fmt.format(r[key])
                          for r in items)

    out = ["| profile | engine start s | GPU mem after load / peak GiB | TTFT ms (median of 3) | "
           "1-stream decode tok/s | 12 chats tok/s | 64 chats tok/s |", "|---|---|---|---|---|---|---|"]
    for profile, items in rows.items():
        starts = " / ".join("failed" if not r.get("ok") else
                            f"{r['start_s']:.1f}" + (" cold" if r.get("compile_cache") == "cold" else "")
                            for r in items)
        memory = ", ".join("failed" if not r.get("ok") else "RAM" if r["mem_after_load_gib"] is None else
                           f"{r['mem_after_load_gib']:.1f}/{r['mem_peak_gib']:.1f}" for r in items)
        out.append(f"| {profile} | {starts} | {memory} | {figures(items, 'ttft_ms', '{:.0f}')} | "
                   f"{figures(items, 'decode_tps')} | {figures(items, 'agg_tps_12')} | "
                   f"{figures(items, 'agg_tps_64')} |")
    return "\n".join(out)


def sessions_table(paths) -> str:
    """One line per profile and number of chats at once: what each chat saw, and the card's memory."""
    out = ["| profile | chats at once | aggregate tok/s | per-chat tok/s (median) | TTFT ms median / p95 | "
           "chats queued (their median TTFT ms) | GPU mem peak GiB |", "|---|---|---|---|---|---|---|"]
    for path in paths:
        for line in Path(path).read_text().splitlines():
            row = json.loads(line)
            memory = "RAM" if row.get("mem_peak_gib") is None else row["mem_peak_gib"]
            for key in sorted((k for k in row if k.startswith("chats_")), key=lambda k: int(k.split("_")[1])):
                c = row[key]
                waited = "" if c["queued_ttft_ms"] is None else f" ({c['queued_ttft_ms']:,.0f})"
                out.append(f"| {row['profile']} | {key.split('_')[1]} | {c['agg_tps']:,.0f} | {c['chat_tps']:,.0f} | "
                           f"{c['ttft_ms']:,.0f} / {c['ttft_p95_ms']:,.0f} | {c['queued']}{waited} | {memory} |")
    return "\n".join(out)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model")
    parser.add_argument("--build-model")
    parser.add_argument("--profiles", type=profile_list,
                        default="auto,tutorial-a100,tutorial-a100-eager,tutorial-a10,tutorial-v100")
    parser.add_argument("--once", default="", help="profiles to run in the first round only")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3, help="single-stream answers per profile")
    parser.add_argument("--decode-tokens", type=int, default=256)
    parser.add_argument("--batch-tokens", type=int, default=128)
    parser.add_argument("--chats", type=lambda text: [int(n) for n in text.split(",")], default=[12, 64],
                        help="numbers of chats sent at once, each measured (default 12,64)")
    parser.add_argument("--sessions-table", nargs="+", metavar="JSONL",
                        help="print what each chat saw, per profile and number of chats at once")
    parser.add_argument("--start-timeout", type=float, default=240)
    parser.add_argument("--out")
    parser.add_argument("--sampled", action="store_true", help="decode at temperature 0.8, top_p 0.8 (the chat's)")
    parser.add_argument("--table", nargs="+", metavar="JSONL", help="print the rows of these files as a table")
    args = parser.parse_args()
    if args.table:
        print(markdown_table(args.table))
        return
    if args.sessions_table:
        print(sessions_table(args.sessions_table))
        return
    if args.build_model:
        build_real_shaped_model(args.build_model)
    if args.model:
        asyncio.run(main_async(args))


if __name__ == "__main__":
    main()
