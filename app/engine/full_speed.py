"""The switch from the starting engine to the full-speed one (--quick-start, app/planning/profiles.py).

"Ready" comes from an eager starting engine while the full-speed one is built beside it, on a second loop; new
requests then go to the full one, answers in flight finish where they began, and the starting engine is shut down
when its last answer ends. A full-speed engine that fails to start is tried again while the starting one answers.
A part of EngineHost (app/engine/host.py holds the state these jobs read and write).
"""
from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, Optional

from app.engine.slots import EngineSlot
from app.engine.status import EngineStatus, Speed
from app.errors import one_line
from app.i18n import starting_engine_cost
from app.planning.engine_plan import EnginePlan
from app.telemetry import FILE_ONLY, AppMetrics

if TYPE_CHECKING:
    from app.engine.host import EngineHostOptions

log = logging.getLogger("ernie_chat.engine")


class FullSpeedSwitch:
    """EngineHost's switch: the full-speed engine built (and tried again), taking over, the starting one retired."""

    # The host's state (EngineHost.__init__ sets it up) and what its other jobs do, as used here.
    options: EngineHostOptions
    plan: EnginePlan
    status: EngineStatus
    metrics: AppMetrics
    launched_at: float
    _slot: Optional[EngineSlot]
    _retiring: list[EngineSlot]
    _ready_event: Optional[asyncio.Event]
    _closing: bool
    _notify: Callable[[], None]  # app/engine/host.py
    _build: Callable[[EnginePlan, str], Coroutine[Any, Any, EngineSlot]]  # app/engine/starting.py
    _root_cause: Callable[[int], Coroutine[Any, Any, Optional[str]]]

    async def _speed_up(self) -> None:
        """Build the full-speed engine beside the starting one; when both are up, new requests go to the full
        one, the answers in flight finish on the starting engine, and that one is shut down after its last."""
        log.info("building the full-speed engine beside the starting one")
        slot = await self._build_full_speed()
        if slot is None:
            return
        try:
            assert self._ready_event is not None
            await self._ready_event.wait()  # the starting engine is up (it holds the chats' first answers)
        except BaseException:
            await slot.stop()
            raise
        old, self._slot = self._slot, slot
        self.status.speed, self.status.full_speed_seconds = Speed.FULL, round(time.time() - self.launched_at, 2)
        log.info("full speed after %.1fs: new answers go to the full-speed engine; %d finishing on the "
                 "starting one", self.status.full_speed_seconds, old.in_flight if old else 0)
        self._notify()
        if old is not None:
            await self._retire(old)

    async def _build_full_speed(self) -> Optional[EngineSlot]:
        """The full-speed engine, tried again after each failure while the starting engine answers; None when
        every try failed (the starting engine then stays, and everyone is told why)."""
        delays = self.options.full_speed_retry_delays
        self.status.full_speed_tries = 1 + len(delays)
        for attempt, delay in enumerate((0.0, *delays), start=1):
            await asyncio.sleep(delay)
            self.status.full_speed_try = attempt
            mark = self.options.log_tail.mark() if self.options.log_tail else 0
            try:
                return await self._build(self.plan, "vllm-engine-loop-full")
            except asyncio.CancelledError:
                raise
            except Exception as err:
                log.exception("the full-speed engine did not start (try %d of %d)", attempt,
                              self.status.full_speed_tries, extra=FILE_ONLY)
                reason = await self._root_cause(mark) or one_line(err)
                self.metrics.full_speed_failures.inc()
                if attempt < self.status.full_speed_tries:
                    self.status.speed, self.status.speed_reason = Speed.RETRYING, reason
                    self.status.full_speed_try = attempt + 1
                    log.warning("the full-speed engine did not start (%s); trying again in %.0f s (try %d of %d)",
                                reason, delays[attempt - 1], attempt + 1, self.status.full_speed_tries)
                    self._notify()
                else:
                    await self._keep_starting_engine(reason)
        return None

    async def _keep_starting_engine(self, reason: str) -> None:
        """The full-speed engine failed every try: answers stay on the eager engine, and everyone is told so and
        why."""
        self.status.speed, self.status.speed_reason = Speed.STARTING_ONLY, reason
        self.status.last_error = reason
        log.error("answering with the starting engine (eager%s): %s; see the log",
                  starting_engine_cost("en", self.plan.device), reason)
        self._notify()

    async def _retire(self, slot: EngineSlot) -> None:
        """Let a replaced engine finish the answers it is streaming, then shut it down."""
        self._retiring.append(slot)
        try:
            while slot.in_flight and not self._closing:
                await asyncio.sleep(0.1)
        finally:
            self._retiring.remove(slot)
            await slot.stop()
        log.info("the starting engine is shut down")
