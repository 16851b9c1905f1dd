"""The running app's parts in one object, built by launch.py and handed to the server and the chat UI.

Chainlit loads its handler file itself (app/chainlit_app.py), so that file finds the runtime through
``current_runtime()``; it is set once, at start-up, by ``server.create_app`` (never at import).
"""
from __future__ import annotations

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
    """GPU memory after load and the peak seen while generating (NVML), for the status panel."""

    read: Callable[[], Optional[int]]
    after_load: Optional[int] = None
    peak: Optional[int] = None

    def sample(self) -> Optional[int]:
        used = self.read()
        if used is not None:
            self.peak = max(self.peak or 0, used)
        return used


@dataclass
class Runtime:
    settings: AppSettings
    plan: EnginePlan
    host: EngineHost
    metrics: AppMetrics
    tokenizer: Any = None  # transformers tokenizer, loaded with the model
    generation_defaults: dict[str, Any] = field(default_factory=dict)
    gpu_memory: Optional[GpuMemoryWatch] = None
    started_at: float = field(default_factory=time.time)
    exit_code: int = 0

    @property
    def gpu(self) -> Optional[GpuInfo]:
        return self.plan.gpu

    @property
    def max_model_len(self) -> int:
        return int(self.plan.engine_args.get("max_model_len", 4096))


_CURRENT: list[Runtime] = []


def set_current_runtime(runtime: Runtime) -> None:
    _CURRENT[:] = [runtime]


def current_runtime() -> Runtime:
    if not _CURRENT:
        raise RuntimeError("the ernie-chat runtime is not set: start the app with python launch.py")
    return _CURRENT[0]
