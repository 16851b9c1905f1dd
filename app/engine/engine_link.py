"""The app's side of its engine process (app/engine/engine_process.py says why there is one).

``EngineProcess`` starts it at launch, builds engines there (``build`` is the EngineHost's engine factory) and asks it
for vLLM's metrics. ``ProcessEngine`` is the engine protocol (app/engine/protocol.py) over one engine's socket, so
EngineHost, its warm-up, watchdog and full-speed switch drive an engine there as they drove one in this process.
A reader thread per engine takes its messages off the socket and hands each answer's pieces to the loop that asked.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import itertools
import logging
import os
import select
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any, Optional

from app.engine import wire
from app.engine.orphan_guard import ENGINE_PROCESS_MODULE
from app.engine.protocol import Delta, Sampling
from app.errors import EngineDied
from app.planning.engine_plan import EnginePlan
from app.settings import ENV_PREFIX, PROJECT_ROOT
from app.telemetry import FILE_ONLY

log = logging.getLogger("ernie_chat.engine")

PROCESS_DIED = "engine process died"
APP_VARIABLES = ("CHAINLIT_", ENV_PREFIX)  # the app's settings and Chainlit's: the engine process reads none
CALL_TIMEOUT_S = 5.0  # a control call or an engine's health call; the process answers these in milliseconds


class EngineProcessError(RuntimeError):
    """An exception in the engine process, as its text: a build that failed (vLLM's out-of-memory wording included,
    which the host's retry reads) or a request that failed there."""


def engine_environment(plan: EnginePlan, base: Mapping[str, str]) -> dict[str, str]:
    """The engine process's environment: the app's, with the plan's settings for vLLM's processes. Set before the
    process starts, because some are read when a library loads (OpenMP's thread count when torch does)."""
    # The app's own secrets (its login signing key, the users' token, a remote server's key) stay with the app.
    env = {name: value for name, value in base.items() if not name.startswith(APP_VARIABLES)}
    env.setdefault("VLLM_HOST_IP", "127.0.0.1")  # one machine: vLLM's processes talk over loopback
    env.update(plan.env)
    for name, value in plan.env_defaults.items():
        env.setdefault(name, value)
    return env


class EngineProcess:
    """The process where vLLM runs; started once, and again by the next build if it died."""

    def __init__(self, plan: EnginePlan, log_file: Path, vllm_console_level: Optional[str]) -> None:
        self._argv = [str(log_file), vllm_console_level or ""]
        self._env = engine_environment(plan, os.environ)
        self._lock = threading.Lock()  # one control message and its reply at a time
        self._calls = itertools.count()
        self.process: Optional[subprocess.Popen] = None
        self._control: Optional[socket.socket] = None
        self._start()

    def _start(self) -> None:
        ours, theirs = socket.socketpair()
        try:
            # A session, and so a process group, of its own, which vLLM's processes below it join: a process that
            # dies (killed, crashed) takes them with it (``_end_group``) instead of leaving its engine core holding
            # the card's memory; and Ctrl-C on the terminal reaches the app alone, which shuts the engines down in
            # order. (``process_group=0`` says this more narrowly, from Python 3.11 on.)
            self.process = subprocess.Popen(
                [sys.executable, "-m", ENGINE_PROCESS_MODULE, str(theirs.fileno()), *self._argv],
                pass_fds=[theirs.fileno()], env=self._env, cwd=PROJECT_ROOT, start_new_session=True)
        finally:
            theirs.close()
        self._control = ours
        log.info("engine process %d started", self.process.pid, extra=FILE_ONLY)

    def _running(self) -> socket.socket:
        """The control socket of a living engine process (a new one if the last died: kill, crash)."""
        assert self.process is not None and self._control is not None
        if self.process.poll() is not None:
            log.warning("the engine process ended (exit %s); starting another", self.process.returncode)
            self._control.close()
            self._end_group()
            self._start()
        assert self._control is not None
        return self._control

    def build(self, model_path: str, plan: EnginePlan) -> ProcessEngine:
        """Build an engine there and return it once loaded (the host calls this on the engine's loop thread; it
        blocks for the whole load, as building AsyncLLM here did)."""
        ours, theirs = socket.socketpair()
        try:
            with self._lock:
                control = self._running()
                wire.send(control, ("build", model_path, plan))
                wire.send_socket(control, theirs)
        finally:
            theirs.close()
        try:
            reply = wire.receive(ours)
        except (EOFError, OSError):
            ours.close()
            raise EngineProcessError(f"{PROCESS_DIED} while the engine started") from None
        if reply[0] != "built":
            ours.close()
            raise EngineProcessError(reply[1])
        return ProcessEngine(ours, int(reply[1]))

    def _ask(self, request: str) -> Any:
        """A control call's answer; None when the process is gone or did not answer in time (a late answer is
        skipped by the next call: every answer carries its call's number)."""
        with self._lock:
            if self.process is None or self.process.poll() is not None or self._control is None:
                return None
            number = next(self._calls)
            try:
                wire.send(self._control, (request, number))
                while True:
                    readable, _, _ = select.select([self._control], [], [], CALL_TIMEOUT_S)
                    if not readable:
                        log.warning("the engine process did not answer %r within %.0f s", request, CALL_TIMEOUT_S)
                        return None
                    answered, value = wire.receive(self._control)
                    if answered == number:
                        return value
            except (OSError, EOFError):
                return None

    def prefill_sums(self) -> Optional[tuple[float, float]]:
        """vLLM's prompt tokens read and the seconds it took, over every engine (app/engine/prefill_rate.py)."""
        return self._ask("prefill_sums")

    def metrics_text(self) -> bytes:
        """vLLM's Prometheus series (empty while the process cannot answer)."""
        return self._ask("metrics") or b""

    def close(self, timeout: float = 10.0) -> None:
        """Close the control socket: the process shuts down what engines are left and ends. Waits for that;
        what is still running after ``timeout`` the app's exit reaps (app/serve.py)."""
        if self._control is not None:
            self._control.close()
            self._control = None
        if self.process is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout)
            self._end_group()

    def _end_group(self) -> None:
        """Kill what is left of the engine process's group (vLLM's engine core and helpers of a process that
        died); the group's id is the process's pid, which the system does not hand out again while the group
        has a member."""
        import psutil

        assert self.process is not None
        group = self.process.pid
        members = []
        for process in psutil.Process().children(recursive=True):  # the orphans are this process's (subreaper)
            with contextlib.suppress(psutil.Error, OSError):
                if os.getpgid(process.pid) == group:
                    members.append(process)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(group, signal.SIGKILL)
        psutil.wait_procs(members, timeout=5)  # and reaped, not left as zombies


class ProcessEngine:
    """The engine protocol over the socket of one engine in the engine process."""

    def __init__(self, sock: socket.socket, max_model_len: int) -> None:
        self.max_model_len = max_model_len
        self._sock = sock
        self._send_lock = threading.Lock()
        self._streams: dict[str, tuple[asyncio.AbstractEventLoop, asyncio.Queue]] = {}
        self._calls: dict[int, concurrent.futures.Future] = {}
        self._call_ids = itertools.count()
        self._dead: Optional[str] = None
        self._shutting_down = False
        self._closed = threading.Event()  # the socket's far end is gone: shut down, or the process died
        threading.Thread(target=self._read, name="engine-link", daemon=True).start()

    # ----- the socket ------------------------------------------------------------------------------------
    def _send(self, message: Any) -> None:
        try:
            with self._send_lock:
                wire.send(self._sock, message)
        except OSError:
            raise EngineDied(self._dead or PROCESS_DIED) from None

    def _read(self) -> None:
        """Hand every message to whoever waits for it, until the far end closes."""
        try:
            while True:
                message = wire.receive(self._sock)
                if message[0] == "reply":
                    future = self._calls.pop(message[1], None)
                    if future is not None and not future.done():
                        future.set_result(message)
                    continue
                waiting = self._streams.get(message[1])
                if waiting is not None:
                    loop, queue = waiting
                    loop.call_soon_threadsafe(queue.put_nowait, message)
        except (EOFError, OSError):
            pass
        if not self._shutting_down:
            self._dead = PROCESS_DIED
        self._closed.set()
        gone = ("error", None, True, self._dead or "engine shut down")
        for loop, queue in list(self._streams.values()):
            with contextlib.suppress(RuntimeError):  # that loop is closed: nobody waits there any more
                loop.call_soon_threadsafe(queue.put_nowait, gone)
        for call_id, future in list(self._calls.items()):
            if not future.done():
                future.set_result(("reply", call_id, self._dead or "engine shut down", None))

    def _call(self, name: str) -> concurrent.futures.Future:
        call_id = next(self._call_ids)
        future: concurrent.futures.Future = concurrent.futures.Future()
        self._calls[call_id] = future
        if self._closed.is_set():
            future.set_result(("reply", call_id, self._dead or "engine shut down", None))
        else:
            self._send(("call", call_id, name))
        return future

    @staticmethod
    def _value(reply: tuple) -> Any:
        _, _, error, value = reply
        if error:
            raise EngineProcessError(error)
        return value

    # ----- the engine protocol -----------------------------------------------------------------------
    async def generate(self, token_ids: list[int], sampling: Sampling, request_id: str) -> AsyncIterator[Delta]:
        queue: asyncio.Queue = asyncio.Queue()
        self._streams[request_id] = (asyncio.get_running_loop(), queue)
        ended = False
        try:
            if self._closed.is_set():
                raise EngineDied(self._dead or "engine shut down")
            self._send(("generate", request_id, token_ids, sampling))
            while True:
                kind, _, *rest = await queue.get()
                if kind == "delta":
                    yield rest[0]
                    continue
                ended = True
                if kind == "end":
                    return
                died, text = rest
                raise EngineDied(text) if died else EngineProcessError(text)
        finally:
            self._streams.pop(request_id, None)
            if not ended and not self._closed.is_set():  # stopped early: the engine stops writing it too
                with contextlib.suppress(EngineDied):
                    self._send(("abort", request_id))

    async def abort(self, request_id: str) -> None:
        if not self._closed.is_set():
            with contextlib.suppress(EngineDied):
                self._send(("abort", request_id))

    async def check_health(self) -> None:
        self._value(await asyncio.wait_for(asyncio.wrap_future(self._call("check_health")), CALL_TIMEOUT_S))

    def dead_reason(self) -> Optional[str]:
        return self._dead

    def unfinished_requests(self) -> int:
        return int(self._value(self._call("unfinished_requests").result(CALL_TIMEOUT_S)))

    def shutdown(self) -> None:
        """Shut the engine down there and wait until it is (its memory free for the next engine)."""
        self._shutting_down = True
        if not self._closed.is_set():
            with contextlib.suppress(EngineDied):
                self._send(("shutdown",))
            self._closed.wait(15)
        self._sock.close()
