"""The watchdog: notices a dead engine (or a GPU fault) and restarts it with backoff; never pkill.

States: ready -> restarting -> ready when the engine dies; failed after ``max_restarts`` tries. A restart starts the
full-speed engine directly (a starting engine only shortens the first start). A part of EngineHost
(app/engine/host.py holds the state these jobs read and write).
"""
from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, Optional

from app.engine.slots import EngineSlot
from app.engine.status import EngineState, EngineStatus, Speed
from app.errors import one_line
from app.i18n import Phrase
from app.planning.engine_plan import EnginePlan
from app.telemetry import AppMetrics

if TYPE_CHECKING:
    from app.engine.host import EngineHostOptions

log = logging.getLogger("ernie_chat.engine")


class EngineWatchdog:
    """EngineHost's health checks and restarts."""

    # The host's state (EngineHost.__init__ sets it up) and what its other jobs do, as used here.
    options: EngineHostOptions
    plan: EnginePlan
    status: EngineStatus
    metrics: AppMetrics
    _slot: Optional[EngineSlot]
    _speed_up_task: Optional[asyncio.Task]
    _ready_event: Optional[asyncio.Event]
    _closing: bool
    _set: Callable[..., None]  # app/engine/host.py
    _stop_engine: Callable[[], Coroutine[Any, Any, None]]
    _start_once: Callable[[EnginePlan], Coroutine[Any, Any, None]]  # app/engine/starting.py

    async def _watchdog(self) -> None:
        """Notice a dead engine (or a GPU fault) and restart it with backoff; never pkill."""
        failures = 0
        while not self._closing:
            await asyncio.sleep(self.options.health_interval)
            if self.status.state is not EngineState.READY:
                continue
            reason = await self.health_problem()
            if reason is None:
                failures = 0
                continue
            await self._restart(reason, failures)
            failures += 1

    async def health_problem(self) -> Optional[str]:
        """None when healthy, else why not."""
        slot = self._slot
        if slot is None:
            return "no engine"
        engine = slot.engine
        dead = engine.dead_reason()
        if dead:
            return dead
        if self.options.gpu_fault_check:
            fault = await asyncio.to_thread(self.options.gpu_fault_check)
            if fault:
                return fault
        try:
            await slot.call(engine.check_health(), 5)
        except Exception as err:
            return f"health check failed: {one_line(err)}"
        return None

    async def report_dead(self, reason: str) -> None:
        """A request saw the engine die; restart now rather than at the next health poll."""
        if self.status.state is EngineState.READY:
            await self._restart(reason, 0)

    async def _restart(self, reason: str, failures: int) -> None:
        if self.status.state is EngineState.RESTARTING or self._closing:
            return
        self.status.last_error = reason
        log.error("engine failure: %s; restarting", reason)
        self._set(EngineState.RESTARTING, reason)
        self.metrics.engine_restarts.inc()
        assert self._ready_event is not None
        self._ready_event.clear()
        if self._speed_up_task is not None and not self._speed_up_task.done():
            # The restart starts the full-speed engine itself; a half-built one beside it is shut down.
            self._speed_up_task.cancel()
            await asyncio.gather(self._speed_up_task, return_exceptions=True)
        await self._stop_engine()
        attempt = 0
        while not self._closing:
            limit = self.options.max_restarts
            if limit is not None and self.status.restarts >= limit:
                self._set(EngineState.FAILED, Phrase("detail_gave_up", reason=reason, restarts=self.status.restarts))
                return
            self.status.restarts += 1
            await asyncio.sleep(min(30.0, 2.0 ** (attempt + failures) - 1))  # 0 s, 1 s, 3 s, 7 s ...
            try:
                await self._start_once(self.plan)
                if self.status.speed is not None:
                    self.status.speed = Speed.FULL
                return
            except Exception as err:
                attempt += 1
                self.status.last_error = one_line(err)
                log.error("engine restart failed: %s", self.status.last_error)
                await self._stop_engine()
                self._set(EngineState.RESTARTING, Phrase("detail_retrying_after", error=self.status.last_error))
