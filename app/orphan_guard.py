"""No engine process outlives the app, however it ends; what an earlier crash left is found at start.

Why: `kill -9` of the app left vLLM's engine processes running, re-parented to PID 1 (4.6 GB of RAM and a core
on a CPU; on a GPU they hold the card's memory), and its private files folder in the temp directory. A normal
exit reaps them (app/serve.py); a killed app runs no code, so a small watcher process does it: it holds the
read end of a pipe whose write end only the app has, notes every process below the app twice a second (vLLM's
engine processes and theirs, multiprocessing's resource tracker, a document reader), and kills them when the pipe
closes, i.e. when the app is gone, whichever way it went. This works for vLLM's forked engine (GPU) and its spawned
one (CPU) alike. Every process, not only those vLLM named "VLLM::...": an engine process takes its name only once
its imports are done, and an app killed in its engine's first 15-25 s left an EngineCore of 640 MiB and vLLM's
resource tracker running under PID 1 (issue 36 N5).

    python -m app.orphan_guard APP_PID   # started by the app itself; stdin is the pipe
"""
from __future__ import annotations

import logging
import os
import re
import select
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Optional

log = logging.getLogger("ernie_chat")

FILES_PREFIX = "ernie-chat-files-"  # + the app's pid + "-": the private files folder (app/server.py)
POLL_SECONDS = 0.5
_FILES_FOLDER = re.compile(re.escape(FILES_PREFIX) + r"(\d+)-")


def is_engine_process(name: str, cmdline: str) -> bool:
    """vLLM names its processes VLLM::EngineCore, VLLM::Worker, ... (the name is cut to 15 characters)."""
    return name.startswith("VLLM") or cmdline.startswith("VLLM::")


def start_watcher() -> Optional[subprocess.Popen]:
    """Start the watcher for this process; None where it cannot run (then only a normal exit cleans up)."""
    try:
        # Its own session: Ctrl-C on the terminal reaches the app, which then closes the pipe itself.
        return subprocess.Popen([sys.executable, "-m", "app.orphan_guard", str(os.getpid())],
                                stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True, cwd=Path(__file__).resolve().parent.parent)
    except OSError as err:
        log.warning("no watcher for engine processes (%s): a killed app may leave them running", err)
        return None


def stop_watcher(watcher: Optional[subprocess.Popen]) -> None:
    """Close the pipe (the watcher kills what is left of the engine and exits) and wait for it."""
    if watcher is None:
        return
    try:
        watcher.stdin.close()
        watcher.wait(timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        watcher.kill()


def _app_processes(app) -> dict[int, float]:
    """Every process below the app but this watcher: pid -> start time."""
    import psutil

    found: dict[int, float] = {}
    for process in app.children(recursive=True):
        try:
            if process.pid != os.getpid():
                found[process.pid] = process.create_time()
        except psutil.Error:
            pass
    return found


def _kill(seen: dict[int, float]) -> None:
    import psutil

    for pid, started in seen.items():
        try:
            process = psutil.Process(pid)
            if process.create_time() == started:  # the same process, not a new one with a reused pid
                process.kill()
        except psutil.Error:
            pass


def watch(app_pid: int) -> None:
    """Note the app's processes until stdin closes, then kill those still running."""
    import psutil

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the app decides when this ends, by closing the pipe
    try:
        app = psutil.Process(app_pid)
    except psutil.NoSuchProcess:
        return
    seen: dict[int, float] = {}
    while True:
        readable, _, _ = select.select([sys.stdin], [], [], POLL_SECONDS)
        if readable and not os.read(sys.stdin.fileno(), 4096):  # EOF: the app closed it, or died
            break
        try:
            seen.update(_app_processes(app))
        except psutil.NoSuchProcess:
            break
    _kill(seen)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    return True


def clean_leftovers() -> None:
    """At start: remove the files folders of apps that are gone, and name vLLM processes that an earlier crash
    left running (their parent is PID 1), with what they hold and how to stop them, in one line."""
    import psutil

    removed = 0
    for folder in Path(tempfile.gettempdir()).glob(FILES_PREFIX + "*"):
        match = _FILES_FOLDER.match(folder.name)
        if match and folder.is_dir() and not _pid_alive(int(match.group(1))):
            import shutil

            shutil.rmtree(folder, ignore_errors=True)
            removed += 1
    if removed:
        log.info("removed %d files folder(s) left by earlier runs that did not exit cleanly", removed)
    me = psutil.Process().username()
    orphans = []
    for process in psutil.process_iter(["name", "cmdline", "ppid", "username", "memory_info", "status"]):
        info = process.info
        if (info["ppid"] == 1 and info["username"] == me and info["memory_info"] is not None
                and info["status"] != psutil.STATUS_ZOMBIE  # already dead, only not reaped
                and is_engine_process(info["name"] or "", " ".join(info["cmdline"] or []))):
            orphans.append(process)
    if orphans:
        pids = " ".join(str(p.pid) for p in orphans)
        held = sum(p.info["memory_info"].rss for p in orphans) / 2**30
        log.warning("%d vLLM process(es) left running by an earlier run that was killed hold %.1f GiB of memory "
                    "(and GPU memory, if any): stop them with: kill %s", len(orphans), held, pids)


if __name__ == "__main__":
    watch(int(sys.argv[1]))
