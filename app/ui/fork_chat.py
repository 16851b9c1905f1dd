"""The fork button under an answer: a new chat in the sidebar with the turns up to that answer (their versions
and branches, the documents attached to them) and this chat's settings, named after this chat; the page then
opens it (app/ui/static/ui/face.js loads its address, so the sidebar lists it).

The page sends the button's action, and anything in it: only a finished answer this chat shows, in a chat of the
user's own (app/history/forking.py asks the database whose it is), with no answer being written, is forked;
anything else is ignored (no error, nothing stored)."""
from __future__ import annotations

import logging

import chainlit as cl

from app.chainlit_internals import answer_tasks
from app.history.forking import fork_chat
from app.history.messages import KIND, KIND_ANSWER, PARTIAL
from app.i18n import t
from app.runtime import current_runtime
from app.ui.chat_history import current_store
from app.ui.chat_messages import language
from app.ui.session_keys import CHAT_SETTINGS

log = logging.getLogger("ernie_chat.chat")
CHAT_FORKED = "chat_forked"  # app/ui/static/ui/face.js reads {"ernie_chat": CHAT_FORKED, "path": ...}


async def fork_from(action: cl.Action) -> None:
    """Fork this chat at the answer the button is under, and open the new chat."""
    store = current_store()
    session = cl.context.session
    answer = next((m for m in cl.chat_context.get() if m.id == action.forId), None)
    metadata = (answer.metadata or {}) if answer is not None else {}
    if (store is None or answer is None or session.user is None or not session.thread_id or answer_tasks()
            or metadata.get(KIND) != KIND_ANSWER or metadata.get(PARTIAL)):
        log.info("fork ignored: not a finished answer of this chat, or an answer is being written")
        return
    page_language = language()
    forked = await fork_chat(store.layer, session.thread_id, answer.id, session.user.identifier,
                             CHAT_SETTINGS.get(), lambda name: t(page_language, "fork_name", name=name))
    if forked is None:
        log.info("fork ignored: the chat is not this user's, or the answer is not stored")
        return
    log.info("chat %s forked into %s", session.thread_id, forked)
    root = current_runtime().settings.server.root_path
    await cl.send_window_message({"ernie_chat": CHAT_FORKED, "path": f"{root}/thread/{forked}"})
