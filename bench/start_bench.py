"""Start benchmark (issue 13): how long `python launch.py` takes until it answers, and how fast it answers.

    python -m bench.start_bench --model DIR --out DIR [--configs off-cold,on-cold,off-warm,on-warm] [--runs 3]
    python -m bench.start_bench --cpu --model /tmp/tiny-sb --out DIR      # the CPU row: quick-start off, 3 runs

Each configuration launches the app as a user does (``--quick-start off|on``; ``cold`` first deletes vLLM's
torch.compile cache), polls /healthz and /readyz every 0.1 s in a thread and records when HTTP first
answers, when each start step (``step``/``steps``, ``detail``) began, ready, and the switch to the full-speed
engine; right after ready it times one 256-token greedy answer through /v1/chat/completions (again after
the switch when quick-start is on), then sends SIGINT and times the exit. Configurations run interleaved
(round by round); ``start_bench.json`` in --out is rewritten after every run, and a markdown table is
printed at the end.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any, Optional

import httpx
import psutil

from app.engine.orphan_guard import ENGINE_PROCESS_MODULE
from tests.support.app_process import LaunchedApp, alive, get

PROMPT = "Write a long story about a lighthouse keeper and the sea."
LOG_LINE = re.compile(r"ERROR|Traceback|Exception|Error:|CRITICAL|failed|quick.start|starting engine|full.speed"
                      r"|shutdown:|engine process", re.IGNORECASE)


def compile_cache() -> Path:
    root = os.environ.get("VLLM_CACHE_ROOT") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "vllm")
    return Path(root) / "torch_compile_cache"


class Poller(threading.Thread):
    """Polls /healthz and /readyz every 0.1 s; records the first HTTP answer and every change of the status."""

    def __init__(self, app: LaunchedApp) -> None:
        super().__init__(daemon=True)
        self.app, self.stop_event = app, threading.Event()
        self.http_s: Optional[float] = None
        self.ready_s: Optional[float] = None
        self.full_speed_s: Optional[float] = None
        self.events: list[dict[str, Any]] = []
        self.last: dict[str, Any] = {}

    def since(self) -> float:
        return round(time.time() - self.app.started, 2)

    def run(self) -> None:
        while not self.stop_event.is_set() and self.app.proc.poll() is None:
            try:
                if self.http_s is None and get(self.app.url + "/healthz", 1)[0] == 200:
                    self.http_s = self.since()
                if self.http_s is not None:
                    code, body = get(self.app.url + "/readyz", 2)
                    status = json.loads(body)
                    status["http"] = code
                    self.last = status
                    if code == 200 and self.ready_s is None:
                        self.ready_s = self.since()
                    if status.get("speed") in ("full", "starting_only") and self.full_speed_s is None:
                        self.full_speed_s = self.since()
                    key = {k: status.get(k) for k in ("http", "state", "step", "detail", "speed")}
                    if not self.events or {k: self.events[-1].get(k) for k in key} != key:
                        self.events.append({"t": self.since(), **key, "ready_seconds": status.get("ready_seconds"),
                                            "full_speed_seconds": status.get("full_speed_seconds")})
                        print("  ", json.dumps(self.events[-1], ensure_ascii=False), flush=True)
            except (OSError, ValueError):
                pass
            time.sleep(0.1)

    def wait(self, what: str, timeout: float) -> Optional[float]:
        deadline = time.time() + timeout
        while time.time() < deadline:
            value = getattr(self, what)
            if value is not None:
                return value
            if self.app.proc.poll() is not None:
                raise RuntimeError(f"launch.py exited {self.app.proc.returncode}")
            time.sleep(0.05)
        return None


def decode(url: str, max_tokens: int) -> dict[str, Any]:
    """One greedy streamed answer: TTFT, tokens (from usage), and decode tok/s after the first token."""
    body = {"messages": [{"role": "user", "content": PROMPT}], "max_tokens": max_tokens, "temperature": 0,
            "stream": True, "stream_options": {"include_usage": True}}
    start = time.perf_counter()
    first = last = None
    tokens, reason = 0, None
    with httpx.stream("POST", url + "/v1/chat/completions", json=body, timeout=300) as r:
        r.raise_for_status()
        for line in r.iter_lines():
            if not line.startswith("data: {"):
                continue
            event = json.loads(line[6:])
            if event.get("usage"):
                tokens = event["usage"]["completion_tokens"]
            for choice in event.get("choices") or []:
                if choice["delta"].get("content"):
                    first = first or time.perf_counter()
                    last = time.perf_counter()
                reason = choice.get("finish_reason") or reason
    end = time.perf_counter()
    span = (last or end) - (first or end)
    return {"seconds": round(end - start, 3), "ttft_s": round((first or end) - start, 3), "tokens": tokens,
            "finish_reason": reason, "tok_s": round((tokens - 1) / span, 1) if tokens > 1 and span > 0 else None}


# vLLM's own start phases, as its INFO lines in the app log say them (0.29 wordings); seconds
VLLM_PHASES = {
    "weights": re.compile(r"Loading weights took ([\d.]+) s"),
    "model_load": re.compile(r"Model loading took [\d.]+ GiB memory and ([\d.]+) s"),
    "dynamo": re.compile(r"Dynamo bytecode transform time: ([\d.]+) s"),
    "compile": re.compile(r"torch\.compile (?:takes|took) ([\d.]+) s in total"),
    "profiling": re.compile(r"Memory profiling takes ([\d.]+) s"),
    "graphs": re.compile(r"Graph capturing finished in ([\d.]+) secs"),
    "init_engine": re.compile(r"init engine \(profile, create kv cache, warmup model\) took ([\d.]+)"),
    "jit_warmup": re.compile(r"JIT kernel warmup finished in ([\d.]+)s"),
}


def vllm_phases(log_file: Path) -> dict[str, list[float]]:
    """Each vLLM start phase's seconds, in log order (two values where quick-start ran two engines)."""
    text = log_file.read_text(errors="replace") if log_file.exists() else ""
    return {name: [float(v) for v in pattern.findall(text)] for name, pattern in VLLM_PHASES.items()}


def log_lines(log_file: Path, limit: int = 80) -> list[str]:
    if not log_file.exists():
        return []
    lines = [line for line in log_file.read_text(errors="replace").splitlines() if LOG_LINE.search(line)]
    return lines[-limit:]


def one_run(model: str, work: Path, quick: Optional[str], cold: bool, max_tokens: int,
            timeout: float) -> dict[str, Any]:
    """One launch; ``quick`` None launches with the default flags, as a user does."""
    cache = compile_cache()
    if cold:
        shutil.rmtree(cache, ignore_errors=True)
    work.mkdir(parents=True, exist_ok=True)
    result: dict[str, Any] = {"quick_start": quick or "default", "cache": "cold" if cold else "warm",
                              "cache_existed": cache.exists()}
    app = LaunchedApp(Path(model), work, *(("--quick-start", quick) if quick else ()))
    result["pid"] = app.proc.pid
    processes: list[psutil.Process] = []
    poller = Poller(app)
    poller.start()
    try:
        poller.wait("http_s", 120)
        if poller.wait("ready_s", timeout) is None:
            raise TimeoutError(f"not ready in {timeout} s")
        result["speed_at_ready"] = poller.last.get("speed")
        processes = [psutil.Process(pid) for pid in app.descendants()]
        result["engine_process_pids"] = [p.pid for p in processes if ENGINE_PROCESS_MODULE in " ".join(p.cmdline())]
        result["decode_ready"] = decode(app.url, max_tokens)
        result["speed_after_decode_ready"] = poller.last.get("speed")
        if quick != "off" and poller.last.get("speed") is not None:
            if poller.wait("full_speed_s", timeout) is None:
                result["error"] = f"no switch to the full-speed engine in {timeout} s"
            else:
                result["decode_full"] = decode(app.url, max_tokens)
        result["readyz_final"] = poller.last
    except Exception as err:  # noqa: BLE001 -- a failed start is a result: record it, stop the app, go on
        result["error"] = f"{type(err).__name__}: {err}"
    finally:
        result.update(http_s=poller.http_s, ready_s=poller.ready_s, full_speed_s=poller.full_speed_s)
        poller.stop_event.set()
        result["exit_s"] = round(app.stop(signal.SIGINT, timeout=60), 2)
        result["exit_code"] = app.proc.returncode
        # Its processes seen while it ran, alive now: an orphan (a parent gone) is no descendant any more.
        result["left_after_exit"] = sorted({*app.descendant_names(), *(p.name() for p in processes if alive(p))})
        app.kill()
        result["events"] = poller.events
        result["log_lines"] = log_lines(app.log_file)
        result["vllm_phases"] = vllm_phases(app.log_file)
        if "error" in result:
            result["output_tail"] = app.output()[-4000:]
    return result


def step_times(run: dict[str, Any]) -> dict[int, float]:
    """The first time each start step was seen (the starting engine's steps when quick-start is on)."""
    seen: dict[int, float] = {}
    for event in run["events"]:
        if event.get("step") is not None:
            seen.setdefault(event["step"], event["t"])
    return seen


def phase_cell(run: dict[str, Any]) -> str:
    """'weights 0.5, 0.35 · compile 12.3 · graphs 3 · init 2.05, 5.12': every engine's value in log order, i.e.
    in the order the engines reached that phase (the starting engine has no compile or graph phase)."""
    phases = run.get("vllm_phases") or {}
    parts = [f"{name} {', '.join(f'{v:g}' for v in phases[key])}"
             for key, name in (("weights", "weights"), ("compile", "compile"), ("graphs", "graphs"),
                               ("jit_warmup", "jit"), ("init_engine", "init")) if phases.get(key)]
    return " · ".join(parts) or "-"


def table(runs: list[dict[str, Any]]) -> str:
    fmt = lambda v: "-" if v is None else f"{v}"  # noqa: E731
    rows = ["| run | quick-start | cache | HTTP s | step 1/2/3/4 began s | ready s | full speed s | "
            "tok/s starting | tok/s full | vLLM phases s | exit s | error |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for i, r in enumerate(runs, 1):
        steps = step_times(r)
        began = "/".join(fmt(steps.get(n)) for n in range(1, 5))
        rows.append(f"| {i} | {r['quick_start']} | {r['cache']} | {fmt(r['http_s'])} | {began} | {fmt(r['ready_s'])} | "
                    f"{fmt(r['full_speed_s'])} | {fmt((r.get('decode_ready') or {}).get('tok_s'))} | "
                    f"{fmt((r.get('decode_full') or {}).get('tok_s'))} | {phase_cell(r)} | {r['exit_s']} | "
                    f"{r.get('error', '')[:60]} |")
    return "\n".join(rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--configs", default="off-cold,on-cold,off-warm,on-warm",
                        help="comma-separated QUICK-CACHE pairs (QUICK: off/on/auto, CACHE: cold/warm), run in order")
    parser.add_argument("--runs", type=int, default=3, help="rounds over the configurations")
    parser.add_argument("--max-tokens", type=int, default=256)
    parser.add_argument("--timeout", type=float, default=300, help="seconds to wait for ready, and for full speed")
    parser.add_argument("--cpu", action="store_true", help="the CPU row: --configs off-warm")
    args = parser.parse_args()
    configs = ["off-warm"] if args.cpu else args.configs.split(",")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    work = Path(os.environ.get("TMPDIR", "/tmp")) / f"start_bench_{os.getpid()}"
    runs: list[dict[str, Any]] = []
    for round_ in range(args.runs):
        for config in configs:
            quick, cache = config.split("-")
            run = one_run(args.model, work / f"{round_}-{config}", quick, cache == "cold", args.max_tokens,
                          args.timeout)
            run["round"] = round_ + 1
            log = work / f"{round_}-{config}" / "llm.log"
            if log.exists():  # the whole app log beside the JSON, for the failures' exact lines
                shutil.copy(log, out / f"{round_ + 1}-{config}-llm.log")
            runs.append(run)
            (out / "start_bench.json").write_text(json.dumps(runs, indent=1, ensure_ascii=False))
            print(table(runs).splitlines()[-1], flush=True)
    print(table(runs))
    return 1 if any("error" in r for r in runs) else 0


if __name__ == "__main__":
    sys.exit(main())
