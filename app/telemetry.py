"""Logging to the log file, and the app's own Prometheus metrics.

The app's metrics live in their own registry (one per app, no module globals); /metrics serves them
together with vLLM's, which vLLM registers in prometheus_client's default registry.
"""
from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import MutableMapping
from enum import Enum
from pathlib import Path
from typing import Optional

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from app.private_files import keep_private

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
# ``log.error(..., extra=FILE_ONLY)``: for the log file, not the terminal (where the same problem is
# already told once, in one line, by the launcher).
FILE_ONLY = {"console": False}
RUN_MARKER = "ernie-chat starts"  # the first line of each run, so `check` reads this run's errors only


class BarSafeHandler(logging.StreamHandler):
    """Writes each line through tqdm.write, so a log line never lands inside the start progress bar."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            from tqdm import tqdm

            tqdm.write(self.format(record), file=self.stream)
        except Exception:
            self.handleError(record)


def setup_logging(log_file: Path, level: int = logging.INFO, vllm_console_level: Optional[str] = None,
                  env: Optional[dict[str, str]] = None) -> None:
    """App and vLLM logs to the log file; our own INFO lines also to the terminal.

    ``vllm_console_level`` (e.g. "WARNING" while a progress bar is drawn) quiets vLLM on the terminal; its
    full log still goes to the file, from every vLLM process (see ``route_vllm_logs``).
    """
    log_file = log_file.resolve()
    log_file.parent.mkdir(parents=True, exist_ok=True)
    keep_private(log_file)  # it names chats' titles, users and errors: before any handler opens it
    file_handler = logging.FileHandler(log_file, encoding="utf-8")
    file_handler.setFormatter(logging.Formatter(LOG_FORMAT))
    console = BarSafeHandler(sys.stderr)
    console.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s", "%H:%M:%S"))
    console.addFilter(lambda record: getattr(record, "console", True))
    ours = logging.getLogger("ernie_chat")
    ours.setLevel(level)
    for handler in list(ours.handlers):
        ours.removeHandler(handler)
    ours.addHandler(file_handler)
    ours.addHandler(console)
    ours.propagate = False
    if not route_vllm_logs(log_file, vllm_console_level, os.environ if env is None else env):
        # The user brought a vLLM logging config of their own: copy at least this process's vLLM lines.
        logging.getLogger("vllm").addHandler(file_handler)
    for name in LIBRARY_LOGGERS:
        also_to_file(logging.getLogger(name), file_handler)
    errors = logging.getLogger(ERROR_LOGGER)  # file only: uvicorn prints the same traceback to stderr itself
    for handler in list(errors.handlers):
        errors.removeHandler(handler)
    errors.addHandler(file_handler)
    errors.propagate = False


# Chainlit's and its socket's own errors (an unknown message id, a bad UUID) also go to the log file, so that
# the log file has everything (docs/security.md, row 7: Chainlit's own errors).
LIBRARY_LOGGERS = ("chainlit", "socketio", "engineio", "asyncio")
ERROR_LOGGER = "ernie_chat.unhandled"


def also_to_file(logger: logging.Logger, file_handler: logging.Handler) -> None:
    """Add the file to a library's logger without taking its lines off the terminal (idempotent)."""
    previous = getattr(logger, "_ernie_chat_added", [])
    for handler in previous:
        logger.removeHandler(handler)
    if previous:
        logger.propagate = True
    added = [file_handler]
    if not logger.handlers and logger.propagate:
        # With no handler of its own the logger reached stderr through logging's last resort; a handler
        # here would end that, so keep a stderr one for warnings and errors.
        console = logging.StreamHandler(sys.stderr)
        console.setLevel(logging.WARNING)
        added.append(console)
        logger.propagate = False
    for handler in added:
        logger.addHandler(handler)
    logger._ernie_chat_added = added  # type: ignore[attr-defined]


class ErrorLogMiddleware:
    """Pure ASGI: writes every exception the app lets out (uvicorn answers those with a 500 and prints
    them to stderr only) to the log file, with its traceback and the request line."""

    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        try:
            await self.app(scope, receive, send)
        except Exception:
            logging.getLogger(ERROR_LOGGER).exception("unhandled error in %s %s %s", scope.get("type"),
                                                      scope.get("method", ""), scope.get("path", ""))
            raise


def route_vllm_logs(log_file: Path, console_level: Optional[str], env: MutableMapping[str, str]) -> bool:
    """Have every vLLM process (this one, the engine core, its workers) log to our file as well.

    vLLM configures its logger at import, in each process, from VLLM_LOGGING_CONFIG_PATH; the engine
    processes inherit the variable. False (and nothing changed) when the user configured vLLM's logging.
    """
    if env.get("VLLM_LOGGING_CONFIG_PATH") or env.get("VLLM_CONFIGURE_LOGGING", "1") == "0":
        return False
    level = env.get("VLLM_LOGGING_LEVEL", "INFO").upper()
    config = {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {
            "file": {"format": "%(asctime)s %(levelname)s %(name)s [%(processName)s]: %(message)s"},
            "console": {"format": "%(levelname)s %(asctime)s [%(filename)s:%(lineno)d] %(message)s",
                        "datefmt": "%m-%d %H:%M:%S"},
        },
        "handlers": {
            "file": {"class": "logging.FileHandler", "filename": str(log_file), "encoding": "utf-8",
                     "formatter": "file", "level": level},
            "console": {"class": "logging.StreamHandler", "stream": "ext://sys.stdout", "formatter": "console",
                        "level": console_level or level},
        },
        "loggers": {"vllm": {"handlers": ["file", "console"], "level": level, "propagate": False}},
    }
    path = log_file.with_name(log_file.name + ".vllm-logging.json")
    path.write_text(json.dumps(config, indent=1), encoding="utf-8")
    env["VLLM_LOGGING_CONFIG_PATH"] = str(path)
    return True


class LogTail:
    """Finds why an engine start failed, in the log file written since a mark.

    vLLM's engine core runs in another process; when it fails to start, this process only gets
    "Engine core initialization failed. See root cause above." The root cause (a CUDA out-of-memory error,
    vLLM's "Free memory on device ... is less than desired GPU memory utilization") is in that process's log,
    which ``route_vllm_logs`` sends to our log file.
    """

    GENERIC = ("Engine core initialization failed", "EngineCore failed to start")

    def __init__(self, log_file: Path) -> None:
        self.log_file = log_file

    def mark(self) -> int:
        try:
            return self.log_file.stat().st_size
        except OSError:
            return 0

    def root_cause_since(self, mark: int) -> Optional[str]:
        """The last exception line ("SomethingError: ...") logged after ``mark`` that is not vLLM's generic one."""
        try:
            with open(self.log_file, "rb") as f:
                f.seek(mark)
                text = f.read().decode("utf-8", errors="replace")
        except OSError:
            return None
        found = None
        for line in text.splitlines():
            line = line.strip()
            head = line.split(":", 1)[0]
            if (head.endswith(("Error", "Exception")) and " " not in head and ": " in line
                    and not any(g in line for g in self.GENERIC)):
                found = line
        return found[:500] if found else None


class AppMetrics:
    """The app's series: chats, active and queued requests, TTFT and tokens/s, engine restarts."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.chats = Counter("ernie_chat_chats", "Chat sessions started", registry=r)
        self.messages = Counter("ernie_chat_messages", "User messages received", registry=r)
        self.rejected = Counter("ernie_chat_rejected_messages", "Messages refused (empty, too long, ...)",
                                ["reason"], registry=r)
        self.active = Gauge("ernie_chat_active_requests", "Answers being generated now", registry=r)
        self.queued = Gauge("ernie_chat_queued_requests", "Answers waiting for a free slot", registry=r)
        self.ttft = Histogram("ernie_chat_time_to_first_token_seconds", "Time to first token",
                              buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30), registry=r)
        self.tokens_per_second = Histogram("ernie_chat_decode_tokens_per_second", "Decode speed per answer",
                                           buckets=(5, 10, 25, 50, 100, 200, 400, 800, 1600), registry=r)
        self.generated_tokens = Counter("ernie_chat_generated_tokens", "Tokens generated", registry=r)
        self.engine_restarts = Counter("ernie_chat_engine_restarts", "Engine restarts after a failure", registry=r)
        self.full_speed_failures = Counter("ernie_chat_full_speed_engine_failures",
                                           "Tries of the full-speed engine that did not start (the eager starting "
                                           "engine kept answering)", registry=r)
        self.engine_state = Gauge("ernie_chat_engine_state", "1 for the engine's current state", ["state"],
                                  registry=r)
        # Labelled by card, so that nothing is exported where nothing is measured (CPU, --remote-url):
        # an unlabelled gauge would read 0 bytes there.
        self.gpu_memory_used = Gauge("ernie_chat_gpu_memory_used_bytes", "GPU memory in use (NVML), sampled "
                                     "several times a second while answering", ["gpu"], registry=r)
        self.gpu_memory_peak = Gauge("ernie_chat_gpu_memory_peak_bytes", "Highest GPU memory in use seen "
                                     "since start (NVML)", ["gpu"], registry=r)
        # A write to the chat database failed (read-only file, full disk, server gone); answers go on
        # (README, "Chats that last").
        self.history_write_errors = Counter("ernie_chat_history_write_errors", "Chat history writes that "
                                            "failed (the chat went on, unsaved)", registry=r)

    def set_engine_state(self, state: Enum) -> None:
        """1 for ``state``, 0 for every other member of its enum (EngineState), so each state has a series."""
        for member in type(state):
            self.engine_state.labels(state=member.value).set(1 if member is state else 0)
