"""Serve: set up logging, build the runtime, run the web server until a signal, exit with the engine gone.

Called by app/launcher.py once every setting has been checked; nothing here runs at import.
"""
from __future__ import annotations

import logging
import os
import secrets
import signal
import sys

from app.errors import ErnieChatError
from app.profiles import EnginePlan
from app.progress import StartProgressBar
from app.runtime import Runtime, build_runtime
from app.settings import PROJECT_ROOT, AppSettings
from app.telemetry import FILE_ONLY, RUN_MARKER, setup_logging

log = logging.getLogger("ernie_chat")


def serve(settings: AppSettings, plan: EnginePlan, launched_at: float) -> int:
    """Serve until SIGINT/SIGTERM; uvicorn then runs our lifespan's shutdown, which stops the engine."""
    import uvicorn

    from app.server import create_app

    # Chainlit reads .chainlit/ and chainlit.md from CHAINLIT_APP_ROOT at import: point it at the project.
    os.environ.setdefault("CHAINLIT_APP_ROOT", str(PROJECT_ROOT))
    if settings.server.auth_token is not None:
        # Chainlit signs its login sessions with this; a fresh one per start logs everyone out on restart.
        os.environ.setdefault("CHAINLIT_AUTH_SECRET", secrets.token_urlsafe(48))
    # On a terminal, engine start gets a progress bar; vLLM's INFO lines would break it, so they go to the
    # log file only (warnings still show). Elsewhere (log files, systemd) everything is logged as before.
    terminal_bar = sys.stderr.isatty()
    setup_logging(settings.server.log_file, vllm_console_level="WARNING" if terminal_bar else None)
    log.info("%s (pid %d)", RUN_MARKER, os.getpid(), extra=FILE_ONLY)
    failure: list[ErnieChatError] = []

    def fatal(line: str) -> None:
        # The first start failed for good: stop the server as Ctrl-C would (uvicorn handles the signal
        # with a graceful shutdown); main() then prints the line once, on stderr, like every other error.
        failure.append(ErnieChatError(line))
        signal.raise_signal(signal.SIGTERM)

    runtime = build_runtime(settings, plan, _engine_factory(settings, plan), on_fatal=fatal,
                            launched_at=launched_at)
    if terminal_bar:
        log.info("vLLM's full log: %s", settings.server.log_file.resolve())
        runtime.host.add_listener(StartProgressBar(sys.stderr))
    server = uvicorn.Server(uvicorn.Config(create_app(runtime), host=settings.server.host, port=settings.server.port,
                                           log_level="warning", root_path=settings.server.root_path,
                                           timeout_graceful_shutdown=5))
    _run_until_signal(server, runtime)
    if failure:
        raise failure[0]
    return 0


def _engine_factory(settings: AppSettings, plan: EnginePlan):
    if plan.device == "remote":
        from app.remote import remote_engine_factory

        key = settings.model.remote_api_key
        return remote_engine_factory(settings.model.remote_url, key.get_secret_value() if key else None,
                                     settings.model.remote_model)
    from app.vllm_engine import create_vllm_engine  # imports vLLM only when it is called

    return create_vllm_engine


def _run_until_signal(server, runtime: Runtime) -> None:
    settings = runtime.settings.server
    url = f"http://{settings.host}:{settings.port}{settings.root_path}/"
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
