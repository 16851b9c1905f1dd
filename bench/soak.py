"""Soak: chats at a steady rate against `python launch.py` (real engine), for a duration.

    python -m bench.soak --duration 1200 --rate 60 --concurrency 4 [--url http://127.0.0.1:8000 --pid PID]

Without --url it builds the tiny test model and launches the app itself. Requests go through the app's
OpenAI-compatible route (the same template, queue and engine path as the UI). Fails (exit 1) on any failed
request, or if the app's memory (RSS of the server and its engine processes) grows more than 5% between
the end of the warm-up and the end of the run.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx
import psutil

PROMPTS = ["请用三句话解释量子纠缠，要求通俗易懂", "Write a short poem about the sea.", "你好", "What is a KV cache?",
           "Explain recursion to a child.", "列出三种水果。"]


def rss_by_process(pid: int) -> dict[str, int]:
    """RSS of the app and each of its processes (vLLM's engine core, its worker, ...)."""
    proc = psutil.Process(pid)
    sizes = {f"app:{pid}": proc.memory_info().rss}
    for child in proc.children(recursive=True):
        try:
            sizes[f"{child.name()}:{child.pid}"] = child.memory_info().rss
        except psutil.NoSuchProcess:
            pass
    return sizes


def tree_rss(pid: int) -> int:
    return sum(rss_by_process(pid).values())


async def one_chat(client: httpx.AsyncClient, url: str, rng: random.Random, stats: dict) -> None:
    history = [{"role": "user", "content": rng.choice(PROMPTS)}]
    for _turn in range(rng.randint(1, 3)):  # multi-turn: history grows like a real chat
        body = {"messages": history, "max_tokens": rng.choice([16, 64, 128]), "stream": True}
        start = time.perf_counter()
        text, ok = [], False
        try:
            async with client.stream("POST", url + "/v1/chat/completions", json=body, timeout=120) as r:
                if r.status_code != 200:
                    raise RuntimeError(f"HTTP {r.status_code}: {(await r.aread())[:200]!r}")
                async for line in r.aiter_lines():
                    if line == "data: [DONE]":
                        ok = True
                    elif line.startswith("data: "):
                        event = json.loads(line[6:])
                        if "error" in event:
                            raise RuntimeError(event["error"]["message"])
                        text.append(event["choices"][0]["delta"].get("content", ""))
            if not ok:
                raise RuntimeError("stream ended without [DONE]")
            stats["ok"] += 1
            stats["latency"].append(time.perf_counter() - start)
        except Exception as err:  # every failure counts; the soak fails on any
            stats["failed"] += 1
            stats["errors"].append(f"{type(err).__name__}: {err}"[:300])
            return
        history += [{"role": "assistant", "content": "".join(text)}, {"role": "user", "content": rng.choice(PROMPTS)}]


async def fill_kv_cache(url: str, concurrency: int, stats: dict) -> None:
    async with httpx.AsyncClient() as client:
        for _ in range(3):
            bodies = [{"messages": [{"role": "user", "content": f"{i} " + "量子纠缠 entanglement " * 600}],
                       "max_tokens": 16} for i in range(max(concurrency, 8))]
            replies = await asyncio.gather(*(client.post(url + "/v1/chat/completions", json=b, timeout=300)
                                             for b in bodies))
            for r in replies:
                stats["ok" if r.status_code == 200 else "failed"] += 1
                if r.status_code != 200:
                    stats["errors"].append(f"warm-up HTTP {r.status_code}: {r.text[:200]}")


async def sample_rss(pid: int | None, every: float, timeline: list) -> None:
    """RSS per process every `every` seconds, so a report shows whether memory settles or keeps climbing."""
    start = time.time()
    while pid:
        sizes = rss_by_process(pid)
        timeline.append({"t_s": round(time.time() - start), "total_mib": round(sum(sizes.values()) / 2**20),
                         **{name.rsplit(":", 1)[0]: round(v / 2**20) for name, v in sizes.items() if v > 50 * 2**20}})
        print(json.dumps(timeline[-1]), flush=True)
        await asyncio.sleep(every)


async def run_load(url: str, duration: float, rate: float, concurrency: int, stats: dict,
                   pid: int | None = None, sample_every: float = 0, timeline: list | None = None) -> None:
    sampler = asyncio.create_task(sample_rss(pid, sample_every, timeline)) if sample_every and pid else None
    try:
        await _load(url, duration, rate, concurrency, stats)
    finally:
        if sampler:
            sampler.cancel()


async def _load(url: str, duration: float, rate: float, concurrency: int, stats: dict) -> None:
    rng = random.Random(0)
    limit = asyncio.Semaphore(concurrency)
    tasks = set()
    async with httpx.AsyncClient() as client:
        end = time.time() + duration
        while time.time() < end:
            await limit.acquire()

            async def go():
                try:
                    await one_chat(client, url, rng, stats)
                finally:
                    limit.release()

            task = asyncio.create_task(go())
            tasks.add(task)
            task.add_done_callback(tasks.discard)
            await asyncio.sleep(rng.expovariate(rate / 60.0))  # rate is chats per minute
        await asyncio.gather(*tasks)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=120, help="seconds of load")
    parser.add_argument("--rate", type=float, default=60, help="new chats per minute")
    parser.add_argument("--concurrency", type=int, default=4, help="chats in flight at most")
    parser.add_argument("--url", help="an app already running (else one is launched with the tiny model)")
    parser.add_argument("--pid", type=int, help="with --url: the app's process id, for RSS")
    parser.add_argument("--max-rss-growth", type=float, default=0.05)
    parser.add_argument("--warmup", type=float, default=60, help="seconds of chats before the RSS baseline")
    parser.add_argument("--sample-every", type=float, default=60, help="seconds between RSS samples (0: none)")
    args = parser.parse_args()

    app = None
    if args.url:
        url, pid = args.url.rstrip("/"), args.pid
    else:
        from tests.support.app_process import LaunchedApp
        from tests.tiny_model import build

        tmp = Path(tempfile.mkdtemp(prefix="soak-"))
        app = LaunchedApp(build(tmp / "model"), tmp)
        app.wait_http()
        print(f"app ready after {app.wait_ready():.1f}s", flush=True)
        url, pid = app.url, app.proc.pid
    try:
        warm = {"ok": 0, "failed": 0, "latency": [], "errors": []}
        # Warm-up until memory settles: long prompts touch every KV-cache page (on a CPU the cache is
        # ordinary memory, counted in RSS only once touched), then ordinary chats fill the kernels' caches.
        asyncio.run(fill_kv_cache(url, args.concurrency, warm))
        asyncio.run(run_load(url, args.warmup, args.rate * 2, args.concurrency, warm))
        rss_start = tree_rss(pid) if pid else None
        by_process_start = rss_by_process(pid) if pid else {}
        stats = {"ok": 0, "failed": 0, "latency": [], "errors": []}
        t0 = time.time()
        timeline: list = []
        asyncio.run(run_load(url, args.duration, args.rate, args.concurrency, stats, pid, args.sample_every, timeline))
        rss_end = tree_rss(pid) if pid else None
        by_process_end = rss_by_process(pid) if pid else {}
    finally:
        if app:
            app.stop()
            app.kill()
    growth = (rss_end - rss_start) / rss_start if rss_start else 0.0
    lat = sorted(stats["latency"]) or [0]
    report = {"seconds": round(time.time() - t0), "requests_ok": stats["ok"], "requests_failed": stats["failed"],
              "warmup_failed": warm["failed"], "latency_p50_s": round(statistics.median(lat), 2),
              "latency_p95_s": round(lat[int(len(lat) * 0.95) - 1 if len(lat) > 1 else 0], 2),
              "rss_start_mib": round((rss_start or 0) / 2**20), "rss_end_mib": round((rss_end or 0) / 2**20),
              "rss_growth_pct": round(growth * 100, 2),
              "rss_mib_by_process": {k: [round(by_process_start.get(k, 0) / 2**20), round(v / 2**20)]
                                     for k, v in by_process_end.items()},
              "rss_timeline": timeline,
              "errors": stats["errors"][:5] + warm["errors"][:5]}
    print(json.dumps(report, ensure_ascii=False, indent=1))
    failed = stats["failed"] + warm["failed"] > 0 or stats["ok"] == 0 or growth > args.max_rss_growth
    print("SOAK FAILED" if failed else "SOAK PASSED")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
