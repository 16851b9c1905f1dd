"""The app's memory while a 300 MB request body arrives, with the body limit and without it (issue 16).

    python -m bench.body_limit_check --model DIR [--mb 300]

Launches `python launch.py` twice on the tiny model: first with --max-body-bytes 1073741824 (1 GiB: the
300 MB body is read, as before the limit existed), then with the default limit. Each time it sends a
300 MB /v1 chat request (a valid JSON body) once with Content-Length and once chunked, samples the app
process's RSS every 20 ms while the request runs (the engine runs in other processes and is not
counted), and prints a Markdown table of RSS before, peak and after, with the answer's status.
"""
from __future__ import annotations

import argparse
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

from tests.support.app_process import LaunchedApp

MB = 2**20


def send(port: int, size: int, chunked: bool) -> str:
    """POST a valid JSON body of ``size`` bytes; stop sending once the server answers. Returns the status."""
    head_json, tail_json = b'{"messages": [{"role": "user", "content": "', b'"}]}'
    filler = size - len(head_json) - len(tail_json)
    sock = socket.create_connection(("127.0.0.1", port), timeout=300)
    headers = ["POST /v1/chat/completions HTTP/1.1", f"Host: 127.0.0.1:{port}", "Content-Type: application/json",
               "Transfer-Encoding: chunked" if chunked else f"Content-Length: {size}", "", ""]
    sock.sendall("\r\n".join(headers).encode())
    piece = b"x" * MB
    parts = [head_json] + [piece] * (filler // MB) + [b"x" * (filler % MB), tail_json]
    sock.setblocking(False)
    try:
        for part in parts:
            data = b"%x\r\n%s\r\n" % (len(part), part) if chunked else part
            view = memoryview(data)
            while view:
                try:
                    sent = sock.send(view)
                    view = view[sent:]
                except BlockingIOError:
                    if _answered(sock):
                        raise StopIteration from None
                    time.sleep(0.001)
        if chunked:
            sock.sendall(b"0\r\n\r\n")
    except (StopIteration, BrokenPipeError, ConnectionResetError):
        pass
    sock.setblocking(True)
    try:
        reply = sock.recv(4096).decode(errors="replace")
    except ConnectionResetError:
        reply = "connection reset"
    sock.close()
    return reply.split("\r\n", 1)[0]


def _answered(sock: socket.socket) -> bool:
    try:
        return bool(sock.recv(1, socket.MSG_PEEK))
    except BlockingIOError:
        return False


def measure(app: LaunchedApp, size: int, chunked: bool) -> dict:
    proc = psutil.Process(app.proc.pid)
    before = proc.memory_info().rss
    peak = [before]
    done = threading.Event()

    def sample():
        while not done.is_set():
            peak[0] = max(peak[0], proc.memory_info().rss)
            time.sleep(0.02)

    sampler = threading.Thread(target=sample)
    sampler.start()
    started = time.perf_counter()
    status = send(app.port, size, chunked)
    seconds = time.perf_counter() - started
    time.sleep(1.0)
    done.set()
    sampler.join()
    return {"before": before / MB, "peak": peak[0] / MB, "after": proc.memory_info().rss / MB,
            "status": status, "seconds": seconds}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", required=True)
    parser.add_argument("--mb", type=int, default=300)
    args = parser.parse_args()
    rows = []
    for label, extra in (("no limit (--max-body-bytes 1073741824)", ["--max-body-bytes", str(2**30)]),
                         ("default limit (8 MiB)", [])):
        with tempfile.TemporaryDirectory() as tmp:
            app = LaunchedApp(Path(args.model), Path(tmp), *extra)
            try:
                app.wait_http()
                app.wait_ready()
                for chunked in (False, True):
                    result = measure(app, args.mb * MB, chunked)
                    rows.append((label, "chunked" if chunked else "Content-Length", result))
                    print(label, rows[-1][1], result, flush=True)
            finally:
                app.stop()
                app.kill()
    print(f"\n| app | {args.mb} MB body sent with | answer | app RSS before | peak | after | time |")
    print("|---|---|---|---|---|---|---|")
    for label, how, r in rows:
        print(f"| {label} | {how} | {r['status'].replace('HTTP/1.1 ', '')} | {r['before']:.0f} MB | "
              f"{r['peak']:.0f} MB | {r['after']:.0f} MB | {r['seconds']:.1f} s |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
