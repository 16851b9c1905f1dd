"""A chat forked from one of its messages: a new chat of the same owner with the messages up to and including that
one (their versions and branches in their metadata, the documents attached to its questions in theirs and in its
elements) and the chat's settings, named after the chat it came from. Stored as an import is
(app/history/restore.py ``import_chat``): ids of its own, through the one writer, in one transaction.
"""
from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any, Optional

from chainlit.utils import utc_now

from app.history.chat_metadata import CHAT_SETTINGS, imported_metadata
from app.history.data_layer import HistoryDataLayer
from app.history.export import thread_for_export
from app.history.messages import CHAT_NAME_CHARS, USER_MESSAGE
from app.history.restore import import_chat


def origin_name(thread: dict[str, Any]) -> str:
    """What the chat is called in the sidebar: its name, else its first question (as Chainlit names a chat)."""
    if thread.get("name"):
        return str(thread["name"])
    first = next((s for s in thread.get("steps") or [] if s.get("type") == USER_MESSAGE), None)
    return str((first or {}).get("output") or "").strip()


def forked_chat(thread: dict[str, Any], upto: str, chat_id: str, owner: str, name: str,
                settings: Any, now: str) -> Optional[dict[str, Any]]:
    """The chat to store (our export's shape), or None when ``upto`` is not one of ``thread``'s messages. Its
    settings are the panel's values as the chat has them now (``settings``), each of its type."""
    steps = list(thread.get("steps") or [])
    ids = [step.get("id") for step in steps]
    if upto not in ids:
        return None
    kept = [{key: value for key, value in step.items() if key != "feedback"} | {"threadId": chat_id}
            for step in steps[:ids.index(upto) + 1]]
    kept_ids = {step["id"] for step in kept}
    elements = [{**element, "threadId": chat_id} for element in thread.get("elements") or []
                if element.get("forId") in kept_ids]
    return {"id": chat_id, "name": name[:CHAT_NAME_CHARS], "user": owner, "tags": [],
            "metadata": imported_metadata({CHAT_SETTINGS: settings}), "created_at": now, "updated_at": now,
            "steps": kept, "elements": elements}


async def fork_chat(layer: HistoryDataLayer, thread_id: str, upto: str, owner: str, settings: Any,
                    name_for: Callable[[str], str]) -> Optional[str]:
    """Fork ``owner``'s chat ``thread_id`` at its message ``upto``; the new chat's id, or None when the chat is
    not ``owner``'s or does not hold that message (yet)."""
    if await layer.get_thread_author(thread_id) != owner:
        return None
    thread = await thread_for_export(layer, thread_id)  # every message with its stored time, as an export has it
    if thread is None:
        return None
    chat = forked_chat(thread, upto, str(uuid.uuid4()), owner, name_for(origin_name(thread)), settings, utc_now())
    if chat is None:
        return None
    landed = await import_chat(layer, chat)
    return chat["id"] if landed.messages else None
