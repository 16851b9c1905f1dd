"""The fork button under an answer: a new chat in the sidebar with the turns up to that answer (their versions
and branches, the documents attached to them) and this chat's settings, named after this chat; the page then
opens it (app/ui/static/ui/face.js loads its address, so the sidebar lists it).

The page sends the button's action, and anything in it: only a finished answer this chat shows, in a chat of the
user's own (app/history/forking.py asks the database whose it is), with no answer being written and no branch
switch or edit under way, is forked; anything else stores nothing, and a line (a toast) says why."""
from __future__ import annotations

import logging

import chainlit as cl

from app.chainlit_internals import answer_tasks, branches_held
from app.history.forking import fork_chat
from app.history.messages import KIND, KIND_ANSWER, PARTIAL
from app.i18n import t
from app.runtime import current_runtime
from app.ui.chat_history import current_store
from app.ui.chat_messages import language, toast
from app.ui.session_keys import CHAT_SETTINGS

log = logging.getLogger("ernie_chat.chat")
CHAT_FORKED = "chat_forked"  # app/ui/static/ui/face.js reads {"ernie_chat": CHAT_FORKED, "path": ...}


async def fork_from(action: cl.Action) -> None:
    """Fork this chat at the answer the button is under, and open the new chat."""
    page_language = language()
    with branches_held() as free:  # the chat read whole, as no switch has half shown it
        if not free or answer_tasks():
            await toast(t(page_language, "branches_busy" if not free else "answer_running_branches"))
            return
        store = current_store()
        session = cl.context.session
        answer = next((m for m in cl.chat_context.get() if m.id == action.forId), None)
        metadata = (answer.metadata or {}) if answer is not None else {}
        forked = None
        if (store is not None and answer is not None and session.user is not None and session.thread_id
                and metadata.get(KIND) == KIND_ANSWER and not metadata.get(PARTIAL)):
            forked = await fork_chat(store.layer, session.thread_id, answer.id, session.user.identifier,
                                     CHAT_SETTINGS.get(), lambda name: t(page_language, "fork_name", name=name))
    if forked is None:
        log.info("fork not made: not a finished, stored answer of this user's chat")
        await toast(t(page_language, "fork_refused"))
        return
    log.info("chat %s forked into %s", session.thread_id, forked)
    root = current_runtime().settings.server.root_path
    await cl.send_window_message({"ernie_chat": CHAT_FORKED, "path": f"{root}/thread/{forked}"})
