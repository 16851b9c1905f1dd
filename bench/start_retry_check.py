"""A real out-of-memory start on a GPU, and the app's one retry with half the KV cache.

    python -m bench.start_retry_check --model DIR --out DIR --kv-gib 100 --hog-gib 60

Launches `python launch.py --kv-cache-memory-bytes KV` (the plan checks free memory at that moment and
accepts), then, once the app is loading, another process takes --hog-gib of the card, as a second
program on a shared card would. vLLM's start then finds too little free memory; the app should retry
once with half the KV cache and become ready (or stop with one line when even that cannot fit).
Records the states /readyz went through, the log lines about it, and the outcome in report.json.
"""
from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.support.app_process import LaunchedApp, get

HOG = ("import sys, time, torch; x = torch.empty(int(float(sys.argv[1]) * 2**30), dtype=torch.uint8, "
       "device='cuda'); print('holding', sys.argv[1], 'GiB', flush=True); time.sleep(3600)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--kv-gib", type=float, default=100)
    parser.add_argument("--hog-gib", type=float, default=60)
    parser.add_argument("extra", nargs="*", help="more launch.py flags")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    app = LaunchedApp(Path(args.model), out, "--kv-cache-memory-bytes", str(int(args.kv_gib * 2**30)), *args.extra)
    hog = None
    seen: list[str] = []
    report: dict = {}
    try:
        app.wait_http(timeout=60)
        hog = subprocess.Popen([sys.executable, "-c", HOG, str(args.hog_gib)], stdout=subprocess.PIPE, text=True)
        report["hog"] = hog.stdout.readline().strip()
        deadline = time.time() + 420
        while time.time() < deadline and app.proc.poll() is None:
            try:
                code, body = app.readyz()
            except OSError:
                break
            state = f"{body['state']}: {body['detail']}"
            if not seen or seen[-1] != state:
                seen.append(state)
            if code == 200 or body["state"] == "failed":
                break
            time.sleep(0.5)
        report["states"] = seen
        try:
            report["readyz_final"] = get(app.url + "/readyz")[1]
        except OSError:  # the app stopped: a start that failed for good exits non-zero
            report["readyz_final"] = None
        report["check"] = app.check().stdout.strip()
        report["exit_code_if_exited"] = app.proc.poll()
    finally:
        app.stop(signal.SIGINT, timeout=60)
        app.kill()
        if hog:
            hog.kill()
        log = app.log_file.read_text() if app.log_file.exists() else ""
        keys = ("out of memory", "retrying", "less than desired", "engine start failed", "Engine started", "error:")
        report["log_lines"] = [line[:400] for line in log.splitlines() if any(k in line for k in keys)][:20]
        report["stdout_errors"] = [line for line in app.output().splitlines() if line.startswith("error:")]
        (out / "report.json").write_text(json.dumps(report, indent=1, ensure_ascii=False))
    print(json.dumps(report, indent=1, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
