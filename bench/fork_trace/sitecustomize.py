"""Fork trace for bench/gpu_smoke.py: with this folder on PYTHONPATH and ERNIE_FORK_TRACE naming a file, every
Python process of the app writes one block per ``os.fork`` it makes: when, which process and thread forks and
from where, and what every other thread of that process is doing at that moment (innermost frames first).

Python imports ``sitecustomize`` at start-up, before the app or any library, so this audit hook runs before
filelock's: a fork that filelock then refuses is written too. It shows which forks of a launch could meet (the
refused fork of issue 31) and what the other threads held. Not part of the app: only the smoke run sets it.
"""
import os
import sys
import threading
import time
import traceback

TRACE_FILE = os.environ.get("ERNIE_FORK_TRACE")


def _where(frames: list) -> str:
    return " <- ".join(f"{os.path.basename(f.filename)}:{f.lineno} {f.name}" for f in reversed(frames))


def _trace(event: str, _args: tuple) -> None:
    if event != "os.fork":  # every other audit event (open, import ...) passes untouched
        return
    me = threading.get_ident()
    names = {thread.ident: thread.name for thread in threading.enumerate()}
    lines = [f"{time.time():.3f} pid {os.getpid()} thread {names.get(me, me)} forks: "
             f"{_where(traceback.extract_stack()[-9:-1])}"]
    for ident, frame in sys._current_frames().items():
        if ident != me:
            lines.append(f"    {names.get(ident, ident)}: {_where(traceback.extract_stack(frame)[-5:])}")
    with open(TRACE_FILE, "a") as out:
        out.write("\n".join(lines) + "\n")


if TRACE_FILE:
    sys.addaudithook(_trace)
