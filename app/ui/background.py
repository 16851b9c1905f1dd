"""Every task app/ui starts and does not await at once, kept until it ends.

asyncio keeps only a weak reference to a task: one nobody holds can be garbage-collected mid-run, and one that
fails says so nowhere ("Task exception was never retrieved", at best, whenever it is collected). vLLM keeps its
background tasks in a set with a done-callback that discards them; so does ``spawn``, and the callback logs a
failure.
"""
from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any, Optional

log = logging.getLogger("ernie_chat.chat")

_RUNNING: set[asyncio.Task] = set()


def spawn(work: Coroutine[Any, Any, Any], name: Optional[str] = None) -> asyncio.Task:
    """Run ``work`` in a task of its own (in this context: Chainlit's ``cl.context`` goes with it), held until it
    ends."""
    task = asyncio.create_task(work, name=name)
    _RUNNING.add(task)
    task.add_done_callback(_ended)
    return task


def running() -> frozenset[asyncio.Task]:
    """The tasks started here that have not ended yet."""
    return frozenset(_RUNNING)


def _ended(task: asyncio.Task) -> None:
    _RUNNING.discard(task)
    if task.cancelled():
        return
    error = task.exception()
    if error is not None:
        log.error("task %s failed", task.get_name(), exc_info=error)
