"""What this chat keeps in Chainlit's user session (``cl.user_session``), one typed key each.

Chainlit replaces a session's whole user-session dict with the chat's stored metadata when it resumes a chat, and
saves the dict with the chat: only values that may be lost that way, or that belong in the saved chat, live here.
This chat's running answers live on Chainlit's session object instead (``answer_tasks()`` in
app/chainlit_internals.py says why). The names are those the saved chats already hold; never rename one.
"""
from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, Generic, Optional, TypeVar

import chainlit as cl

from app.chainlit_internals import REFUSED_CHAT as _REFUSED_CHAT_NAME

T = TypeVar("T")


class SessionKey(Generic[T]):
    """One value of this chat's user session, of one type; ``default()`` when it is not set (or set to None)."""

    def __init__(self, name: str, default: Callable[[], T]) -> None:
        self.name, self.default = name, default

    def get(self) -> T:
        value = cl.user_session.get(self.name)
        return self.default() if value is None else value

    def set(self, value: T) -> None:
        cl.user_session.set(self.name, value)


def _none() -> None:
    return None


# The settings panel's values (system prompt, temperature, top_p, max_tokens): saved with the chat.
CHAT_SETTINGS: SessionKey[dict[str, Any]] = SessionKey("chat_settings", dict)
# The buttons under the newest answer (app/ui/answer_actions.py): taken off when a newer answer gets them.
ANSWER_ACTIONS: SessionKey[list[cl.Action]] = SessionKey("answer_actions", list)
# The task that redraws the status panel (app/ui/status_panel.py keep_status_fresh); cancelled when the chat ends.
STATUS_TASK: SessionKey[Optional[asyncio.Task]] = SessionKey("status_task", _none)
# The status panel's element id: each redraw replaces the panel in place.
STATUS_PANEL_ID: SessionKey[Optional[str]] = SessionKey("status_panel_id", _none)
# Whether this chat was told that the history is not being saved (said once per chat).
HISTORY_WARNED: SessionKey[bool] = SessionKey("history_warned", bool)
# The chat whose address the page was told (app/ui/chat_address.py): once per chat.
CHAT_ADDRESS_SENT: SessionKey[Optional[str]] = SessionKey("chat_address_sent", _none)
# Another user's chat this page asked for by its address, refused (set by app/chainlit_internals.py).
REFUSED_CHAT: SessionKey[Optional[str]] = SessionKey(_REFUSED_CHAT_NAME, _none)
