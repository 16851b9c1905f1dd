"""EngineHost: the engine (one at a time; two while a starting engine hands over), started in the background,
watched, restarted. It speaks only the engine protocol (app/engine/protocol.py): no vLLM type here.

Why a loop of its own: AsyncLLM binds its output handler to the event loop that creates it, and creating
it blocks for the whole model load (20-45 s on a CPU). So the engine lives on a private loop in a thread,
the web server's loop never blocks, and every call crosses over with ``run_coroutine_threadsafe`` (in)
and ``call_soon_threadsafe`` (out). Calling ``generate`` directly across loops hangs.

States: loading -> warming -> ready; ready -> restarting -> ready when the engine dies; failed when a
start fails for good. With a starting engine (--quick-start, app/planning/profiles.py) "ready" comes from an eager
engine while the full-speed one is built on a second loop; new requests then go to the full one, answers in
flight finish where they began, and the starting engine is shut down when its last answer ends.
vLLM is imported on the engine thread, so the UI answers HTTP before it loads.
Every "N s" the user sees counts from the launch of the process, the moment they pressed Enter.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import threading
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Any, Optional

from app.engine.prefill_rate import MIN_MEASURED_TOKENS, PrefillRate
from app.engine.protocol import Delta, Engine, EngineFactory, Sampling
from app.engine.queueing import FairGate, PositionCallback
from app.engine.status import START_STEPS, EngineState, EngineStatus, Speed, StartStep
from app.errors import EngineDied, EngineStartError, EngineUnavailable, ErnieChatError, one_line
from app.i18n import Phrase, starting_engine_cost
from app.planning.engine_plan import EnginePlan
from app.planning.hardware import gib
from app.planning.profiles import with_smaller_kv
from app.telemetry import FILE_ONLY, AppMetrics, LogTail

log = logging.getLogger("ernie_chat.engine")
READY_MARKER = "Engine started."  # the tutorial's readiness line; scripts grep the log for it


class LoopThread:
    """An event loop running in a daemon thread; ``call(coro)`` runs a coroutine there from any loop."""

    def __init__(self, name: str) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def submit(self, coro: Awaitable[Any]) -> concurrent.futures.Future:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    async def call(self, coro: Awaitable[Any]) -> Any:
        return await asyncio.wrap_future(self.submit(coro))

    def stop(self) -> None:
        self.stop_when_idle()
        self._thread.join(timeout=5)

    def stop_when_idle(self) -> None:
        """Stop the loop once what runs on it now returns (without waiting for that here)."""
        self.loop.call_soon_threadsafe(self.loop.stop)


@dataclass
class EngineSlot:
    """An engine, the loop thread it lives on, and the answers it is streaming now (known here, before the
    engine itself has seen a request, so a retiring engine is never shut down under a starting answer)."""

    engine: Engine
    thread: LoopThread
    plan: EnginePlan
    in_flight: int = 0

    async def call(self, coro: Awaitable[Any], timeout: float) -> Any:
        return await asyncio.wait_for(self.thread.call(coro), timeout)


def _is_out_of_memory(err: BaseException, root_cause: Optional[str] = None) -> bool:
    text = f"{type(err).__name__}: {err} {root_cause or ''}".lower()
    cause = err.__cause__
    if cause is not None:
        text += f" {cause}".lower()
    return any(s in text for s in ("out of memory", "less than desired gpu memory", "no available memory for "
                                   "the cache blocks", "insufficient memory", "larger than the available kv"))


# Batch sizes the warm-up runs besides one request: one of each class vLLM's Triton sampler compiles for.
WARMUP_BATCHES = (8, 16)


def _kv_text(plan: EnginePlan) -> str:
    if plan.device == "remote":
        return f"the vLLM server at {plan.engine_args.get('remote_url')}"
    kv = plan.engine_args.get("kv_cache_memory_bytes")
    return f"KV cache {gib(kv)}" if kv else "KV cache sized by vLLM"


@dataclass(frozen=True)
class EngineHostOptions:
    """What an EngineHost is built from: where the model comes from, the plan, the engine factory, and how
    the host queues, watches and restarts the engine."""

    model_path_provider: Callable[[Callable[[str], None]], str]  # finds (or downloads) the model, telling progress
    plan: EnginePlan
    metrics: AppMetrics
    max_concurrent: int  # answers generated at once; the rest wait in the fair queue
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


class EngineHost:
    """Owns one engine at a time: start, warm up, health, restart with backoff, shutdown."""

    def __init__(self, options: EngineHostOptions) -> None:
        self.options = options
        self.plan = options.plan  # the plan that runs: after an out-of-memory retry, the smaller one
        self.metrics = options.metrics
        self.gate = FairGate(options.max_concurrent)
        self.prefill_rate = PrefillRate()  # how fast the engine reads prompts, measured after its warm-up's first round
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

    async def _first_start(self) -> None:
        try:
            self._set(EngineState.LOADING, Phrase("detail_finding_model"), StartStep.MODEL)

            def progress(detail: str, step: StartStep = StartStep.MODEL) -> None:
                self._set(EngineState.LOADING, detail, step)

            self._model_path = await asyncio.to_thread(self.options.model_path_provider, progress)
            if self.plan.starter is None:
                self.plan = await self._start_with_retry(self.plan)
            else:  # its plan is not kept: a restart starts the full-speed engine directly
                # Both start now: the full-speed engine's compile and graph capture run while the starting
                # engine loads and answers, so full speed comes no later than with the full engine alone.
                self._speed_up_task = asyncio.create_task(self._speed_up(), name="engine-full-speed")
                self._tasks.append(self._speed_up_task)
                await self._start_with_retry(self.plan.starter)
                if self.status.speed is None:  # the full-speed engine has not taken over yet
                    self.status.speed = Speed.STARTING
                    self._notify()
        except asyncio.CancelledError:
            raise
        except Exception as err:
            line = str(err) if isinstance(err, ErnieChatError) else one_line(err)
            self.status.last_error = line
            self._set(EngineState.FAILED, line)
            log.error("engine failed to start: %s", line, extra=FILE_ONLY)  # the launcher prints it once
            if self.options.on_fatal:
                self.options.on_fatal(line)
            return
        self.status.ready_seconds = round(time.time() - self.launched_at, 2)
        self._tasks.append(asyncio.create_task(self._watchdog(), name="engine-watchdog"))

    async def _start_with_retry(self, plan: EnginePlan) -> EnginePlan:
        """Start; after an out-of-memory start, try once more with half the KV cache, then give up.
        Returns the plan that started."""
        tried, detail = [], Phrase("detail_loading_engine")
        while True:
            tried.append(f"{_kv_text(plan)}, max_model_len {plan.engine_args.get('max_model_len', 'auto')}")
            mark = self.options.log_tail.mark() if self.options.log_tail else 0
            try:
                await self._start_once(plan, detail)
                return plan
            except Exception as err:
                log.exception("engine start failed", extra=FILE_ONLY)  # the final line says what matters
                if isinstance(err, ErnieChatError):  # already one line a person can act on (remote server)
                    raise
                cause = await self._root_cause(mark)
                out_of_memory = _is_out_of_memory(err, cause)
                smaller = with_smaller_kv(plan) if out_of_memory and len(tried) == 1 else None
                if smaller is None:
                    raise EngineStartError(
                        f"engine start failed ({cause or one_line(err)}); tried: {'; then '.join(tried)}. "
                        + ("Free GPU memory (nvidia-smi), lower --max-model-len / --max-concurrent-chats, "
                           "or use --profile cpu" if out_of_memory else
                           "See the log file for the full error")) from err
                log.warning("out of memory at start; retrying with a smaller KV cache")
                plan = smaller
                # Say so where the user looks (/readyz, the status panel, the bar), not only in the log.
                detail = Phrase("detail_out_of_memory_retry", kv=_kv_text(plan))

    async def _root_cause(self, mark: int) -> Optional[str]:
        """The engine process's own error line from the log (the exception here only says "see above")."""
        tail = self.options.log_tail
        if tail is None:
            return None
        for _ in range(10):  # the engine process may still be writing its traceback
            cause = tail.root_cause_since(mark)
            if cause:
                return cause
            await asyncio.sleep(0.2)
        return None

    async def _start_once(self, plan: EnginePlan, detail: Optional[str] = None) -> None:
        state = EngineState.RESTARTING if self.status.state is EngineState.RESTARTING else EngineState.LOADING
        self._set(state, detail or Phrase("detail_loading_engine"), StartStep.ENGINE)
        started = time.time()

        def warming() -> None:
            self._set(EngineState.WARMING, Phrase("detail_engine_up", seconds=time.time() - started),
                      StartStep.WARMUP)

        self._slot = await self._build(plan, "vllm-engine-loop", warming)
        await asyncio.to_thread(self.options.before_ready)
        # Counted as the user counted: from the launch (or from the restart's beginning).
        self.status.ready_took = time.time() - self.status.start_began_at
        self._set(EngineState.READY, Phrase("ready_took", seconds=self.status.ready_took))
        log.info(READY_MARKER)
        assert self._ready_event is not None
        self._ready_event.set()

    async def _build(self, plan: EnginePlan, thread_name: str,
                     on_built: Callable[[], None] = lambda: None) -> EngineSlot:
        """Build and warm up an engine on a loop thread of its own (the build blocks that loop for the whole
        load). Whatever fails or is cancelled on the way leaves no engine running."""
        assert self._model_path is not None
        model_path, thread, abandoned = self._model_path, LoopThread(thread_name), threading.Event()

        async def build() -> Optional[Engine]:
            engine = self.options.engine_factory(model_path, plan)
            if abandoned.is_set():  # nobody waits for it any more (timeout, shutdown): leave nothing running
                engine.shutdown()
                return None
            return engine

        try:
            engine = await asyncio.wait_for(thread.call(build()), self.options.start_timeout)
        except BaseException:
            abandoned.set()
            thread.stop_when_idle()
            raise
        slot = EngineSlot(engine, thread, plan)
        on_built()
        try:
            await self._warm_up(slot)
        except BaseException:
            await self._stop_slot(slot)
            raise
        return slot

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
            await self._stop_slot(slot)
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
            await self._stop_slot(slot)
        log.info("the starting engine is shut down")

    async def _warm_up(self, slot: EngineSlot) -> None:
        """Pay one-time costs before "ready" instead of in a user's first answer.

        The first request after start costs seconds (allocations, lazy init). On CUDA, vLLM also
        JIT-compiles a Triton top-p kernel the first time it samples a batch of 8 or more requests,
        once per batch-size class (Triton specialises on "divisible by 16"); on an H200 that added
        1.5 s to the first token of 12 concurrent chats. So: one request, then a batch of 8, then 16
        when the plan allows that many, all sampled the way chats are (temperature, top_p < 1, and no
        seed: a seeded warm-up left the unseeded path cold, and the first chat on the CPU waited 1.85 s
        for its first token where later ones took 0.014 s). A seeded request rides along in the first
        round for /v1 clients that send a seed. The CPU build has no Triton (vLLM samples with plain torch
        there): that first round is all it needs.
        """
        sampled = Sampling(temperature=0.8, top_p=0.8, max_tokens=2)
        plan = slot.plan
        most = int(plan.engine_args.get("max_num_seqs") or 1) if plan.device != "cpu" else 1
        for batch in [1] + [n for n in WARMUP_BATCHES if n <= most]:
            rounds = [sampled] * batch + ([replace(sampled, seed=0)] if batch == 1 else [])
            await asyncio.gather(*(self._drain(self._raw_stream([1, 2, 3, 4], params,
                                                                f"warmup-{uuid.uuid4().hex[:8]}", slot))
                                   for params in rounds))
            if batch == 1:
                await self._calibrate_prefill(slot, replace(sampled, max_tokens=1))

    async def _calibrate_prefill(self, slot: EngineSlot, sampled: Sampling) -> None:
        """Read a prompt long enough for vLLM to measure how fast this engine reads (app/engine/prefill_rate.py), so the
        first long document gets a time estimate (issue 35 item 2). Twice: the first read of a prompt this long
        pays one-time costs too (on the CPU it measured 55 tokens/s where documents were then read at 155), and
        only the second is measured. Other tokens the second time, so the prefix cache does not serve it."""
        length = min(MIN_MEASURED_TOKENS, slot.engine.max_model_len // 2)
        for round_ in range(2):
            if round_ == 1:
                self.prefill_rate.start_measuring()
            prompt = [5 + round_ + i % 89 for i in range(length)]
            await self._drain(self._raw_stream(prompt, sampled, f"warmup-{uuid.uuid4().hex[:8]}", slot))

    @staticmethod
    async def _drain(stream: AsyncIterator[Delta]) -> None:
        async for _ in stream:
            pass

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

    async def _stop_engine(self) -> None:
        slot, self._slot = self._slot, None
        if slot is not None:
            await self._stop_slot(slot)

    @staticmethod
    async def _stop_slot(slot: EngineSlot) -> None:
        async def stop():
            slot.engine.shutdown()

        try:
            await slot.call(stop(), 15)
        except Exception:
            log.exception("engine shutdown did not finish cleanly")
        slot.thread.stop()

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

    async def _timed(self, deltas: AsyncIterator[Delta]) -> AsyncIterator[Delta]:
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
                          slot: Optional[EngineSlot] = None) -> AsyncIterator[Delta]:
        """Run the engine's generate on the engine loop and hand its Deltas over to this loop. The answer
        stays on the engine it began on, even when a full-speed engine takes over meanwhile."""
        slot = slot or self._slot
        if slot is None:
            raise EngineUnavailable(f"engine {self.status.state.value}")
        slot.in_flight += 1
        try:
            # aclosing: a stop closes this generator; the inner one must abort now, not when collected.
            async with contextlib.aclosing(self._stream_on(slot, token_ids, sampling, request_id)) as deltas:
                async for delta in deltas:
                    yield delta
        finally:
            slot.in_flight -= 1

    async def _stream_on(self, slot: EngineSlot, token_ids: list[int], sampling: Sampling,
                         request_id: str) -> AsyncIterator[Delta]:
        engine, thread = slot.engine, slot.thread
        here = asyncio.get_running_loop()
        queue: asyncio.Queue = asyncio.Queue()

        async def pump() -> None:  # runs on the engine loop
            try:
                async for delta in engine.generate(token_ids, sampling, request_id):
                    here.call_soon_threadsafe(queue.put_nowait, delta)
                here.call_soon_threadsafe(queue.put_nowait, None)
            except asyncio.CancelledError:
                here.call_soon_threadsafe(queue.put_nowait, None)
                raise
            except BaseException as err:
                here.call_soon_threadsafe(queue.put_nowait, err)

        future = thread.submit(pump())
        try:
            while True:
                item = await queue.get()
                if item is None:
                    return
                if isinstance(item, BaseException):
                    if isinstance(item, EngineDied) and slot is self._slot:  # not a retiring engine
                        asyncio.ensure_future(self.report_dead(str(item)))
                    raise item
                yield item
        finally:
            if not future.done():
                # Stop pressed (or the page went away): abort in the engine, not only in the UI.
                future.cancel()
                try:
                    await asyncio.wait_for(thread.call(engine.abort(request_id)), 5)
                except Exception:
                    log.debug("abort of %s after cancel", request_id, exc_info=True)

    async def running_requests(self) -> int:
        """Requests the engine is working on now (0 after a stop: the proof that abort reached it)."""
        slots = [s for s in (self._slot, *self._retiring) if s is not None]

        async def count(engine: Engine) -> int:
            return engine.unfinished_requests()

        return sum([await slot.thread.call(count(slot.engine)) for slot in slots])
