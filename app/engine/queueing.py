"""A fair gate: at most N at once; the rest wait, taking turns by owner (each user in turn), in order within one.

The next slot goes to the waiting owner served longest ago, so one owner's backlog holds another back by one turn
per owner ahead at most: a user with many slow files queued used to make another user's 30-byte file wait 121 s
for a document reader (issue 36 N6). Waiters without an owner share one turn (first come, first served among
them, as before owners existed).

Waiters are told their position whenever it changes, so the UI can say "queued, 2 ahead of you".
Cancelled waiters leave the queue without disturbing the others.
"""
from __future__ import annotations

import asyncio
import contextlib
import contextvars
from collections import Counter, deque
from collections.abc import AsyncIterator, Awaitable, Callable
from itertools import chain, zip_longest
from typing import Optional

PositionCallback = Callable[[int], Awaitable[None]]


class FairGate:
    """``limit`` slots; ``per_owner``: the most one owner holds at once (default: all of them). With one slot
    more than ``per_owner``, one user's long jobs always leave a slot for the others (several users' long jobs
    together may still fill it)."""

    def __init__(self, limit: int, per_owner: Optional[int] = None) -> None:
        if limit < 1 or (per_owner is not None and per_owner < 1):
            raise ValueError("limit and per_owner must be >= 1")
        self.limit = limit
        self.per_owner = min(per_owner or limit, limit)
        self.active = 0
        self._turns: dict[Optional[str], deque[asyncio.Future]] = {}  # each owner's waiters, in order
        self._owner_of: dict[asyncio.Future, Optional[str]] = {}
        # Each waiter's position callback, with the context it waits in: a position is told in a task of its own,
        # started by whoever moved the queue (another user's answer ending), and must run as the waiter's.
        self._callbacks: dict[asyncio.Future, tuple[PositionCallback, contextvars.Context]] = {}
        # When each owner holding or waiting for a slot was last given one: the owner served longest ago goes next
        # (one who has never been served first), so the owner holding the slot now waits for everyone else's turn.
        self._served_at: dict[Optional[str], int] = {}
        self._holding: Counter[Optional[str]] = Counter()
        self._grants = 0

    @property
    def queued(self) -> int:
        return len(self._owner_of)

    @contextlib.asynccontextmanager
    async def slot(self, on_position: Optional[PositionCallback] = None,
                   owner: Optional[str] = None) -> AsyncIterator[None]:
        await self._acquire(on_position, owner)
        try:
            yield
        finally:
            self._release(owner)

    def _owners_in_turn(self) -> list[Optional[str]]:
        return sorted(self._turns, key=lambda owner: self._served_at.get(owner, 0))  # stable: ties by arrival

    def _order(self) -> list[asyncio.Future]:
        """Who goes next, then after, ...: one of each owner in turn."""
        rounds = zip_longest(*(self._turns[owner] for owner in self._owners_in_turn()))
        return [waiter for waiter in chain.from_iterable(rounds) if waiter is not None]

    def _grant(self, owner: Optional[str]) -> None:
        self._grants += 1
        self._served_at[owner] = self._grants
        self._holding[owner] += 1

    def _may_take_one(self, owner: Optional[str]) -> bool:
        # Waiters without an owner are the app's own (and share one turn): no user's share to keep them within.
        return owner is None or self._holding[owner] < self.per_owner

    async def _acquire(self, on_position: Optional[PositionCallback], owner: Optional[str]) -> None:
        if self.active < self.limit and not self._owner_of and self._may_take_one(owner):
            self.active += 1
            self._grant(owner)
            return
        waiter = asyncio.get_running_loop().create_future()
        self._turns.setdefault(owner, deque()).append(waiter)
        self._owner_of[waiter] = owner
        if on_position is not None:
            self._callbacks[waiter] = (on_position, contextvars.copy_context())
        self._hand_out_free_slots()  # a slot may be free for this owner while the owners waiting are at their share
        try:
            # Telling the position is inside: a Stop (or a failed send) while the page is told leaves the queue
            # as one while waiting does, instead of leaving a waiter that is later given a slot nobody releases.
            if on_position and not waiter.done():
                await on_position(self._order().index(waiter) + 1)
            await waiter
        except BaseException:
            if waiter.done() and not waiter.cancelled():
                self._release(owner)  # granted just as we were cancelled: pass the slot on
            else:
                self._remove(waiter)
            raise
        finally:
            self._callbacks.pop(waiter, None)

    def _remove(self, waiter: asyncio.Future) -> None:
        if waiter not in self._owner_of:  # already taken off its queue (a cancelled one, by _next_in_turn)
            self._notify_positions()
            return
        owner = self._owner_of.pop(waiter)
        queue = self._turns.get(owner)
        if queue is not None:
            with contextlib.suppress(ValueError):
                queue.remove(waiter)
            if not queue:
                del self._turns[owner]
        self._forget_if_gone(owner)
        self._notify_positions()

    def _forget_if_gone(self, owner: Optional[str]) -> None:
        """An owner neither holding nor waiting is forgotten: memory stays bounded by those in the gate."""
        if not self._holding.get(owner) and owner not in self._turns:
            self._holding.pop(owner, None)
            self._served_at.pop(owner, None)

    def _release(self, owner: Optional[str]) -> None:
        self._holding[owner] -= 1
        self.active -= 1
        self._forget_if_gone(owner)
        self._hand_out_free_slots()

    def _hand_out_free_slots(self) -> None:
        """Give the free slots to the waiters in turn, skipping owners who hold their share already."""
        granted = False
        while self.active < self.limit:
            waiter = self._next_in_turn()
            if waiter is None:
                break
            owner = self._owner_of.pop(waiter, None)
            self.active += 1
            self._grant(owner)
            waiter.set_result(None)
            granted = True
        if granted:
            self._notify_positions()

    def _next_in_turn(self) -> Optional[asyncio.Future]:
        """The first waiter of the owner served longest ago who may take one more slot (taken off its queue)."""
        for owner in self._owners_in_turn():
            queue = self._turns[owner]
            while queue and self._may_take_one(owner):
                waiter = queue.popleft()
                if not waiter.done():
                    self._drop_if_empty(owner)
                    return waiter
                self._owner_of.pop(waiter, None)  # cancelled, its task not yet told: it leaves the queue here
            self._drop_if_empty(owner)
        return None

    def _drop_if_empty(self, owner: Optional[str]) -> None:
        if owner in self._turns and not self._turns[owner]:
            del self._turns[owner]
            self._forget_if_gone(owner)

    def _notify_positions(self) -> None:
        for position, waiter in enumerate(self._order(), start=1):
            told = self._callbacks.get(waiter)
            if told is not None:
                callback, waits_in = told
                # Run in the caller's context, the position went to the chat of whoever moved the queue: another
                # user's page and chat context got this one's "Queued" line (and its write was refused as theirs).
                waits_in.run(asyncio.ensure_future, callback(position))
