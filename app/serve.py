"""Serve: set up logging, build the runtime, run the web server until a signal, exit with the engine gone.

Called by app/launcher.py once every setting has been checked; nothing here runs at import.
"""
from __future__ import annotations

import logging
import os
import secrets
import signal
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Optional

from app.engine import resource_tracker
from app.engine.orphan_guard import RECORDS, clean_leftovers, start_watcher, stop_watcher
from app.engine.progress import StartProgressBar
from app.errors import ErnieChatError
from app.planning.engine_plan import EnginePlan
from app.runtime import Runtime, build_runtime
from app.settings import PROJECT_ROOT, AppSettings
from app.telemetry import FILE_ONLY, RUN_MARKER, setup_logging

if TYPE_CHECKING:
    from app.engine.engine_link import EngineProcess

log = logging.getLogger("ernie_chat")


def serve(settings: AppSettings, plan: EnginePlan, launched_at: float) -> int:
    """Serve until SIGINT/SIGTERM; uvicorn then runs our lifespan's shutdown, which stops the engine."""
    from app.heap import tune_malloc

    tune_malloc()  # before any thread (the server's, the engine client's) takes an arena of its own
    # Chainlit reads .chainlit/ and chainlit.md from CHAINLIT_APP_ROOT at import: point it at the project.
    os.environ.setdefault("CHAINLIT_APP_ROOT", str(PROJECT_ROOT))
    # Chainlit signs its logins with this; a fresh one per start ends every login on restart (the local user's
    # page logs itself in again; app/guards/local_user.py).
    os.environ.setdefault("CHAINLIT_AUTH_SECRET", secrets.token_urlsafe(48))
    # On a terminal, engine start gets a progress bar, and only what the user must act on: vLLM's INFO and
    # WARNING lines (16 on a normal CPU start: Triton missing, NUMA, tcmalloc "for best performance", ...)
    # go to the log file only; its errors still show. Elsewhere (log files, systemd) everything is logged.
    terminal_bar = sys.stderr.isatty()
    vllm_console_level = "ERROR" if terminal_bar else None
    setup_logging(settings.server.log_file, vllm_console_level=vllm_console_level)
    if terminal_bar:
        # torch's C++ warnings bypass logging (e.g. the CPU worker's "bound to these NUMA nodes" note).
        os.environ.setdefault("TORCH_CPP_LOG_LEVEL", "ERROR")
    log.info("%s (pid %d)", RUN_MARKER, os.getpid(), extra=FILE_ONLY)
    records = _process_records(settings)
    clean_leftovers(records)
    _become_subreaper()
    resource_tracker.quiet()  # before anything here starts multiprocessing's tracker (document readers)
    # The watcher first, so that a kill from here on leaves no engine process (issue 36, N5); then the engine
    # process, whose imports run while this process imports the web server and the UI (issue 34).
    watcher = start_watcher(records)
    engine_process: Optional[EngineProcess] = None
    if plan.device != "remote":
        from app.engine.engine_link import EngineProcess

        engine_process = EngineProcess(plan, settings.server.log_file.resolve(), vllm_console_level)
    try:
        failure = _serve_until_signal(settings, plan, launched_at, terminal_bar, engine_process)
    finally:
        if engine_process is not None:
            engine_process.close()  # its engines are down by now (the lifespan): it ends
        _reap_engine_processes(keep=watcher.pid if watcher else None)
        log.info("shutdown: engine processes gone")
        stop_watcher(watcher)
        resource_tracker.stop()
    log.info("shutdown: done, leaving")
    if failure:
        raise failure[0]
    return 0


def _serve_until_signal(settings: AppSettings, plan: EnginePlan, launched_at: float, terminal_bar: bool,
                        engine_process: Optional[EngineProcess]) -> list[ErnieChatError]:
    """Build the runtime and the web server, serve until a signal; what made the first start fail for good."""
    import uvicorn

    from app.server import create_app

    failure: list[ErnieChatError] = []

    def fatal(line: str) -> None:
        # The first start failed for good: stop the server as Ctrl-C would (uvicorn handles the signal
        # with a graceful shutdown); main() then prints the line once, on stderr, like every other error.
        failure.append(ErnieChatError(line))
        signal.raise_signal(signal.SIGTERM)

    runtime = build_runtime(settings, plan, _engine_factory(settings, plan, engine_process), on_fatal=fatal,
                            launched_at=launched_at, engine_process=engine_process)
    if terminal_bar:
        log.info("vLLM's full log: %s", settings.server.log_file.resolve())
        runtime.host.add_listener(StartProgressBar(sys.stderr))
    if _should_open_browser(settings, terminal_bar):
        runtime.host.add_listener(BrowserOpener(_public_url(settings)))
    server = uvicorn.Server(uvicorn.Config(create_app(runtime), host=settings.server.host, port=settings.server.port,
                                           log_level="warning", root_path=settings.server.root_path,
                                           # X-Forwarded-For only from --forwarded-allow-ips (uvicorn believed
                                           # 127.0.0.1 by default: any local program could claim any address
                                           # and dodge the login limit; issue 36, N3).
                                           proxy_headers=settings.server.proxies_trusted,
                                           forwarded_allow_ips=settings.server.forwarded_allow_ips or None,
                                           # Open answers get 2 s to finish on a signal: with the
                                           # engine's shutdown and reaping, the exit stays within 5 s.
                                           timeout_graceful_shutdown=2))
    _tell_runtime_on_signal(server, runtime)
    _run_until_signal(server, runtime)
    log.info("shutdown: web server stopped")
    return failure


def _process_records(settings: AppSettings) -> Optional[Path]:
    """Where this app's watcher records its processes, for the next start to end what a kill left
    (app/engine/orphan_guard.py): the data directory's; None with --no-history, which writes nothing to disk."""
    from app.private_files import data_folder

    return data_folder(settings.history) / RECORDS if settings.history.history else None


def _public_url(settings: AppSettings) -> str:
    server = settings.server
    host = "127.0.0.1" if server.host in ("0.0.0.0", "::") else server.host
    return f"http://{host}:{server.port}{server.root_path}/"


def _should_open_browser(settings: AppSettings, on_terminal: bool) -> bool:
    """--open/--no-open; unset: a person at a desktop started it (a terminal, a display) for themselves."""
    if settings.server.open is not None:
        return settings.server.open
    has_display = bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")) or sys.platform == "darwin"
    return on_terminal and has_display and settings.server.is_loopback


class BrowserOpener:
    """A status listener that opens the chat in the browser once, when the engine is first ready."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.opened = False

    def __call__(self, status) -> None:
        from app.engine.status import EngineState

        if status.state is EngineState.READY and not self.opened:
            self.opened = True
            import webbrowser

            threading.Thread(target=webbrowser.open, args=(self.url,), name="open-browser", daemon=True).start()


def _engine_factory(settings: AppSettings, plan: EnginePlan, engine_process: Optional[EngineProcess]):
    if plan.device == "remote":
        from app.engine.remote import remote_engine_factory

        key = settings.model.remote_api_key
        assert settings.model.remote_url is not None  # the planner plans "remote" only for --remote-url
        return remote_engine_factory(settings.model.remote_url, key.get_secret_value() if key else None,
                                     settings.model.remote_model)
    assert engine_process is not None  # started for every plan but a remote one (serve)
    return engine_process.build  # vLLM runs in the engine process (app/engine/engine_process.py)


def _tell_runtime_on_signal(server, runtime: Runtime) -> None:
    """Mark the runtime as stopping when uvicorn takes SIGINT/SIGTERM, before it closes a socket: the answers it
    then cuts are kept as the app's interruption, not as a Stop pressed by their user (issue 36, N13). uvicorn
    installs ``server.handle_exit`` as its signal handler when it starts serving."""
    handle_exit = server.handle_exit

    def stopping(sig, frame) -> None:
        # Each shutdown step logs a line: their times say where an exit's seconds go.
        log.info("shutdown: %s received", signal.Signals(sig).name)
        runtime.stopping = True
        handle_exit(sig, frame)

    server.handle_exit = stopping


def _run_until_signal(server, runtime: Runtime) -> None:
    url = _public_url(runtime.settings)
    log.info("ernie-chat UI at %s (profile %s; the model loads in the background)", url, runtime.plan.profile)

    # uvicorn shuts down gracefully on SIGINT/SIGTERM (our lifespan stops the engine), then re-raises the
    # signal; by then all is clean, so turn that into a normal exit instead of a traceback or -15.
    def interrupted(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupted)
    try:
        server.run()
    except KeyboardInterrupt:
        pass


# Linux prctl option: orphaned descendants (vLLM's workers, when their engine process ends first) are
# re-parented to this process instead of PID 1, so this process can reap them before it exits. Without it a
# `VLLM::Worker <defunct>` was left behind after Ctrl-C where PID 1 does not reap (containers).
_PR_SET_CHILD_SUBREAPER = 36


def _become_subreaper() -> None:
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: nothing to adopt
        pass


def _reap_engine_processes(timeout_s: float = 2.0, keep: Optional[int] = None) -> None:
    """Exit only after every engine process is gone: wait for them (the engine's shutdown has asked them to
    stop), kill what is left after ``timeout_s``, and reap the zombies. ``keep``: the watcher, stopped after."""
    import time

    import psutil

    me = psutil.Process()
    tracker = resource_tracker.pid()  # multiprocessing's helper ends when we do; waiting for it would hang
    deadline = time.monotonic() + timeout_s
    while True:
        left = [p for p in me.children(recursive=True) if p.pid not in (tracker, keep)]
        _reap_zombies()
        if not left:
            return
        if time.monotonic() >= deadline:
            for process in left:
                try:
                    process.kill()
                except psutil.NoSuchProcess:
                    pass
            psutil.wait_procs(left, timeout=2)
            _reap_zombies()
            log.warning("stopped %d engine process(es) that did not exit by themselves", len(left))
            return
        time.sleep(0.05)


def _reap_zombies() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
