"""Where an engine lives: a loop thread of its own, and the slot that ties an engine to it.

Why a loop of its own: AsyncLLM binds its output handler to the event loop that creates it, and creating it
blocks for the whole model load (20-45 s on a CPU). So each engine lives on a private loop in a thread, the web
server's loop never blocks, and every call crosses over with ``run_coroutine_threadsafe`` (in) and
``call_soon_threadsafe`` (out). Calling ``generate`` directly across loops hangs.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
from collections.abc import AsyncGenerator, Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from app.engine.protocol import Delta, Engine, Sampling
from app.errors import EngineDied
from app.planning.engine_plan import EnginePlan

log = logging.getLogger("ernie_chat.engine")


class LoopThread:
    """An event loop running in a daemon thread; ``call(coro)`` runs a coroutine there from any loop."""

    def __init__(self, name: str) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def submit(self, coro: Coroutine[Any, Any, Any]) -> concurrent.futures.Future:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    async def call(self, coro: Coroutine[Any, Any, Any]) -> Any:
        return await asyncio.wrap_future(self.submit(coro))

    def stop(self) -> None:
        self.stop_when_idle()
        self._thread.join(timeout=5)

    def stop_when_idle(self) -> None:
        """Stop the loop once what runs on it now returns (without waiting for that here)."""
        self.loop.call_soon_threadsafe(self.loop.stop)


async def _pump(engine: Engine, token_ids: list[int], sampling: Sampling, request_id: str,
                here: asyncio.AbstractEventLoop, queue: asyncio.Queue) -> None:
    """Runs on the engine loop: the engine's Deltas onto ``queue`` on the loop ``here``, then None (the end) or the
    error."""
    try:
        async for delta in engine.generate(token_ids, sampling, request_id):
            here.call_soon_threadsafe(queue.put_nowait, delta)
        here.call_soon_threadsafe(queue.put_nowait, None)
    except asyncio.CancelledError:
        here.call_soon_threadsafe(queue.put_nowait, None)
        raise
    except BaseException as err:
        here.call_soon_threadsafe(queue.put_nowait, err)


@dataclass
class EngineSlot:
    """An engine, the loop thread it lives on, and the answers it is streaming now (known here, before the
    engine itself has seen a request, so a retiring engine is never shut down under a starting answer)."""

    engine: Engine
    thread: LoopThread
    plan: EnginePlan
    in_flight: int = 0

    async def call(self, coro: Coroutine[Any, Any, Any], timeout: float) -> Any:
        return await asyncio.wait_for(self.thread.call(coro), timeout)

    async def stream(self, token_ids: list[int], sampling: Sampling, request_id: str,
                     on_died: Callable[[EngineDied], None]) -> AsyncGenerator[Delta, None]:
        """Run the engine's generate on its loop and hand its Deltas over to the caller's loop. Closed early (stop),
        it aborts the request in the engine. ``on_died`` hears of an engine that died under the answer before the
        error is raised here."""
        engine, thread = self.engine, self.thread
        here = asyncio.get_running_loop()
        queue: asyncio.Queue = asyncio.Queue()
        future = thread.submit(_pump(engine, token_ids, sampling, request_id, here, queue))
        try:
            while True:
                item = await queue.get()
                if item is None:
                    return
                if isinstance(item, BaseException):
                    if isinstance(item, EngineDied):
                        on_died(item)
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

    async def stop(self) -> None:
        """Shut the engine down on its own loop, then end that loop's thread."""
        async def stop():
            self.engine.shutdown()

        try:
            await self.call(stop(), 15)
        except Exception:
            log.exception("engine shutdown did not finish cleanly")
        self.thread.stop()
