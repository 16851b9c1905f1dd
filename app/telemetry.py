"""Logging to the log file, and the app's own Prometheus metrics.

The app's metrics live in their own registry (one per app, no module globals); /metrics serves them
together with vLLM's, which vLLM registers in prometheus_client's default registry.
"""
from __future__ import annotations

import logging
import sys
from pathlib import Path

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
STATES = ("stopped", "loading", "warming", "ready", "restarting", "failed")


def setup_logging(log_file: Path, level: int = logging.INFO) -> None:
    """App and vLLM logs to the log file; our own INFO lines also to the terminal."""
    log_file.parent.mkdir(parents=True, exist_ok=True)
    file_handler = logging.FileHandler(log_file, encoding="utf-8")
    file_handler.setFormatter(logging.Formatter(LOG_FORMAT))
    console = logging.StreamHandler(sys.stderr)
    console.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s", "%H:%M:%S"))
    ours = logging.getLogger("ernie_chat")
    ours.setLevel(level)
    for handler in list(ours.handlers):
        ours.removeHandler(handler)
    ours.addHandler(file_handler)
    ours.addHandler(console)
    ours.propagate = False
    # vLLM already prints to the terminal; send a copy to the file so one place has everything.
    vllm_logger = logging.getLogger("vllm")
    vllm_logger.addHandler(file_handler)


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
        self.engine_state = Gauge("ernie_chat_engine_state", "1 for the engine's current state", ["state"],
                                  registry=r)
        self.set_engine_state("stopped")

    def set_engine_state(self, state: str) -> None:
        for name in STATES:
            self.engine_state.labels(state=name).set(1 if name == state else 0)
