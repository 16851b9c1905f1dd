"""GPU smoke run: `python launch.py` with the default flags starts the compiled engine, on a new machine's first
launch (every cache cold) and warm.

    python -m bench.gpu_smoke [--model DIR] [--out DIR] [--first-launches 3] [--flashinfer-cold 1]

Builds the full-size random ERNIE (tests/tiny_model.py --full-size) unless --model names one, then launches the
app as a user does: --first-launches times with every cache a first launch lacks removed (vLLM's: torch.compile
and FlashInfer autotune; torch inductor's, Triton's, FlashInfer's JIT, CUDA's), --flashinfer-cold times with
only FlashInfer's JIT cache removed (the kernels both engines waited 80-100 s for on a new H100, before the
starting engine sampled with PyTorch: its head start must show there), then once with them warm. Each
launch must: become ready; reach ``speed: full`` in /readyz (the compiled engine took over from the eager starting
engine, on its first try); decode at least 3x faster there than on the starting engine (one 256-token greedy
answer on each, through /v1); write no ERROR line to its log; exit within 5 s of Ctrl-C (SIGINT) and leave no
process behind. A last launch is killed with SIGKILL at full speed: no vLLM process may be running 10 s later.
Every launch runs with bench/fork_trace on its path: each os.fork is written with every thread's stack, and the
table says which threads forked (issue 31: two engines' forks that met failed a new machine's first launch).
Prints one table (paste it into docs/benchmarks.md and the closing note) and exits 1 when a check fails.
CI cannot run this: its CPU build is eager and spawns its engine core, so only a GPU reaches this path.
"""
from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench.start_bench import one_run
from tests.support.app_process import ROOT, LaunchedApp, alive, engine_processes

FORK_TRACE = Path(__file__).resolve().parent / "fork_trace"
MIN_SPEEDUP = 3.0  # the compiled engine against the eager starting one (about 5x measured on an H200)
MAX_EXIT_SECONDS = 5.0
ERROR_LINE = re.compile(r"\bERROR\b")


def _cache_home() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")


def flashinfer_cache() -> Path:
    """FlashInfer's JIT-built kernels: its top-p/top-k sampler is the build both engines waited for on a new H100."""
    return Path(os.environ.get("FLASHINFER_WORKSPACE_BASE") or _cache_home()) / "flashinfer"


def first_launch_caches() -> list[Path]:
    """What a first launch on a new machine lacks, where each library keeps it (their defaults, or their variables)."""
    home, cache = Path.home(), _cache_home()
    user = os.environ.get("USER") or "root"
    return [Path(os.environ.get("VLLM_CACHE_ROOT") or cache / "vllm"),  # torch.compile, FlashInfer autotune, model info
            Path(os.environ.get("TORCHINDUCTOR_CACHE_DIR") or f"/tmp/torchinductor_{user}"),
            Path(os.environ.get("TRITON_CACHE_DIR") or home / ".triton"),
            flashinfer_cache(), home / ".nv" / "ComputeCache", cache / "torch_extensions", cache / "torch"]


def remove_caches(paths: list[Path]) -> list[str]:
    """Remove them; the ones that were there."""
    removed = [str(path) for path in paths if path.exists()]
    for path in paths:
        shutil.rmtree(path, ignore_errors=True)
    return removed


def cache_folders() -> list[str]:
    """Every folder under ~/.cache and the others above, to find caches this list does not know yet."""
    found = {str(p) for p in _cache_home().glob("*") if p.is_dir()}
    found |= {str(p) for p in first_launch_caches() if p.exists()}
    return sorted(found)


def forks_of(trace: Path, processes: dict[int, str]) -> list[str]:
    """The forks of ``processes`` (pid -> what it is: the app, its engine process) in the trace: 'process, thread:
    where' for each (the stack's first frame outside multiprocessing), in order."""
    text = trace.read_text(errors="replace") if trace.exists() else ""
    forks = []
    for line in text.splitlines():
        head, _, stack = line.partition(" forks: ")
        pid = re.search(r" pid (\d+) ", head)
        if line.startswith(" ") or pid is None or int(pid.group(1)) not in processes:
            continue
        frames = [f for f in stack.split(" <- ") if not f.startswith(("popen_fork.py", "context.py", "process.py"))]
        forks.append(f"{processes[int(pid.group(1))]}, {head.split(' thread ', 1)[1]}: "
                     f"{frames[0] if frames else stack[:80]}")
    return forks


def stack_versions() -> str:
    """The card and the stack under test, for the table's heading."""
    try:
        card = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=30).stdout.strip().replace(", ", ", driver ")
    except OSError:
        card = "no nvidia-smi"
    versions = []
    for name in ("vllm", "torch", "triton", "filelock", "flashinfer-python"):
        try:
            versions.append(f"{name} {importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            pass
    return f"{card}; {', '.join(versions)}; Python {sys.version.split()[0]}"


def build_model(out: Path) -> None:
    if not (out / "config.json").exists():
        subprocess.run([sys.executable, "tests/tiny_model.py", str(out), "--full-size"], cwd=ROOT, check=True)


def error_lines(log_file: Path) -> list[str]:
    text = log_file.read_text(errors="replace") if log_file.exists() else ""
    return [line for line in text.splitlines() if ERROR_LINE.search(line)]


def checks(run: dict[str, Any], log_file: Path) -> dict[str, str]:
    """Each check's verdict: 'ok', or what was seen instead."""
    starting = (run.get("decode_ready") or {}).get("tok_s")
    full = (run.get("decode_full") or {}).get("tok_s")
    final = run.get("readyz_final") or {}
    errors = error_lines(log_file)
    verdicts = {
        "ready": "ok" if run.get("ready_s") is not None else f"not ready: {run.get('error', '?')}",
        "speed full": "ok" if final.get("speed") == "full" else
        f"speed {final.get('speed')!r}: {final.get('last_error') or final.get('speed_reason') or run.get('error', '')}",
        "full speed on its first try": "ok" if final.get("speed") == "full" and not any(
            e.get("speed") == "retrying" for e in run.get("events") or []) else "retried or failed",
        f"full >= {MIN_SPEEDUP:g}x starting": (
            "ok" if starting and full and run.get("speed_at_ready") == "starting" and full >= MIN_SPEEDUP * starting
            else f"starting {starting} tok/s (speed at ready: {run.get('speed_at_ready')}), full {full} tok/s"),
        "no ERROR in log": "ok" if not errors else f"{len(errors)}: {errors[0][:160]}",
        f"Ctrl-C exit <= {MAX_EXIT_SECONDS:g} s": (
            "ok" if run.get("exit_code") == 0 and run.get("exit_s", 99) <= MAX_EXIT_SECONDS
            else f"exit {run.get('exit_code')} after {run.get('exit_s')} s"),
        "no process left": "ok" if not run.get("left_after_exit") else f"left: {run['left_after_exit']}",
    }
    return verdicts


def killed_run(model: Path, work: Path, timeout: float) -> dict[str, Any]:
    """Launch, wait for full speed, then `kill -9` the app: no engine process may be running 10 s later."""
    work.mkdir(parents=True, exist_ok=True)
    app = LaunchedApp(model, work)
    run: dict[str, Any] = {"cache": "warm, then kill -9"}
    try:
        run["ready_s"] = round(app.wait_ready(timeout), 2)
        deadline = time.time() + timeout
        while app.readyz()[1].get("speed") not in ("full", "starting_only") and time.time() < deadline:
            time.sleep(0.1)
        run["full_speed_s"] = app.readyz()[1].get("full_speed_seconds")
        engines = engine_processes(app.proc.pid)
        app.proc.kill()
        app.proc.wait(10)
        deadline = time.time() + 10
        while [p for p in engines if alive(p)] and time.time() < deadline:
            time.sleep(0.1)
        left = [f"{p.pid} {p.name()}" for p in engines if alive(p)]
        run["checks"] = {"ready": "ok", "engine processes found": "ok" if engines else "none found",
                         "none alive 10 s after kill -9": "ok" if not left else f"left: {left}"}
    except Exception as err:  # noqa: BLE001 -- a failed launch is a result
        run["checks"] = {"ready": f"{type(err).__name__}: {err}"}
    finally:
        app.kill()
    return run


def table(runs: list[dict[str, Any]]) -> str:
    fmt = lambda v: "-" if v is None else f"{v}"  # noqa: E731
    rows = ["| launch | HTTP s | ready s | full speed s | tok/s starting | tok/s full | exit s | forks | "
            "checks |", "|---|---|---|---|---|---|---|---|---|"]
    for r in runs:
        failed = [f"{name}: {verdict}" for name, verdict in r["checks"].items() if verdict != "ok"]
        forks = "; ".join(r.get("forks") or []) or "-"
        rows.append(f"| {r['cache']} | {fmt(r.get('http_s'))} | {fmt(r.get('ready_s'))} | "
                    f"{fmt(r.get('full_speed_s'))} | "
                    f"{fmt((r.get('decode_ready') or {}).get('tok_s'))} | "
                    f"{fmt((r.get('decode_full') or {}).get('tok_s'))} | {fmt(r.get('exit_s'))} | {forks} | "
                    f"{'all ' + str(len(r['checks'])) + ' passed' if not failed else 'FAILED ' + '; '.join(failed)} |")
    return "\n".join(rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="/tmp/ernie-full-size", help="built here first if it is missing")
    parser.add_argument("--out", default="gpu_smoke_out")
    parser.add_argument("--timeout", type=float, default=300, help="seconds to wait for ready, and for full speed")
    parser.add_argument("--first-launches", type=int, default=3,
                        help="launches with every cache a new machine lacks removed, before the warm one")
    parser.add_argument("--flashinfer-cold", type=int, default=1,
                        help="then launches with only FlashInfer's JIT cache removed: the starting engine must not "
                             "wait for the kernels the full-speed engine builds")
    args = parser.parse_args()
    model, out = Path(args.model), Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    build_model(model)
    work = Path(os.environ.get("TMPDIR", "/tmp")) / f"gpu_smoke_{os.getpid()}"
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(FORK_TRACE), os.environ.get("PYTHONPATH")]))
    heading = stack_versions()
    runs: list[dict[str, Any]] = []

    def save() -> None:
        (out / "gpu_smoke.json").write_text(json.dumps({"stack": heading, "runs": runs}, indent=1, ensure_ascii=False))

    launches = {f"first launch {n}": first_launch_caches() for n in range(1, args.first_launches + 1)}
    launches.update({f"flashinfer cold {n}": [flashinfer_cache()] for n in range(1, args.flashinfer_cold + 1)})
    launches["warm"] = []
    for name, caches in launches.items():
        folder = work / name.replace(" ", "-")
        removed = remove_caches(caches)
        os.environ["ERNIE_FORK_TRACE"] = str(folder / "forks.txt")
        folder.mkdir(parents=True, exist_ok=True)
        run = one_run(str(model), folder, None, name.startswith("first launch"), 256, args.timeout)
        run.update(cache=name, caches_removed=removed, cache_folders_after=cache_folders(),
                   forks=forks_of(folder / "forks.txt", {run["pid"]: "app", **{
                       pid: "engine process" for pid in run.get("engine_process_pids", [])}}))
        run["checks"] = checks(run, folder / "llm.log")
        for kept in ("llm.log", "forks.txt"):  # beside the table, for a failure's exact lines
            if (folder / kept).exists():
                shutil.copy(folder / kept, out / f"{name.replace(' ', '-')}-{kept}")
        runs.append(run)
        save()
        print(json.dumps({k: run.get(k) for k in ("cache", "ready_s", "full_speed_s", "forks", "checks")}),
              flush=True)
    os.environ["ERNIE_FORK_TRACE"] = str(work / "killed" / "forks.txt")
    run = killed_run(model, work / "killed", args.timeout)
    runs.append(run)
    save()
    print(f"\ngpu_smoke {time.strftime('%Y-%m-%d')}, {model}: {heading}")
    print(table(runs))
    return 0 if all(v == "ok" for r in runs for v in r["checks"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
