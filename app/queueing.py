"""A first-come-first-served gate: at most N generations at once, the rest wait in order.

Waiters are told their position whenever it changes, so the UI can say "queued, 2 ahead of you".
Cancelled waiters leave the queue without disturbing the others.
"""
from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Optional

PositionCallback = Callable[[int], Awaitable[None]]


class FairGate:
    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError("limit must be >= 1")
        self.limit = limit
        self.active = 0
        self._waiters: deque[asyncio.Future] = deque()
        self._callbacks: dict[asyncio.Future, Optional[PositionCallback]] = {}

    @property
    def queued(self) -> int:
        return len(self._waiters)

    @contextlib.asynccontextmanager
    async def slot(self, on_position: Optional[PositionCallback] = None) -> AsyncIterator[None]:
        await self._acquire(on_position)
        try:
            yield
        finally:
            self._release()

    async def _acquire(self, on_position: Optional[PositionCallback]) -> None:
        if self.active < self.limit and not self._waiters:
            self.active += 1
            return
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        self._callbacks[waiter] = on_position
        if on_position:
            await on_position(len(self._waiters))
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self._release()  # granted just as we were cancelled: pass the slot on
            else:
                self._remove(waiter)
            raise
        finally:
            self._callbacks.pop(waiter, None)

    def _remove(self, waiter: asyncio.Future) -> None:
        with contextlib.suppress(ValueError):
            self._waiters.remove(waiter)
        self._notify_positions()

    def _release(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)  # the slot moves to the next in line; active stays the same
                self._notify_positions()
                return
        self.active -= 1

    def _notify_positions(self) -> None:
        for position, waiter in enumerate(self._waiters, start=1):
            callback = self._callbacks.get(waiter)
            if callback:
                asyncio.ensure_future(callback(position))
