"""The app as a user starts it: `python launch.py` in a process of its own, its ports, probes and processes."""
from __future__ import annotations

import contextlib
import fcntl
import json
import os
import pty
import signal
import socket
import struct
import subprocess
import sys
import termios
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING, Optional

import psutil

if TYPE_CHECKING:
    pass



ROOT = Path(__file__).resolve().parents[2]  # the project root


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url: str, timeout: float = 3.0, headers: Optional[dict] = None) -> tuple[int, str]:
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


class LaunchedApp:
    """``terminal=True`` runs it on a pseudo-terminal, as in a user's shell (progress bar, no vLLM INFO); ``root``: the
    checkout whose launch.py runs (a benchmark compares an older one)."""

    def __init__(self, model_dir: Path, tmp: Path, *extra: str, env: Optional[dict] = None,
                 terminal: bool = False, root: Path = ROOT) -> None:
        self.port = free_port()
        self.log_file = tmp / "llm.log"
        self.stdout = open(tmp / "stdout.txt", "w+")
        self.url = f"http://127.0.0.1:{self.port}"
        self.args = ["--model", str(model_dir), "--port", str(self.port), "--log-file", str(self.log_file), *extra]
        # ERNIE_CHAT_OPEN=0: a developer's desktop must not get a browser window per launched test app.
        full_env = {**os.environ, "ERNIE_CHAT_OPEN": "0", **(env or {})}
        self.started = time.time()
        if terminal:
            primary, secondary = pty.openpty()
            # 40 rows x 160 columns, like a terminal window (a fresh pty reports 0 x 0)
            fcntl.ioctl(secondary, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 160, 0, 0))
            self.proc = subprocess.Popen([sys.executable, "launch.py", *self.args], cwd=root, env=full_env,
                                         stdout=secondary, stderr=secondary, stdin=subprocess.DEVNULL)
            os.close(secondary)
            threading.Thread(target=self._copy_terminal, args=(primary,), daemon=True).start()
        else:
            self.proc = subprocess.Popen([sys.executable, "launch.py", *self.args], cwd=root, env=full_env,
                                         stdout=self.stdout, stderr=subprocess.STDOUT)

    def _copy_terminal(self, fd: int) -> None:
        with open(self.stdout.name, "ab") as out:
            while True:
                try:
                    chunk = os.read(fd, 65536)
                except OSError:  # the app closed the terminal (exited)
                    break
                if not chunk:
                    break
                out.write(chunk)
                out.flush()
        os.close(fd)

    def output(self) -> str:
        self.stdout.flush()
        return Path(self.stdout.name).read_text(errors="replace")

    def wait_http(self, timeout: float = 60) -> float:
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"launch.py exited {self.proc.returncode}:\n{self.output()[-3000:]}")
            try:
                if get(self.url + "/healthz", 1)[0] == 200:
                    return time.time() - self.started
            except OSError:
                pass
            time.sleep(0.1)
        raise TimeoutError("no HTTP answer")

    def readyz(self) -> tuple[int, dict]:
        code, body = get(self.url + "/readyz")
        return code, json.loads(body)

    def wait_ready(self, timeout: float = 300) -> float:
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"launch.py exited {self.proc.returncode}:\n{self.output()[-3000:]}")
            try:
                if self.readyz()[0] == 200:
                    return time.time() - self.started
            except OSError:
                pass
            time.sleep(0.25)
        raise TimeoutError(f"not ready:\n{self.output()[-3000:]}")

    def descendants(self) -> list[int]:
        try:
            return [p.pid for p in psutil.Process(self.proc.pid).children(recursive=True)]
        except psutil.NoSuchProcess:
            return []

    def descendant_names(self) -> list[str]:
        names = []
        for pid in self.descendants():
            with contextlib.suppress(psutil.NoSuchProcess):
                names.append(psutil.Process(pid).name())
        return names

    def check(self) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "launch.py", "check", "--port", str(self.port),
                               "--log-file", str(self.log_file), *self._root_path_args()],
                              cwd=ROOT, capture_output=True, text=True, timeout=60)

    def _root_path_args(self) -> list[str]:
        if "--root-path" in self.args:
            return ["--root-path", self.args[self.args.index("--root-path") + 1]]
        return []

    def stop(self, sig: int = signal.SIGINT, timeout: float = 30) -> float:
        start = time.time()
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        return time.time() - start

    def kill(self) -> None:
        for pid in self.descendants():
            try:
                psutil.Process(pid).kill()
            except psutil.NoSuchProcess:
                pass
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


def alive(process: psutil.Process) -> bool:
    """Running, and not a zombie (a killed process whose parent has not reaped it is gone for every purpose)."""
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def engine_processes(pid: int) -> list[psutil.Process]:
    """vLLM's processes (VLLM::EngineCore, VLLM::Worker, ...) below the process ``pid``."""
    from app.engine.orphan_guard import is_engine_process

    found = []
    for process in psutil.Process(pid).children(recursive=True):
        try:
            if is_engine_process(process.name(), " ".join(process.cmdline())):
                found.append(process)
        except psutil.NoSuchProcess:
            pass
    return found


@contextlib.contextmanager
def running_app(model_dir: Path, tmp: Path, *extra: str, env: Optional[dict] = None):
    """A launched app, ready to chat; stopped (and its children killed) afterwards."""
    app = LaunchedApp(model_dir, tmp, *extra, env=env)
    try:
        app.wait_http()
        app.wait_ready()
        yield app
    finally:
        app.stop()
        app.kill()


def history_states_until(app, final: str, deadline_s: float = 30) -> list[str]:
    """/readyz's history state, read until it starts with ``final``: every distinct state seen, in order."""
    seen: list[str] = []
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        state = app.readyz()[1]["history"]
        if not seen or seen[-1].split()[0] != state.split()[0]:  # "waiting 4 s ...", "waiting 5 s ...": one state
            seen.append(state)
        if state.startswith(final):
            return seen
        time.sleep(0.2)
    raise AssertionError(f"/readyz history never read {final!r}: {seen}")
