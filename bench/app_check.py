"""One real run of the whole app, as a user starts it, recorded for a report.

    python -m bench.app_check --model DIR --out DIR

Launches `python launch.py` on a pseudo-terminal (so the start progress bar is drawn), records /healthz,
/readyz and `launch.py check` while loading and when ready, chats through /v1 (one long answer, then 12
at once), reads the GPU memory series from /metrics (NVML, sampled while answering) and nvidia-smi,
stops with SIGINT and checks again. Writes ``report.json`` and ``terminal.txt`` to --out and prints a
short summary. Works on a GPU with the real-shaped model and on a CPU with the tiny one.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

from tests.support.app_process import LaunchedApp, get
from tests.support.metrics import metric_value

SERIES = ("ernie_chat_gpu_memory_used_bytes", "ernie_chat_gpu_memory_peak_bytes", "vllm:kv_cache_usage_perc",
          "ernie_chat_generated_tokens_total", "ernie_chat_active_requests")


def metrics(url: str) -> dict:
    text = get(url + "/metrics")[1]
    out = {}
    for name in SERIES:
        try:
            out[name] = metric_value(text, name)
        except KeyError:
            out[name] = None
    return out


async def chat(client: httpx.AsyncClient, url: str, prompt: str, max_tokens: int) -> dict:
    body = {"messages": [{"role": "user", "content": prompt}], "max_tokens": max_tokens, "stream": True,
            "temperature": 0.8}
    start, first, pieces = time.perf_counter(), None, 0
    async with client.stream("POST", url + "/v1/chat/completions", json=body, timeout=300) as r:
        r.raise_for_status()
        async for line in r.aiter_lines():
            if line.startswith("data: {"):
                event = json.loads(line[6:])
                if event["choices"][0]["delta"].get("content"):
                    first = first or time.perf_counter()
                    pieces += 1
    end = time.perf_counter()
    return {"seconds": round(end - start, 3), "ttft_s": round((first or end) - start, 3), "pieces": pieces}


async def chats(url: str) -> dict:
    async with httpx.AsyncClient() as client:
        one = await chat(client, url, "请用三句话解释量子纠缠，要求通俗易懂", 512)
        during: list = []

        async def sample():
            while True:
                during.append(await asyncio.to_thread(metrics, url))
                await asyncio.sleep(0.5)

        sampler = asyncio.create_task(sample())
        many = await asyncio.gather(*(chat(client, url, f"Write story number {i}.", 256) for i in range(12)))
        sampler.cancel()
    return {"single": one, "concurrent_12": many, "metrics_during": during}


def nvidia_smi() -> str:
    if not shutil.which("nvidia-smi"):
        return "no nvidia-smi"
    return subprocess.run(["nvidia-smi", "--query-gpu=name,memory.used,memory.total", "--format=csv,noheader"],
                          capture_output=True, text=True).stdout.strip()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("extra", nargs="*", help="more launch.py flags")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    report: dict = {"gpu_before": nvidia_smi()}
    app = LaunchedApp(Path(args.model), out, *args.extra, terminal=True)
    try:
        report["http_after_s"] = round(app.wait_http(timeout=60), 2)
        report["healthz_loading"] = get(app.url + "/healthz")[1]
        report["readyz_loading"] = get(app.url + "/readyz")[1]
        report["check_loading"] = app.check().stdout.strip()
        report["ready_after_s"] = round(app.wait_ready(timeout=600), 1)
        report["readyz_ready"] = get(app.url + "/readyz")[1]
        report["check_ready"] = app.check().stdout.strip()
        report["metrics_after_load"] = metrics(app.url)
        report["gpu_after_load"] = nvidia_smi()
        report["chats"] = asyncio.run(chats(app.url))
        report["metrics_after_chats"] = metrics(app.url)
        report["gpu_after_chats"] = nvidia_smi()
        report["stop_s"] = round(app.stop(signal.SIGINT, timeout=60), 1)
        report["exit_code"] = app.proc.returncode
        report["check_stopped"] = app.check().stdout.strip()
    finally:
        app.kill()
        (out / "terminal.txt").write_text(app.output())
        (out / "report.json").write_text(json.dumps(report, indent=1, ensure_ascii=False))
    gib = lambda b: "-" if b is None else f"{b / 2**30:.2f} GiB"  # noqa: E731
    m_load, m_end = report["metrics_after_load"], report["metrics_after_chats"]
    single = report["chats"]["single"]
    print(f"HTTP after {report['http_after_s']} s, ready after {report['ready_after_s']} s")
    print(f"check: loading -> {report['check_loading']!r}; ready -> {report['check_ready']!r}; "
          f"stopped -> {report['check_stopped']!r} (exit {report['exit_code']} after {report['stop_s']} s)")
    print(f"GPU memory (NVML via /metrics): after load {gib(m_load['ernie_chat_gpu_memory_used_bytes'])}, "
          f"peak while answering {gib(m_end['ernie_chat_gpu_memory_peak_bytes'])}; "
          f"nvidia-smi {report['gpu_after_chats']}")
    print(f"one answer: {single['pieces']} pieces in {single['seconds']} s (TTFT {single['ttft_s']} s)")
    return 0 if report["exit_code"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
