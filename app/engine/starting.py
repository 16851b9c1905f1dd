"""Starting an engine: the first start (the model found, then the engine built, warmed up and ready), one retry with
a smaller plan after an out-of-memory start, and the build itself, on a loop thread of its own.

A part of EngineHost (app/engine/host.py holds the state these jobs read and write). Which plan an out-of-memory
start retries with is the host's option (``plan_after_out_of_memory``, given by app/runtime.py from the planner);
what counts as out of memory is the vLLM adapter's wording (app/engine/vllm_engine.py). Every "N s" the user sees
counts from the launch of the process, the moment they pressed Enter.
"""
from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, Optional

from app.engine.protocol import Engine
from app.engine.slots import EngineSlot, LoopThread
from app.engine.status import EngineState, EngineStatus, Speed, StartStep
from app.engine.vllm_engine import is_out_of_memory
from app.errors import EngineStartError, ErnieChatError, one_line
from app.i18n import Phrase
from app.planning.engine_plan import EnginePlan
from app.planning.hardware import gib
from app.telemetry import FILE_ONLY

if TYPE_CHECKING:
    from app.engine.host import EngineHostOptions

log = logging.getLogger("ernie_chat.engine")
READY_MARKER = "Engine started."  # the tutorial's readiness line; scripts grep the log for it


def kv_text(plan: EnginePlan) -> str:
    """The plan's KV cache (or the remote server), as the start's lines name what was tried."""
    if plan.device == "remote":
        return f"the vLLM server at {plan.engine_args.get('remote_url')}"
    kv = plan.engine_args.get("kv_cache_memory_bytes")
    return f"KV cache {gib(kv)}" if kv else "KV cache sized by vLLM"


class EngineStarting:
    """EngineHost's start: first start, out-of-memory retry, one start, one build."""

    # The host's state (EngineHost.__init__ sets it up) and what its other jobs do, as used here.
    options: EngineHostOptions
    plan: EnginePlan
    status: EngineStatus
    launched_at: float
    _slot: Optional[EngineSlot]
    _tasks: list[asyncio.Task]
    _speed_up_task: Optional[asyncio.Task]
    _model_path: Optional[str]
    _ready_event: Optional[asyncio.Event]
    _set: Callable[..., None]  # the host's state change (app/engine/host.py)
    _notify: Callable[[], None]
    _warm_up: Callable[[EngineSlot], Coroutine[Any, Any, None]]  # app/engine/warm_up.py
    _speed_up: Callable[[], Coroutine[Any, Any, None]]  # app/engine/full_speed.py
    _watchdog: Callable[[], Coroutine[Any, Any, None]]  # app/engine/watchdog.py

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
        """Start; after an out-of-memory start, try once more with the plan the host's retry rule gives (half the
        KV cache), then give up. Returns the plan that started."""
        tried, detail = [], Phrase("detail_loading_engine")
        while True:
            tried.append(f"{kv_text(plan)}, max_model_len {plan.engine_args.get('max_model_len', 'auto')}")
            mark = self.options.log_tail.mark() if self.options.log_tail else 0
            try:
                await self._start_once(plan, detail)
                return plan
            except Exception as err:
                log.exception("engine start failed", extra=FILE_ONLY)  # the final line says what matters
                if isinstance(err, ErnieChatError):  # already one line a person can act on (remote server)
                    raise
                cause = await self._root_cause(mark)
                out_of_memory = is_out_of_memory(err, cause)
                smaller = self.options.plan_after_out_of_memory(plan) if out_of_memory and len(tried) == 1 else None
                if smaller is None:
                    raise EngineStartError(
                        f"engine start failed ({cause or one_line(err)}); tried: {'; then '.join(tried)}. "
                        + ("Free GPU memory (nvidia-smi), lower --max-model-len / --max-concurrent-chats, "
                           "or use --profile cpu" if out_of_memory else
                           "See the log file for the full error")) from err
                log.warning("out of memory at start; retrying with a smaller KV cache")
                plan = smaller
                # Say so where the user looks (/readyz, the status panel, the bar), not only in the log.
                detail = Phrase("detail_out_of_memory_retry", kv=kv_text(plan))

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
            await slot.stop()
            raise
        return slot
