"""Assemble the runtime (engine host, metrics, tokenizer loader) and run the web server until a signal."""
from __future__ import annotations

import logging
import os
import secrets
import signal
import sys
from typing import Callable

from app.engine import EngineHost, StartStep, create_vllm_engine
from app.hardware import GpuFaultWatch, gpu_memory_used
from app.launcher import PROJECT_ROOT
from app.model_source import read_generation_defaults, resolve_model
from app.profiles import EnginePlan
from app.progress import StartProgressBar
from app.remote import TOKENIZER_PATTERNS, remote_engine_factory
from app.runtime import GpuMemoryWatch, Runtime
from app.settings import AppSettings
from app.telemetry import AppMetrics, LogTail, setup_logging

log = logging.getLogger("ernie_chat")


def build_runtime(settings: AppSettings, plan: EnginePlan) -> Runtime:
    # Chainlit reads .chainlit/ and chainlit.md from CHAINLIT_APP_ROOT at import: point it at the project.
    os.environ.setdefault("CHAINLIT_APP_ROOT", str(PROJECT_ROOT))
    os.environ.setdefault("VLLM_HOST_IP", "127.0.0.1")
    if settings.server.auth_token is not None:
        # Chainlit signs its login sessions with this; a fresh one per start logs everyone out on restart.
        os.environ.setdefault("CHAINLIT_AUTH_SECRET", secrets.token_urlsafe(48))
    # On a terminal, engine start gets a progress bar; vLLM's INFO lines would break it, so they go to the
    # log file only (warnings still show). Elsewhere (log files, systemd) everything is logged as before.
    terminal_bar = sys.stderr.isatty()
    setup_logging(settings.server.log_file, vllm_console_level="WARNING" if terminal_bar else None)
    metrics = AppMetrics()
    runtime_box: list[Runtime] = []

    remote = plan.device == "remote"

    def provide_model(progress: Callable[..., None]) -> str:
        # With a remote engine only the tokenizer is needed here (the template and context fitting run here).
        path = resolve_model(settings.model, progress, TOKENIZER_PATTERNS if remote else None)
        progress("loading the tokenizer", StartStep.TOKENIZER)
        from transformers import AutoTokenizer

        runtime = runtime_box[0]
        runtime.tokenizer = AutoTokenizer.from_pretrained(path)
        runtime.generation_defaults = read_generation_defaults(path)
        return path

    key = settings.model.remote_api_key
    factory = (remote_engine_factory(settings.model.remote_url, key.get_secret_value() if key else None,
                                     settings.model.remote_model) if remote else create_vllm_engine)
    host = EngineHost(provide_model, plan, metrics, max_concurrent=settings.engine.max_concurrent_chats,
                      # A remote server restarts on its own schedule (a vLLM start takes a minute or
                      # more): keep reconnecting, with the same capped backoff, instead of giving up.
                      max_restarts=None if remote else settings.engine.max_restarts,
                      start_timeout=settings.engine.engine_start_timeout, engine_factory=factory,
                      gpu_fault_check=GpuFaultWatch(plan.gpu) if plan.gpu else None,
                      log_tail=None if remote else LogTail(settings.server.log_file.resolve()))
    watch = GpuMemoryWatch(lambda: gpu_memory_used(plan.gpu), gpu=str(plan.gpu.index)) if plan.gpu else None
    runtime = Runtime(settings=settings, plan=plan, host=host, metrics=metrics, gpu_memory=watch)
    runtime_box.append(runtime)

    def on_status(status) -> None:
        if watch and status.state.value == "ready" and watch.after_load is None:
            watch.after_load = watch.sample()

    host.add_listener(on_status)
    if terminal_bar:
        log.info("vLLM's full log: %s", settings.server.log_file.resolve())
        host.add_listener(StartProgressBar(sys.stderr))
    return runtime


def run_server(runtime: Runtime) -> int:
    """Serve until SIGINT/SIGTERM; uvicorn then runs our lifespan's shutdown, which stops the engine."""
    import uvicorn

    from app.server import create_app

    settings = runtime.settings.server
    app = create_app(runtime)
    config = uvicorn.Config(app, host=settings.host, port=settings.port, log_level="warning",
                            root_path=settings.root_path, timeout_graceful_shutdown=5)
    server = uvicorn.Server(config)

    def fatal(line: str) -> None:
        # The first start failed for good: say it once, then exit non-zero.
        print(f"error: {line}", flush=True)
        runtime.exit_code = 1
        server.should_exit = True

    runtime.host.on_fatal = fatal
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
    return runtime.exit_code
