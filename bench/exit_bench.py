"""Ctrl-C exit benchmark: how long `python launch.py` takes to end after SIGINT, and where the time goes.

    python -m bench.exit_bench --model DIR --out DIR [--baseline-root DIR] [--rounds 5]

Each round launches the app (this checkout, and ``--baseline-root``'s when given: an older checkout to compare,
interleaved round by round), waits until it is ready, sends SIGINT and times the exit. The app's "shutdown:"
log lines split that time: signal -> "shutdown: done, leaving" (the web server, the engine, the database, the
reaping) and leaving -> the process gone (exit handlers and what the interpreter does at exit). A checkout
older than those lines gives the whole time only. Writes ``exit_bench.json`` to --out, prints a markdown table.
"""
from __future__ import annotations

import argparse
import json
import re
import signal
import statistics
import time
from datetime import datetime
from pathlib import Path
from typing import Any, Optional

from tests.support.app_process import ROOT, LaunchedApp

STAMP = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) .*shutdown: (\S+ received|done, leaving)")


def logged_times(log_file: Path) -> dict[str, float]:
    """The epoch times of the signal's arrival and of the last shutdown step, from the app's log."""
    found: dict[str, float] = {}
    for line in log_file.read_text(errors="replace").splitlines():
        match = STAMP.match(line)
        if match:
            when = datetime.strptime(match.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()
            found["leaving" if match.group(2) == "done, leaving" else "received"] = when
    return found


def one_exit(model: Path, work: Path, root: Path) -> dict[str, Any]:
    work.mkdir(parents=True, exist_ok=True)
    app = LaunchedApp(model, work, root=root)
    try:
        app.wait_ready(300)
        time.sleep(1)  # let the ready answer's own work settle: the exit is measured, not the warm-up's tail
        sent = time.time()
        total = app.stop(signal.SIGINT, timeout=60)
        gone = sent + total
    finally:
        app.kill()
    run: dict[str, Any] = {"exit_s": round(total, 2), "exit_code": app.proc.returncode}
    logged = logged_times(app.log_file)
    if "leaving" in logged:
        run["to_leaving_s"] = round(logged["leaving"] - sent, 2)
        run["leaving_to_gone_s"] = round(gone - logged["leaving"], 2)
    return run


def summary(runs: list[dict[str, Any]], key: str) -> str:
    values = [r[key] for r in runs if key in r]
    return f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})" if values else "-"


def main(argv: Optional[list[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--baseline-root", help="an older checkout to compare, launched in turn with this one")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    out = Path(args.out)
    roots = {"this checkout": ROOT, **({"baseline": Path(args.baseline_root)} if args.baseline_root else {})}
    results: dict[str, list[dict[str, Any]]] = {name: [] for name in roots}
    for n in range(args.rounds):
        for name, root in roots.items():
            results[name].append(one_exit(Path(args.model), out / f"{name.replace(' ', '-')}-{n}", root))
            (out / "exit_bench.json").write_text(json.dumps(results, indent=1))
    print("| checkout | exit s, median (range) | signal -> leaving s | leaving -> gone s | exit codes |")
    print("|---|---|---|---|---|")
    for name, runs in results.items():
        codes = sorted({r["exit_code"] for r in runs})
        print(f"| {name} | {summary(runs, 'exit_s')} | {summary(runs, 'to_leaving_s')} | "
              f"{summary(runs, 'leaving_to_gone_s')} | {codes} |")


if __name__ == "__main__":
    main()
