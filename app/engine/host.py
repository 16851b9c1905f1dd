"""EngineHost: the engine (one at a time; two while a starting engine hands over), started in the background,
watched, restarted. It speaks only the engine protocol (app/engine/protocol.py): no vLLM type here.

Cut by job: this module holds the host's state (status, ready, its listeners), its lifecycle (start in the background,
shutdown) and the answers' path (the fair queue, timing, the engine each answer stays on). Its other jobs, mixed in:
  app/engine/starting.py    first start, out-of-memory retry, one start, one build
  app/engine/warm_up.py     the warm-up and prefill calibration before "ready"
  app/engine/full_speed.py  the switch from the starting engine to the full-speed one (--quick-start)
  app/engine/watchdog.py    health checks, restart with backoff
  app/engine/slots.py       the loop thread each engine lives on (why a loop of its own: see there)

States: loading -> warming -> ready; ready -> restarting -> ready when the engine dies; failed when a
start fails for good. With a starting engine (--quick-start) "ready" comes from an eager engine while the
full-speed one is built beside it (app/engine/full_speed.py).
vLLM is imported on the engine thread, so the UI answers HTTP before it loads.
Every "N s" the user sees counts from the launch of the process, the moment they pressed Enter.
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from dataclasses import dataclass
from typing import Optional

from app.engine.full_speed import FullSpeedSwitch
from app.engine.prefill_rate import PrefillRate
from app.engine.protocol import Delta, Engine, EngineFactory, Sampling
from app.engine.queueing import FairGate, PositionCallback
from app.engine.slots import EngineSlot
from app.engine.starting import EngineStarting
from app.engine.status import START_STEPS, EngineState, EngineStatus, StartStep
from app.engine.warm_up import EngineWarmUp
from app.engine.watchdog import EngineWatchdog
from app.errors import EngineDied, EngineUnavailable
from app.planning.engine_plan import EnginePlan
from app.telemetry import FILE_ONLY, AppMetrics, LogTail

log = logging.getLogger("ernie_chat.engine")


def no_retry(plan: EnginePlan) -> Optional[EnginePlan]:
    """The retry rule of a host given none: an out-of-memory start is not tried again."""
    return None


@dataclass(frozen=True)
class EngineHostOptions:
    """What an EngineHost is built from: where the model comes from, the plan, the engine factory, and how
    the host queues, watches and restarts the engine."""

    model_path_provider: Callable[[Callable[[str], None]], str]  # finds (or downloads) the model, telling progress
    plan: EnginePlan
    metrics: AppMetrics
    engine_factory: EngineFactory
    max_restarts: Optional[int] = 5  # None: never give up (a remote server comes back on its own schedule)
    # Seconds before each further try of a full-speed engine that failed to start while the starting one answers
    # (a cause that passes, such as a fork refused during a new machine's first launch, costs seconds, not the
    # session's speed); after the last, the starting engine stays.
    full_speed_retry_delays: tuple[float, ...] = (5.0, 20.0)
    start_timeout: float = 600.0  # seconds one engine build may take
    health_interval: float = 1.0  # seconds between the watchdog's health checks
    gpu_fault_check: Optional[Callable[[], Optional[str]]] = None  # a GPU fault as one line, else None
    log_tail: Optional[LogTail] = None  # where the engine process's own error lands when a start fails
    on_fatal: Optional[Callable[[str], None]] = None  # called once when the first start fails for good
    launched_at: Optional[float] = None  # the process's launch (None: now); every "N s" shown counts from it
    before_ready: Callable[[], None] = lambda: None  # blocks until what chats need besides the engine is loaded
    # The plan to try once more after an out-of-memory start, None when there is none smaller: the planner's rule
    # (app/planning/profiles.py with_smaller_kv), given by whoever builds the host (app/runtime.py).
    plan_after_out_of_memory: Callable[[EnginePlan], Optional[EnginePlan]] = no_retry
    # vLLM's prompt tokens read and seconds taken so far (app/engine/prefill_rate.py); None: this process's registry
    # (an engine in this process), else the engine process's (app/engine/engine_link.py).
    prefill_sums: Optional[Callable[[], Optional[tuple[float, float]]]] = None


class EngineHost(EngineStarting, FullSpeedSwitch, EngineWarmUp, EngineWatchdog):
    """Owns one engine at a time: start, warm up, health, restart with backoff, shutdown."""

    def __init__(self, options: EngineHostOptions) -> None:
        self.options = options
        self.plan = options.plan  # the plan that runs: after an out-of-memory retry, the smaller one
        self.metrics = options.metrics
        self.gate = FairGate(options.plan.max_concurrent)  # answers at once; the rest wait their turn
        # how fast the engine reads prompts, measured after its warm-up's first round
        self.prefill_rate = PrefillRate(options.prefill_sums)
        self.status = EngineStatus()
        self.metrics.set_engine_state(self.status.state)
        self._slot: Optional[EngineSlot] = None  # the engine new requests go to
        self._retiring: list[EngineSlot] = []  # replaced engines finishing their answers
        self._speed_up_task: Optional[asyncio.Task] = None
        self._tasks: list[asyncio.Task] = []
        self._listeners: list[Callable[[EngineStatus], None]] = []
        self._model_path: Optional[str] = None
        self.launched_at = options.launched_at or time.time()
        self.status.start_began_at = self.launched_at
        self._ready_event: Optional[asyncio.Event] = None
        self._closing = False

    # ----- state -------------------------------------------------------------------------------------
    def add_listener(self, callback: Callable[[EngineStatus], None]) -> None:
        self._listeners.append(callback)

    def _set(self, state: EngineState, detail: str = "", step: Optional[StartStep] = None) -> None:
        status = self.status
        if step is not None and status.step is None and state is EngineState.RESTARTING:
            status.start_began_at = time.time()  # a restart's steps count from its own beginning
        status.state, status.detail, status.step = state, detail, step
        self.metrics.set_engine_state(state)
        # Each step's line says when it began, counted as the user counts (from the launch, or the restart's
        # beginning): the log alone then times every step.
        where = f" [{int(step)}/{START_STEPS}] at {time.time() - status.start_began_at:.1f}s" \
            if step is not None else ""
        # A failed first start is told once, by the launcher; the file keeps this line too.
        log.info("engine %s%s%s", state.value, where, f": {detail}" if detail else "",
                 extra=FILE_ONLY if state is EngineState.FAILED else None)
        self._notify()

    def _notify(self) -> None:
        for callback in list(self._listeners):
            try:
                callback(self.status)
            except Exception:  # a listener must never break the engine
                log.exception("status listener failed")

    @property
    def ready(self) -> bool:
        return self.status.state is EngineState.READY

    @property
    def max_model_len(self) -> int:
        """The context chats are fitted to: what the running engine serves (after an out-of-memory retry
        halved it, or as a remote server reports it), else the plan's."""
        slot = self._slot
        return slot.engine.max_model_len if slot is not None else int(self.plan.engine_args.get("max_model_len", 4096))

    async def wait_ready(self, timeout: float) -> bool:
        assert self._ready_event is not None
        try:
            await asyncio.wait_for(self._ready_event.wait(), timeout)
        except asyncio.TimeoutError:
            return False
        return True

    # ----- lifecycle ---------------------------------------------------------------------------------
    def start_in_background(self) -> None:
        """Return at once; the model downloads, loads and warms up in the background."""
        self._ready_event = asyncio.Event()
        self._tasks.append(asyncio.create_task(self._first_start(), name="engine-start"))

    async def _stop_engine(self) -> None:
        slot, self._slot = self._slot, None
        if slot is not None:
            await slot.stop()

    async def shutdown(self) -> None:
        """Stop everything; called from the server's lifespan before the process exits."""
        self._closing = True
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._stop_engine()
        self._set(EngineState.STOPPED)

    # ----- requests ----------------------------------------------------------------------------------
    async def stream(self, prompt_token_ids: list[int], sampling: Sampling,
                     on_queued: Optional[PositionCallback] = None,
                     request_id: Optional[str] = None, owner: Optional[str] = None,
                     on_admitted: Optional[Callable[[], None]] = None) -> AsyncIterator[Delta]:
        """Stream an answer. Waits in the fair queue first (users take turns: ``owner``); cancelling (stop) aborts
        the engine request. ``on_admitted`` is called when the prompt goes to the engine (the queue is behind it)."""
        request_id = request_id or f"chat-{uuid.uuid4().hex}"
        self.metrics.queued.inc()
        waiting = True
        try:
            async with self.gate.slot(on_queued, owner=owner):
                self.metrics.queued.dec()
                waiting = False
                if not self.ready:
                    raise EngineUnavailable(f"engine {self.status.state.value}")
                self.metrics.active.inc()
                if on_admitted is not None:
                    on_admitted()
                raw = self._raw_stream(prompt_token_ids, sampling, request_id)
                try:
                    # aclosing: on stop, close the inner generators now (their cleanup aborts the engine
                    # request), not whenever they are garbage-collected.
                    async with contextlib.aclosing(raw), contextlib.aclosing(self._timed(raw)) as timed:
                        async for delta in timed:
                            yield delta
                finally:
                    self.metrics.active.dec()
        finally:
            if waiting:  # cancelled (or failed) while still in the queue
                self.metrics.queued.dec()

    async def _timed(self, deltas: AsyncIterator[Delta]) -> AsyncGenerator[Delta, None]:
        """Record time to first token, decode speed and token count of one answer."""
        started, first, tokens = time.perf_counter(), None, 0
        async for delta in deltas:
            if first is None and delta.new_tokens:
                first = time.perf_counter()
                self.metrics.ttft.observe(first - started)
            tokens += delta.new_tokens
            yield delta
        if first is not None and tokens > 1 and time.perf_counter() > first:
            self.metrics.tokens_per_second.observe((tokens - 1) / (time.perf_counter() - first))
        self.metrics.generated_tokens.inc(tokens)

    async def _raw_stream(self, token_ids: list[int], sampling: Sampling, request_id: str,
                          slot: Optional[EngineSlot] = None) -> AsyncGenerator[Delta, None]:
        """Run the engine's generate on the engine loop and hand its Deltas over to this loop. The answer
        stays on the engine it began on, even when a full-speed engine takes over meanwhile."""
        slot = slot or self._slot
        if slot is None:
            raise EngineUnavailable(f"engine {self.status.state.value}")
        slot.in_flight += 1
        try:
            on_died = lambda err: self._engine_died(slot, err)
            # aclosing: a stop closes this generator; the inner one must abort now, not when collected.
            async with contextlib.aclosing(slot.stream(token_ids, sampling, request_id, on_died)) as deltas:
                async for delta in deltas:
                    yield delta
        finally:
            slot.in_flight -= 1

    def _engine_died(self, slot: EngineSlot, err: EngineDied) -> None:
        """An answer saw its engine die: restart now, unless it was a retiring engine (the new one lives)."""
        if slot is self._slot:  # not a retiring engine
            asyncio.ensure_future(self.report_dead(str(err)))

    async def running_requests(self) -> int:
        """Requests the engine is working on now (0 after a stop: the proof that abort reached it)."""
        slots = [s for s in (self._slot, *self._retiring) if s is not None]

        async def count(engine: Engine) -> int:
            return engine.unfinished_requests()

        return sum([await slot.thread.call(count(slot.engine)) for slot in slots])
