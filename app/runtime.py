"""The running app's parts in one object, built by launch.py and handed to the server and the chat UI.

Chainlit loads its handler file itself (app/chainlit_app.py), so that file finds the runtime through
``current_runtime()``; it is set once, at start-up, by ``server.create_app`` (never at import).
"""
from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from app.engine import EngineHost
from app.hardware import GpuInfo
from app.profiles import EnginePlan
from app.settings import AppSettings
from app.telemetry import AppMetrics


@dataclass
class GpuMemoryWatch:
    """GPU memory after load and the peak while generating (NVML), for the status panel and /metrics.

    ``follow`` samples several times a second while answers are being generated (a short answer's peak
    would fall between slow samples) and only now and then when idle.
    """

    read: Callable[[], Optional[int]]
    gpu: str = "0"  # the card's NVML index: the metrics' label
    after_load: Optional[int] = None
    peak: Optional[int] = None  # highest reading taken while an answer was being generated
    last: Optional[int] = None

    def sample(self, generating: bool = False) -> Optional[int]:
        used = self.read()
        if used is not None:
            self.last = used
            if generating:
                self.peak = max(self.peak or 0, used)
        return used

    async def follow(self, generating: Callable[[], bool], metrics: Optional[AppMetrics] = None,
                     busy_every_s: float = 0.2, idle_every_s: float = 5.0) -> None:
        last_sample = 0.0
        while True:
            busy = generating()
            if busy or time.monotonic() - last_sample >= idle_every_s:
                last_sample = time.monotonic()
                used = await asyncio.to_thread(self.sample, busy)
                if metrics is not None and used is not None:
                    metrics.gpu_memory_used.labels(gpu=self.gpu).set(used)
                    if self.peak is not None:
                        metrics.gpu_memory_peak.labels(gpu=self.gpu).set(self.peak)
            await asyncio.sleep(busy_every_s)


@dataclass
class Runtime:
    settings: AppSettings
    plan: EnginePlan
    host: EngineHost
    metrics: AppMetrics
    tokenizer: Any = None  # transformers tokenizer, loaded with the model
    generation_defaults: dict[str, Any] = field(default_factory=dict)
    gpu_memory: Optional[GpuMemoryWatch] = None
    history: Any = None  # app.history.HistoryStore when chats are kept (app/chat_history.py); None with --no-history
    started_at: float = field(default_factory=time.time)
    exit_code: int = 0

    @property
    def gpu(self) -> Optional[GpuInfo]:
        return self.plan.gpu

    @property
    def max_model_len(self) -> int:
        # The engine's plan, not the one we started with: a retry after an out-of-memory start halves it,
        # and chats must then be fitted to what the engine really accepts.
        return int(self.host.plan.engine_args.get("max_model_len", 4096))


_CURRENT: list[Runtime] = []


def set_current_runtime(runtime: Runtime) -> None:
    _CURRENT[:] = [runtime]


def current_runtime() -> Runtime:
    if not _CURRENT:
        raise RuntimeError("the ernie-chat runtime is not set: start the app with python launch.py")
    return _CURRENT[0]
