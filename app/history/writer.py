"""One writer per app: every database write goes through one queue, in order, off the answer's path.

SQLite allows one writer at a time; 12 chats writing through their own connections meet "database is
locked" once a write waits past the busy timeout. One queue, one write at a time, never meets it and keeps
the order Chainlit sent (a message is created before it is updated).

Callers do not wait for their write (at most a bounded moment where the page needs it), so a busy database
never holds an answer back: with another program holding the file locked for 45 s, every chat's first answer
waited 44.5 s and 3 of 6 titles were lost. A write the database refuses for now (locked, read-only, disk
full, server gone) is counted and logged once, flags the history as not saved, and is tried again with
backoff until it lands; the writes behind it wait their turn, so the order stays. A write that is wrong in
itself (a missing message, a broken constraint) is dropped and counted.

Each person gets a bounded share of the queue: while the database refuses writes, one user's writes beyond
MAX_WAITING_PER_USER are refused (and that user is told) instead of filling the queue, so nobody else ever loses
a write to them. One socket message carrying 20,000 "documents" once filled all 10,000 places, and another user
then stored 6 of his 21 questions (issue 36 N1).
"""
from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any, Optional

from sqlalchemy.exc import DataError, DBAPIError, IntegrityError, ProgrammingError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from app.errors import HistoryDatabaseError

log = logging.getLogger("ernie_chat.history")
Write = Callable[[AsyncConnection], Awaitable[Any]]
RETRY_FIRST_S, RETRY_MOST_S = 0.25, 5.0  # backoff between tries of a write the database refuses for now
MAX_WAITING = 10_000  # writes kept while the database refuses them; past that, new ones are counted as lost
MAX_WAITING_PER_USER = 1_000  # one person's share of them: a long chat's messages with room to spare
SLOW_SAVE_S = 3.0  # a write waiting longer is told on the page ("not saved yet")


def _retry_may_help(err: Exception) -> bool:
    """The database refused for now (locked, read-only, full, gone), not the write itself."""
    if isinstance(err, (IntegrityError, ProgrammingError, DataError)):
        return False
    return isinstance(err, (DBAPIError, OSError))


class HistoryWriter:
    def __init__(self, engine: AsyncEngine, on_error: Optional[Callable[[], None]] = None,
                 whose: Callable[[], Optional[str]] = lambda: None) -> None:
        self.engine = engine
        self.on_error = on_error  # e.g. AppMetrics.history_write_errors.inc
        self._whose = whose  # the user a write is made for (the request's or socket's login); None: the app's own
        self._waiting_by_user: Counter[str] = Counter()
        self.over_share: set[str] = set()  # users refused a write for being over their share, until it frees up
        self.write_failing = False  # True while the last write failed: history is not being saved
        self.last_error: Optional[str] = None
        self._queue: Optional[asyncio.Queue] = None
        self._worker: Optional[asyncio.Task] = None
        self._head_since: Optional[float] = None  # when the write being tried now was queued
        self._queued = self._finished = 0  # writes queued, and of those done (landed or dropped), for settle()
        self._progress = asyncio.Condition()

    def _ensure_worker(self) -> asyncio.Queue:
        if self._queue is None or self._worker is None or self._worker.done():
            self._queue = self._queue or asyncio.Queue()
            self._worker = asyncio.create_task(self._run(), name="history-writer")
        return self._queue

    def submit(self, write: Write, what: str) -> asyncio.Future:
        """Queue a write; the future gets its result, or its exception (already counted and logged)."""
        future = asyncio.get_running_loop().create_future()
        queue = self._ensure_worker()
        user = self._whose()
        if user is not None and self._waiting_by_user[user] >= MAX_WAITING_PER_USER:
            if user not in self.over_share:
                log.error("chat history: %s has %d changes waiting for the database; more of theirs are not saved",
                          user, MAX_WAITING_PER_USER)
            self.over_share.add(user)
            return self._refused(future, what, f"{MAX_WAITING_PER_USER} of your changes already wait")
        if queue.qsize() >= MAX_WAITING:  # memory stays bounded however long the database refuses
            self._failed(what, HistoryDatabaseError(f"{MAX_WAITING} writes already wait for the database"))
            return self._refused(future, what, "too many writes waiting")
        queue.put_nowait((write, what, future, time.monotonic(), user))
        if user is not None:
            self._waiting_by_user[user] += 1
        self._queued += 1
        return future

    @staticmethod
    def _refused(future: asyncio.Future, what: str, why: str) -> asyncio.Future:
        future.set_exception(HistoryDatabaseError(f"{what}: not saved, {why} for the database"))
        future.exception()  # retrieved: nobody has to await a fire-and-forget write
        return future

    async def write(self, write: Write, what: str, wait: float = 0.0, raise_errors: bool = False) -> Any:
        """Queue a write and wait for it up to ``wait`` seconds (0: not at all); it lands later all the same.
        With ``raise_errors`` (a user's own action, such as a delete) a failure or a timeout raises."""
        future = self.submit(write, what)
        if not wait:
            return None
        try:
            return await asyncio.wait_for(asyncio.shield(future), wait)
        except asyncio.TimeoutError:
            if raise_errors:
                raise HistoryDatabaseError(f"{what}: the chat database is busy; it is done once it answers") from None
            return None
        except Exception:
            if raise_errors:
                raise
            return None

    @property
    def unsaved_seconds(self) -> float:
        """How long the oldest write not yet in the database has waited; 0 when none waits."""
        return 0.0 if self._head_since is None else time.monotonic() - self._head_since

    async def _run(self) -> None:
        queue = self._queue
        assert queue is not None
        while True:
            write, what, future, queued_at, user = await queue.get()
            self._head_since = queued_at
            try:
                await self._until_it_lands(write, what, future)
            finally:
                self._head_since = None
                if user is not None:
                    self._waiting_by_user[user] -= 1
                    if self._waiting_by_user[user] <= 0:
                        del self._waiting_by_user[user]
                        self.over_share.discard(user)  # all theirs landed: their next changes are saved again
                queue.task_done()
                self._finished += 1
                async with self._progress:
                    self._progress.notify_all()

    async def _until_it_lands(self, write: Write, what: str, future: asyncio.Future) -> None:
        delay, tries = RETRY_FIRST_S, 0
        while not future.cancelled():  # its caller gave up on it (an import's chat refused): never tried again
            tries += 1
            try:
                async with self.engine.begin() as conn:
                    result = await write(conn)
            except Exception as err:  # noqa: BLE001 - any database failure is reported the same way
                if tries == 1:
                    self._failed(what, err)
                if _retry_may_help(err):
                    await asyncio.sleep(delay)
                    delay = min(RETRY_MOST_S, delay * 2)
                    continue
                if not future.done():
                    future.set_exception(err)
                    future.exception()  # retrieved: nobody has to await a fire-and-forget write
                return
            if self.write_failing:
                log.warning("chat history is being saved again%s", f" ({what} after {tries} tries)" if tries > 1
                            else "")
            self.write_failing = False
            if not future.done():
                future.set_result(result)
            return

    def _failed(self, what: str, err: Exception) -> None:
        line = str(err).splitlines()[0] if str(err) else type(err).__name__
        if not self.write_failing:
            log.error("chat history is not being saved (%s failed: %s)", what, line)
        self.write_failing = True
        self.last_error = line
        if self.on_error is not None:
            self.on_error()

    async def settle(self, timeout: float) -> None:
        """Wait, at most ``timeout``, until the writes queued so far (not later ones) are done."""
        target = self._queued
        if self._finished >= target:
            return
        async with self._progress:
            try:
                await asyncio.wait_for(self._progress.wait_for(lambda: self._finished >= target), timeout)
            except asyncio.TimeoutError:
                pass

    async def drain(self, timeout: float = 10.0) -> None:
        """Wait until every queued write is done (at shutdown, and in tests)."""
        if self._queue is not None and self._worker is not None and not self._worker.done():
            await asyncio.wait_for(self._queue.join(), timeout)

    async def close(self) -> None:
        # A database that refuses writes gets one second, so Ctrl-C still ends the app within its 5 s.
        try:
            await self.drain(1.0 if self.write_failing else 10.0)
        except asyncio.TimeoutError:
            left = (self._queue.qsize() if self._queue else 0) + (self._head_since is not None)
            log.warning("chat history: %d writes not saved at shutdown (the database refused them)", left)
        if self._worker is not None:
            self._worker.cancel()
