"""A closed tab's chat out of the app's memory while Chainlit keeps its session, read back from the chat database
when the tab comes back.

Chainlit keeps a closed tab's session for ``session_timeout`` (600 s, .chainlit/config.toml), so that a tab whose
connection dropped goes on with its chat, and with the session the chat's messages, the documents' text in their
metadata: about 3.8 million characters per message with five 300-page PDFs. 120 s after the load run's last session
the app's RSS stayed at +17.4% of its start for them (docs/benchmarks.md, run 4). A shorter window is no way out: a
fresh chat's socket names no chat, so a tab back after it would start another one.

So once a tab is closed and its answers have ended, its messages go when the database gives the same chat back (a
write refused or not landed yet keeps them here); a tab that comes back gets them from the database before its
socket is accepted, so its next prompt holds what it would have held. With --no-history nothing is in a database:
the chat stays in memory for the window, as Chainlit keeps it.
"""
from __future__ import annotations

import asyncio
import logging
import weakref
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Optional

from app.chainlit_internals import (
    drop_held_messages,
    held_messages,
    hold_messages,
    make_room_for_resumed_messages,
    messages_from_steps,
)
from app.heap import give_back_free_memory
from app.telemetry import FILE_ONLY
from app.ui.background import spawn

if TYPE_CHECKING:
    from app.history import HistoryStore

log = logging.getLogger("ernie_chat.chat")

# A closed tab's answers are cancelled (on_chat_end) and end within moments, their cut text saved; one still
# running after this keeps its chat in memory.
ANSWERS_END_S = 30.0


@dataclass
class _ClosedTab:
    freeing: Optional[asyncio.Task] = None  # between the tab's close and its chat's going
    freed: bool = False  # its messages are in the database only
    # The messages' ids in the order the tab held them, which the database's (by the time each was stored) may
    # not be: an answer is stored as it ends, after a question sent while it was being written.
    order: list[str] = field(default_factory=list)


# Per Chainlit session object: an entry goes with its session when Chainlit deletes it.
_TABS: weakref.WeakKeyDictionary[Any, _ClosedTab] = weakref.WeakKeyDictionary()


def free_when_answers_end(store: HistoryStore, session: Any, answers: set[asyncio.Task]) -> asyncio.Task:
    """Start letting go of a closed tab's chat: once ``answers`` (its tasks, cancelled) have ended, its messages
    go if the database holds the same chat. Called as the tab closes."""
    tab = _TABS.setdefault(session, _ClosedTab())
    if tab.freeing is not None:
        tab.freeing.cancel()
    tab.freeing = spawn(_free(store, session, tab, set(answers)), name="free-closed-chat")
    return tab.freeing


async def _free(store: HistoryStore, session: Any, tab: _ClosedTab, answers: set[asyncio.Task]) -> bool:
    if answers:
        _, running = await asyncio.wait(answers, timeout=ANSWERS_END_S)
        if running:
            log.info("chat %s kept in memory: its answers did not end", session.thread_id, extra=FILE_ONLY)
            return False
    try:
        stored = await _stored_messages(store, session)
    except Exception as err:  # noqa: BLE001 - the chat stays in memory, as Chainlit keeps it
        log.info("chat %s kept in memory: the database could not be read (%s)", session.thread_id, err,
                 extra=FILE_ONLY)
        return False
    held = held_messages(session)  # from here to its going, nothing is awaited: nothing changes it unseen
    order = [message.id for message in held]
    stored = in_order(stored, order)
    difference = chat_difference(held, stored)
    if difference is not None:
        log.info("chat %s kept in memory: the database holds it otherwise (%s)", session.thread_id, difference,
                 extra=FILE_ONLY)
        return False
    drop_held_messages(session)
    tab.freed, tab.order = True, order
    log.info("chat %s of a closed tab: %d messages left memory until the tab comes back", session.thread_id,
             len(held), extra=FILE_ONLY)
    del held, stored  # the last references to the messages: what they held is free before it is given back
    await asyncio.to_thread(give_back_free_memory)
    return True


async def _stored_messages(store: HistoryStore, session: Any) -> list[Any]:
    """The tab's chat as the database holds it (no messages when it holds no such chat: deleted meanwhile)."""
    thread = await store.layer.get_thread(session.thread_id)
    return messages_from_steps(session, thread["steps"] if thread else [])


def in_order(messages: list[Any], order: list[str]) -> list[Any]:
    """``messages`` in the order of the ids in ``order``; any other (stored since, from another tab) after them, in
    the database's order."""
    place = {message_id: n for n, message_id in enumerate(order)}
    return sorted(messages, key=lambda message: place.get(message.id, len(order)))


_COMPARED = ("id", "type", "author", "content", "metadata")


def chat_difference(held: list[Any], stored: list[Any]) -> Optional[str]:
    """Where two lists of messages differ as the next prompt reads them (the same messages in the same order, each of
    the same kind, author, text and metadata: an answer's versions, a question's documents), in words that name no
    text; None when they are the same chat."""
    for place, (mine, theirs) in enumerate(zip(held, stored, strict=False)):  # lengths: below
        for name in _COMPARED:
            if (getattr(mine, name) or None) != (getattr(theirs, name) or None):
                return f"message {place + 1} of {len(held)}: its {name} differs"
    if len(held) != len(stored):
        return f"{len(held)} messages here, {len(stored)} in the database"
    return None


async def read_back_when_back(store: Optional[HistoryStore], session: Any) -> None:
    """A closed tab came back to its session: its chat is what the database holds, as it was when it closed."""
    tab = _TABS.pop(session, None)
    if tab is not None and tab.freeing is not None:
        tab.freeing.cancel()  # still deciding: the chat is needed again
    if store is None:
        return  # --no-history: the chat never left memory, and Chainlit resumes nothing
    _BACK.add(session)
    if tab is None or not tab.freed:
        return
    try:
        stored = await _stored_messages(store, session)
    except Exception as err:  # noqa: BLE001 - the tab must not go on with a chat missing its messages
        _TABS[session] = tab  # still freed: a later return tries again
        _BACK.discard(session)
        log.warning("a tab came back to chat %s, which could not be read back (%s)", session.thread_id, err)
        raise ConnectionRefusedError("the chat could not be read back") from err
    hold_messages(session, in_order(stored, tab.order))


# Tabs back after a close: a tab opened on a chat's address is resumed by Chainlit once more as it comes back.
_BACK: weakref.WeakSet[Any] = weakref.WeakSet()


def resumed_again(session: Any, thread: dict[str, Any]) -> None:
    """Called last in on_chat_resume: when the tab is back after a close, the chat it holds is what Chainlit is about
    to add once more (make_room_for_resumed_messages says why that doubled every turn). A first resume is left as
    Chainlit makes it."""
    if session in _BACK:
        _BACK.discard(session)
        make_room_for_resumed_messages(thread)
