"""One writer per app: every database write goes through one queue, in order, off the answer's path.

SQLite allows one writer at a time; 12 chats writing through their own connections meet "database is
locked" once a write waits past the busy timeout. One queue, one write at a time, never meets it and keeps
the order Chainlit sent (a message is created before it is updated). A write that fails (read-only file,
full disk, server gone) is counted and logged, and flags the history as not saved; the answer that caused
it carries on. The flag clears at the next write that succeeds.
"""
from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Optional

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

log = logging.getLogger("ernie_chat.history")
Write = Callable[[AsyncConnection], Awaitable[Any]]


class HistoryWriter:
    def __init__(self, engine: AsyncEngine, on_error: Optional[Callable[[], None]] = None) -> None:
        self.engine = engine
        self.on_error = on_error  # e.g. AppMetrics.history_write_errors.inc
        self.write_failing = False  # True while the last write failed: history is not being saved
        self.last_error: Optional[str] = None
        self._queue: Optional[asyncio.Queue] = None
        self._worker: Optional[asyncio.Task] = None

    def _ensure_worker(self) -> asyncio.Queue:
        if self._queue is None or self._worker is None or self._worker.done():
            self._queue = self._queue or asyncio.Queue()
            self._worker = asyncio.create_task(self._run(), name="history-writer")
        return self._queue

    def submit(self, write: Write, what: str) -> asyncio.Future:
        """Queue a write; the future gets its result, or its exception (already counted and logged)."""
        future = asyncio.get_running_loop().create_future()
        self._ensure_worker().put_nowait((write, what, future))
        return future

    async def write(self, write: Write, what: str, raise_errors: bool = False, timeout: Optional[float] = None) -> Any:
        """Queue a write and wait for it (up to ``timeout``; the write still happens after a timeout)."""
        future = self.submit(write, what)
        try:
            return await asyncio.wait_for(asyncio.shield(future), timeout)
        except asyncio.TimeoutError:
            return None
        except Exception:
            if raise_errors:
                raise
            return None

    async def _run(self) -> None:
        queue = self._queue
        assert queue is not None
        while True:
            write, what, future = await queue.get()
            try:
                async with self.engine.begin() as conn:
                    result = await write(conn)
            except Exception as err:  # noqa: BLE001 - any database failure is reported the same way
                self._failed(what, err)
                if not future.done():
                    future.set_exception(err)
                    future.exception()  # retrieved: nobody has to await a fire-and-forget write
            else:
                if self.write_failing:
                    log.warning("chat history is being saved again")
                self.write_failing = False
                if not future.done():
                    future.set_result(result)
            finally:
                queue.task_done()

    def _failed(self, what: str, err: Exception) -> None:
        line = str(err).splitlines()[0] if str(err) else type(err).__name__
        if not self.write_failing:
            log.error("chat history is not being saved (%s failed: %s)", what, line)
        self.write_failing = True
        self.last_error = line
        if self.on_error is not None:
            self.on_error()

    async def drain(self, timeout: float = 10.0) -> None:
        """Wait until every queued write is done (at shutdown, and in tests)."""
        if self._queue is not None and self._worker is not None and not self._worker.done():
            await asyncio.wait_for(self._queue.join(), timeout)

    async def close(self) -> None:
        try:
            await self.drain()
        except asyncio.TimeoutError:
            log.warning("chat history: %d writes not done at shutdown", self._queue.qsize() if self._queue else 0)
        if self._worker is not None:
            self._worker.cancel()
