"""What an engine start and a running engine look like from outside: the state, the start's steps, the speed.

EngineHost (app/engine/host.py) writes an ``EngineStatus``; the terminal bar, the status panel, /readyz and
the model download read it. A module of its own so that those readers need not import the host.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Optional


class EngineState(str, Enum):
    STOPPED = "stopped"
    LOADING = "loading"
    WARMING = "warming"
    READY = "ready"
    RESTARTING = "restarting"
    FAILED = "failed"


class StartStep(int, Enum):
    """The steps of an engine start, numbered for progress displays (terminal bar, UI panel, /readyz)."""

    MODEL = 1  # find the model, or download it on the first run
    TOKENIZER = 2
    ENGINE = 3  # vLLM loads the weights, sizes the KV cache, captures graphs: the long step
    WARMUP = 4  # the first request, paid before "ready"


START_STEPS = len(StartStep)


class Speed(str, Enum):
    """Which engine answers, when a starting engine runs first (the panel and /readyz say it)."""

    STARTING = "starting"  # the eager engine answers; the full-speed one is being built
    FULL = "full"  # the full-speed engine answers
    RETRYING = "retrying"  # the full-speed engine failed to start and is tried again; the eager one answers
    STARTING_ONLY = "starting_only"  # the full-speed engine failed every try; the eager one stays


@dataclass
class EngineStatus:
    state: EngineState = EngineState.STOPPED
    detail: str = ""
    restarts: int = 0
    ready_seconds: Optional[float] = None  # launch -> ready, the first time
    ready_took: Optional[float] = None  # this start (or restart) -> ready: the panel's "ready in N s"
    last_error: str = ""
    step: Optional[StartStep] = None  # while starting: which step; None otherwise
    start_began_at: float = field(default_factory=time.time)  # the launch, or the restart's beginning
    speed: Optional[Speed] = None  # None: one engine, no switch planned
    full_speed_seconds: Optional[float] = None  # launch -> the full-speed engine took over
    speed_reason: str = ""  # with RETRYING or STARTING_ONLY: why the full-speed engine did not start
    full_speed_try: int = 1  # which try of the full-speed engine's start runs (RETRYING), or ran last
    full_speed_tries: int = 1  # how many tries it gets

    @property
    def starting(self) -> bool:
        return self.state in (EngineState.LOADING, EngineState.WARMING, EngineState.RESTARTING) and \
            self.step is not None

    def to_dict(self) -> dict[str, Any]:
        out = {"state": self.state.value, "detail": self.detail, "restarts": self.restarts,
               "ready_seconds": self.ready_seconds, "last_error": self.last_error}
        if self.speed is not None:
            out.update(speed=self.speed.value, full_speed_seconds=self.full_speed_seconds)
        if self.speed in (Speed.RETRYING, Speed.STARTING_ONLY):
            out.update(speed_reason=self.speed_reason, full_speed_try=self.full_speed_try,
                       full_speed_tries=self.full_speed_tries)
        if self.starting:
            out.update(step=int(self.step or 0), steps=START_STEPS,
                       starting_seconds=round(time.time() - self.start_began_at, 1))
        return out
