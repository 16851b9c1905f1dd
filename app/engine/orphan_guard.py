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

A watcher killed with the app (a kill of both, the OOM killer) cannot do that, so it also keeps a record of what it
notes in the app's data directory (``RECORDS``/<app pid>.json, rewritten when the set changes, removed when it has
cleaned up). The next start on that data directory ends the processes of a record whose app is gone, each only once
proven to be one the app left: the same pid and start time, the command line recorded (or vLLM's name for it, taken
after it was recorded), and a parent that is not a living app's (PID 1, a subreaper above the app, or another
process of the record). Other vLLM processes left under PID 1 (another data directory's, or an app too old to keep
records) are only named, with the command to end them.

    python -m app.engine.orphan_guard APP_PID [RECORDS_FOLDER]   # started by the app itself; stdin is the pipe
"""
from __future__ import annotations

import contextlib
import json
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

from app.planning.hardware import gib
from app.private_files import make_private_folder

log = logging.getLogger("ernie_chat")

FILES_PREFIX = "ernie-chat-files-"  # + the app's pid + "-": the private files folder (app/server.py)
POLL_SECONDS = 0.5
RECORDS = "app-processes"  # the folder, in the data directory, of each running app's record of its processes
_FILES_FOLDER = re.compile(re.escape(FILES_PREFIX) + r"(\d+)-")


ENGINE_PROCESS_MODULE = "app.engine.engine_process"  # the app's engine process (app/engine/engine_link.py)


def is_engine_process(name: str, cmdline: str) -> bool:
    """vLLM names its processes VLLM::EngineCore, VLLM::Worker, ... (the name is cut to 15 characters); the app's
    own engine process runs its module."""
    return name.startswith("VLLM") or cmdline.startswith("VLLM::") or f"-m {ENGINE_PROCESS_MODULE} " in cmdline


def start_watcher(records: Optional[Path] = None) -> Optional[subprocess.Popen]:
    """Start the watcher for this process, keeping its record in ``records`` (None: no record, nothing written);
    None where it cannot run (then only a normal exit cleans up)."""
    try:
        # Its own session: Ctrl-C on the terminal reaches the app, which then closes the pipe itself.
        return subprocess.Popen([sys.executable, "-m", "app.engine.orphan_guard", str(os.getpid()),
                                 *([str(records)] if records else [])],
                                stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True, cwd=Path(__file__).resolve().parents[2])  # the project root
    except OSError as err:
        log.warning("no watcher for engine processes (%s): a killed app may leave them running", err)
        return None


def stop_watcher(watcher: Optional[subprocess.Popen]) -> None:
    """Close the pipe (the watcher kills what is left of the engine and exits) and wait for it."""
    if watcher is None:
        return
    try:
        if watcher.stdin is not None:  # started with a pipe: always there
            watcher.stdin.close()
        watcher.wait(timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        watcher.kill()


def _app_processes(app) -> dict[int, tuple[float, str]]:
    """Every process below the app but this watcher: pid -> (start time, command line)."""
    import psutil

    found: dict[int, tuple[float, str]] = {}
    for process in app.children(recursive=True):
        try:
            if process.pid != os.getpid():
                found[process.pid] = (process.create_time(), " ".join(process.cmdline()))
        except psutil.Error:
            pass
    return found


class _Record:
    """The watcher's record of the app's processes, in the data directory (see the module's doc)."""

    def __init__(self, folder: Path, app) -> None:
        self.path = folder / f"{app.pid}.json"
        self.app = {"pid": app.pid, "started": app.create_time()}
        self.written: Optional[dict[int, tuple[float, str]]] = None
        make_private_folder(folder)  # private, as the data directory the database makes

    def write(self, processes: dict[int, tuple[float, str]]) -> None:
        if processes == self.written:
            return
        entries = [{"pid": pid, "started": started, "cmdline": cmdline}
                   for pid, (started, cmdline) in processes.items()]
        part = self.path.with_suffix(".part")
        part.write_text(json.dumps({"app": self.app, "processes": entries}))
        os.replace(part, self.path)  # whole or not at all: the next start may read it at any moment
        self.written = dict(processes)

    def remove(self) -> None:
        self.path.unlink(missing_ok=True)


def _kill(seen: dict[int, float]) -> None:
    import psutil

    for pid, started in seen.items():
        try:
            process = psutil.Process(pid)
            if process.create_time() == started:  # the same process, not a new one with a reused pid
                process.kill()
        except psutil.Error:
            pass


def watch(app_pid: int, records: Optional[Path] = None) -> None:
    """Note the app's processes (in a record in ``records``, if given) until stdin closes, then kill those still
    running and remove the record."""
    import psutil

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the app decides when this ends, by closing the pipe
    try:
        app = psutil.Process(app_pid)
    except psutil.NoSuchProcess:
        return
    record = None
    if records is not None:
        with contextlib.suppress(OSError):  # a data directory it cannot write to: it still watches
            record = _Record(records, app)
    seen: dict[int, float] = {}
    while True:
        readable, _, _ = select.select([sys.stdin], [], [], POLL_SECONDS)
        if readable and not os.read(sys.stdin.fileno(), 4096):  # EOF: the app closed it, or died
            break
        try:
            now = _app_processes(app)
        except psutil.NoSuchProcess:
            break
        seen.update({pid: started for pid, (started, _) in now.items()})
        if record:
            with contextlib.suppress(OSError):  # a full disk: the watcher still kills at the end
                record.write(now)
    _kill(seen)
    if record:
        record.remove()


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    return True


def _running(pid: int, started: float) -> bool:
    import psutil

    try:
        process = psutil.Process(pid)
        return process.create_time() == started and process.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _proven_left(record: dict) -> list:
    """The processes of a dead app's record still running, each proven to be one it left (see the module's doc)."""
    import psutil

    recorded = {entry["pid"]: entry for entry in record["processes"]}
    left = []
    for pid, entry in recorded.items():
        try:
            process = psutil.Process(pid)
            if not _running(pid, entry["started"]):
                continue  # gone (or its pid is another process's now)
            cmdline = " ".join(process.cmdline())
            if cmdline != entry["cmdline"] and not is_engine_process(process.name(), cmdline):
                continue
            parent = process.parent()
            if parent is None or parent.pid == 1 or parent.pid in recorded \
                    or parent.create_time() < record["app"]["started"]:  # adopted by a subreaper above the app
                left.append(process)
        except psutil.Error:
            pass
    return left


def end_left_processes(records: Path) -> int:
    """At start: end the processes that apps on this data directory left running when they were killed with their
    watcher; remove those apps' records. A record whose app still runs (another app on the same data directory)
    is left alone. How many processes were ended."""
    import psutil

    ended = []
    for path in sorted(records.glob("*.json")) if records.is_dir() else []:
        try:
            record = json.loads(path.read_text())
            if _running(record["app"]["pid"], record["app"]["started"]):
                continue
            left = _proven_left(record)
        except (OSError, ValueError, KeyError, TypeError):  # a damaged record proves nothing
            left = []
        for process in left:
            with contextlib.suppress(psutil.Error):
                process.kill()
        psutil.wait_procs(left, timeout=5)
        ended += left
        path.unlink(missing_ok=True)
    if ended:
        log.warning("ended %d process(es) that an earlier run on this data directory left running when it was "
                    "killed: %s", len(ended), " ".join(str(p.pid) for p in ended))
    return len(ended)


def clean_leftovers(records: Optional[Path] = None) -> None:
    """At start: remove the files folders of apps that are gone, end the processes a killed app on this data
    directory left (``records``: its watchers' records; None with --no-history), and name other vLLM processes
    that an earlier crash left running (their parent is PID 1), with what they hold and how to stop them."""
    import psutil

    if records is not None:
        end_left_processes(records)

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
        held = gib(sum(p.info["memory_info"].rss for p in orphans), 1)
        log.warning("%d vLLM process(es) left running by an earlier run that was killed hold %s of memory "
                    "(and GPU memory, if any): stop them with: kill %s", len(orphans), held, pids)


if __name__ == "__main__":
    watch(int(sys.argv[1]), Path(sys.argv[2]) if len(sys.argv) > 2 else None)
