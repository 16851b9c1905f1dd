"""What the page sends with a message is checked like what a file brings: a socket client is any program.

Chainlit takes a message's ``metadata`` from the page as it is, stores it and hands it to the app. Every key the
app reads from a message's metadata is one the server itself sets (``documents`` once the reader process has read
the uploaded files, ``kind``/``footer``/``partial`` on its own answers), so nothing of the page's is kept: one
socket message once carried a 900,000-character "document" without any upload (kept in the chat and served as its
document link), and another 20,000 tiny ones, whose notices filled the history writer's queue until other users'
writes were dropped (issue 36, N12 and N1). The page's own messages carry only ``{"location": <its URL>}``,
which nothing reads. The settings panel's changes are checked the same way (install).
"""
from __future__ import annotations

from typing import Any

from app.chainlit_internals import check_socket_event
from app.history.chat_metadata import typed_settings
from app.history.messages import USER_MESSAGE

# What a page's message may be: the page sends every message as the user's (Chainlit's other step types are the
# server's: an answer sent as one would be stored as the model's).
PAGE_MESSAGE_TYPE = USER_MESSAGE


def checked_message(payload: Any) -> Any:
    """A ``client_message`` payload as the app takes it: the message's metadata emptied, its type the user's.
    A payload of another shape is left for Chainlit, which refuses it."""
    message = payload.get("message") if isinstance(payload, dict) else None
    if not isinstance(message, dict):
        return payload
    return {**payload, "message": {**message, "metadata": {}, "type": PAGE_MESSAGE_TYPE}}


def install() -> None:
    """Check every message, and every change of the settings panel, the page sends before Chainlit stores it or
    the app uses it. Chainlit copies a settings change into the chat's session key by key (saved with the chat):
    only the panel's own values, each of its type, are taken."""
    check_socket_event("client_message", checked_message)
    check_socket_event("chat_settings_change", typed_settings)
