"""Tell the page the address of the chat its first message began, so that the page moves there at once.

Chainlit's page moves from / to /thread/<id> after a chat's first message, from its sidebar's thread list. On a
phone that list is mounted only when the sidebar is first opened, so the move came then, mounted the whole page
again, and the sidebar with it, closed: the first tap on the sidebar button after an answer did nothing (issue 35
item 8). app/ui/static/ui/face.js moves the page when this message comes, as Chainlit's list does on a wide page.
"""
from __future__ import annotations

import chainlit as cl

from app.ui.session_keys import CHAT_ADDRESS_SENT

CHAT_OPENED = "chat_opened"  # app/ui/static/ui/face.js reads {"ernie_chat": CHAT_OPENED, "home": ..., "path": ...}


async def tell_page_the_chat_address(root_path: str) -> None:
    """Once the chat has an id (its first message was stored), tell the page its address; once per chat."""
    session = cl.context.session
    if not session.thread_id or CHAT_ADDRESS_SENT.get() == session.thread_id:
        return
    CHAT_ADDRESS_SENT.set(session.thread_id)
    await cl.send_window_message({"ernie_chat": CHAT_OPENED, "home": f"{root_path}/",
                                  "path": f"{root_path}/thread/{session.thread_id}"})
