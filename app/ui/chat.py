"""Chainlit handlers: each one short, handing the work to the module whose job it is.

``install()`` registers the handlers; app/ui/chainlit_app.py (the file Chainlit loads) calls it. Every handler finds
the app through ``current_runtime()``. Who does what:

- app/ui/answer.py: answering one message (checks, settings, the prompt from the chat the page shows), and the
  Regenerate and Continue buttons' answers; app/ui/answer_versions.py: the arrows between an answer's versions;
  app/ui/question_branches.py: an edit kept as a branch, the arrows between a question's branches;
  app/ui/fork_chat.py: a new chat forked from an answer;
  app/ui/documents_step.py: attached files read and fitted;
  app/ui/streamed_answer.py: one answer streamed into the chat, and what the chat keeps of it however it ends.
- app/ui/running_answers.py: this chat's answers as tasks (the per-chat limit; Stop reaches each one).
- app/ui/closed_tabs.py: a closed tab's chat out of memory, read back from the database if the tab comes back.
- app/ui/settings_panel.py, app/ui/answer_actions.py, app/ui/chat_messages.py (notices, message kinds, the turns
  shown), app/ui/session_keys.py (what the chat keeps in Chainlit's user session), app/ui/background.py (every task
  started here, kept until it ends).
"""
from __future__ import annotations

import asyncio
import logging
from functools import partial
from typing import TYPE_CHECKING, Any, Optional, cast

import chainlit as cl

from app.chainlit_internals import (
    answer_tasks,
    delete_session_files,
    follow_login_mode,
    forget_chat_contexts_of_closed_sessions,
    keep_turns_on_edit,
    leave_refused_chat,
    remove_chainlits_stop_message,
    when_a_tab_comes_back,
)
from app.documents.attach import configure_uploads, relink_resumed_files
from app.heap import give_back_free_memory
from app.history.presets import PresetStore
from app.i18n import STARTERS, t
from app.runtime import Runtime, current_runtime
from app.ui.answer import answer, continue_answer, regenerate, takes_the_button
from app.ui.answer_actions import (
    CONTINUE,
    FORK,
    REGENERATE,
    VERSION_NEXT,
    VERSION_PLACE,
    VERSION_PREVIOUS,
    offer_actions_on_resume,
    take_off_answer_actions,
)
from app.ui.answer_versions import open_on_searched_version, show_version, version_place
from app.ui.background import spawn
from app.ui.chat_address import tell_page_the_chat_address
from app.ui.chat_history import install_history, store_before_answer
from app.ui.chat_messages import language, notice
from app.ui.closed_tabs import free_when_answers_end, read_back_when_back, resumed_again
from app.ui.documents_step import attach_documents, files_to_read
from app.ui.fork_chat import fork_from
from app.ui.preset_commands import offer_presets, run_preset_command
from app.ui.question_branches import (
    BRANCH_NEXT,
    BRANCH_PREVIOUS,
    keep_branch_on_edit,
    open_on_searched_branch,
    show_arrows_on_resume,
    show_branch,
)
from app.ui.running_answers import answered_in_a_task, run_tracked, stop_all
from app.ui.session_keys import CHAT_SETTINGS, REFUSED_CHAT, STATUS_TASK
from app.ui.settings_panel import keep_settings, send_settings, use_preset
from app.ui.several_answers import fold_interrupted
from app.ui.status_panel import SHOW_STATUS_MESSAGE, keep_status_fresh, show_status, show_status_in_resumed_chat
from app.ui.streamed_answer import mark_interrupted

if TYPE_CHECKING:
    from chainlit.types import ThreadDict

log = logging.getLogger("ernie_chat.chat")


def install() -> None:
    """Register the Chainlit handlers (called by app/ui/chainlit_app.py)."""
    rt = current_runtime()
    configure_uploads(rt.settings.chat)  # Chainlit's upload limits are --max-upload-mb and --max-upload-files
    install_history(rt)  # chat history: data layer, and the local user on loopback (app/ui/chat_history.py)
    if rt.login.has_login_page:
        # Chainlit's login page guards the UI: each user's own secret, or the one person's --auth-token. On loopback
        # without users it is registered too, and offered once a user is added while the app runs.
        cl.password_auth_callback(check_login)
        follow_login_mode(rt.login.asks_for_login)
    cl.set_starters(starters)
    cl.on_chat_start(on_chat_start)
    cl.on_chat_resume(on_chat_resume)
    cl.on_chat_end(on_chat_end)
    cl.on_settings_update(on_settings_update)
    cl.on_message(on_message)
    cl.on_window_message(on_window_message)
    cl.action_callback(REGENERATE)(answered_in_a_task(regenerate, takes_the_button))
    cl.action_callback(CONTINUE)(answered_in_a_task(continue_answer, takes_the_button))
    for arrow in (VERSION_PREVIOUS, VERSION_NEXT):
        cl.action_callback(arrow)(show_version)
    cl.action_callback(VERSION_PLACE)(version_place)
    for arrow in (BRANCH_PREVIOUS, BRANCH_NEXT):
        cl.action_callback(arrow)(show_branch)
    cl.action_callback(FORK)(fork_from)
    keep_turns_on_edit(keep_branch_on_edit)  # an edit keeps the turns it replaces as a branch of the question
    cl.on_stop(on_stop)
    # A closed tab's chat leaves memory (on_chat_end); back within Chainlit's window, it is read back first.
    when_a_tab_comes_back(lambda session: read_back_when_back(current_runtime().history, session))


async def check_login(username: str, password: str) -> Optional[cl.User]:
    identity = await current_runtime().login.check(username, password)
    return cl.User(identifier=identity.name, metadata=identity.metadata) if identity else None


async def starters(user: Any = None, language: Optional[str] = None) -> list[cl.Starter]:
    return [cl.Starter(label=t(language, f"starter_{name}_label"), message=t(language, f"starter_{name}"))
            for name in STARTERS]


async def on_chat_start() -> None:
    rt = current_runtime()
    rt.metrics.chats.inc()
    await _say_if_a_chat_was_refused()
    await _open_chat(rt, {})


async def on_chat_resume(resumed: ThreadDict) -> None:
    # Chainlit put the chat's saved messages back (the next prompt is built from them) and its saved
    # session, whose chat_settings are this chat's system prompt, temperature, top_p and length.
    thread = cast("dict[str, Any]", resumed)  # the same object: what changes here is what Chainlit sends the page
    rt = current_runtime()
    await _open_chat(rt, CHAT_SETTINGS.get())
    if rt.history is not None:  # opened from a search: the branch and version holding the words are shown
        await _open_on_searched(thread, rt.history.layer)
    await fold_interrupted(thread, language())  # answers at once first: what they fold into is no longer partial
    await mark_interrupted(thread, language())
    await offer_actions_on_resume(thread, language())
    relink_resumed_files(thread, rt.settings.server.root_path)
    await show_arrows_on_resume(thread, language())
    await show_status_in_resumed_chat(rt, language(), thread)
    resumed_again(cl.context.session, thread)  # last: a tab back after a blip held its messages twice


async def on_chat_end() -> None:
    # The page went away: stop its answers, running or queued; nobody is left to read them.
    stop_all()
    task = STATUS_TASK.get()
    if task:
        task.cancel()
    rt = current_runtime()
    if rt.uploads is not None:  # its uploads go now, not when Chainlit drops the session 10 min later (N7)
        delete_session_files(rt.uploads.session_ended(cl.context.session.id))
    session = cl.context.session
    if rt.history is not None and session.has_first_interaction and not rt.stopping:
        # Its messages (documents' text among them) are in the database: they leave memory once its answers end,
        # not when Chainlit drops the session 10 min later (app/ui/closed_tabs.py).
        free_when_answers_end(rt.history, session, answer_tasks())


async def on_settings_update(settings: dict[str, Any]) -> None:
    await keep_settings(settings)


async def on_message(message: cl.Message) -> None:
    rt = current_runtime()
    if await run_preset_command(_presets(rt), message, language(), notice, partial(use_preset, rt)):
        return  # "Save preset": done, and no question to answer
    # A question: the previous answer is no longer the newest, and its buttons leave now, not when this answer ends
    # (its files may take minutes to read; a stopped or failed answer may never give them a new place).
    await take_off_answer_actions()
    await run_tracked(_read_and_answer(rt, message))
    if rt.gpu_memory:  # GPU memory peak moved; without a GPU nothing in the panel changed
        await show_status(rt, language())


async def on_window_message(message: Any) -> None:
    # The page passes every window message on, whoever posted it: only the Status button's is acted on.
    if message == SHOW_STATUS_MESSAGE:
        await show_status(current_runtime(), language())


async def on_stop() -> None:
    # Chainlit cancels the current task; EngineHost.stream's cleanup aborts the engine request, and the
    # stopped answer is marked in place of Chainlit's own "Task manually stopped." message.
    log.info("stop pressed")
    await remove_chainlits_stop_message()


async def _read_and_answer(rt: Runtime, message: cl.Message) -> None:
    """Reading the files is part of the answer: Stop reaches it too."""
    if files_to_read(message):
        await attach_documents(rt, message)
    await store_before_answer(message)  # the user's message is stored before the engine answers
    if rt.history is not None:  # a saved chat has an address of its own
        await tell_page_the_chat_address(rt.settings.server.root_path)
    await answer(rt, message)


async def _open_on_searched(thread: dict[str, Any], layer: Any) -> None:
    """The words of the search the chat was picked from (taken once: the record is emptied), shown: the branch of
    a question holding them first, as it changes which answers are shown, then the versions of those answers."""
    words = layer.searched.take(str(thread.get("userId") or ""), str(thread.get("id") or ""))
    if words:
        await open_on_searched_branch(thread, layer, words)
        await open_on_searched_version(thread, layer, words)


def _presets(rt: Runtime) -> Optional[PresetStore]:
    return PresetStore(rt.history.layer) if rt.history is not None else None


async def _open_chat(rt: Runtime, saved: dict[str, Any]) -> None:
    """The settings panel (with this chat's saved values, else the defaults), the presets and the status panel."""
    page_language = language()
    await send_settings(rt, saved)
    await offer_presets(_presets(rt), page_language)
    if rt.damaged_history is not None:  # once: the first page opened after the start that kept it aside
        kept, rt.damaged_history = rt.damaged_history, None
        await notice(t(page_language, "history_damaged", path=kept))
    # Runs in this chat's context, so it draws into this chat's panel; ends with the chat.
    STATUS_TASK.set(spawn(keep_status_fresh(rt, page_language), name="status-panel"))


async def _say_if_a_chat_was_refused() -> None:
    """The page asked for another user's chat (its address): Chainlit refused it and this is a new chat instead
    (app/guards); one line says so, and the page leaves that chat's address (issue 35 item 7)."""
    if REFUSED_CHAT.get():
        REFUSED_CHAT.set(None)  # once: the user session is saved with the new chat
        line = t(language(), "not_your_chat")
        await leave_refused_chat(line)
        await notice(line)


def forget_closed_chats() -> int:
    """Drop the messages Chainlit keeps for chats whose page is gone; returns how many chats were dropped. The
    app grew ~53 KiB per chat without it (python -m bench.history_load); the chats stay in the database."""
    return forget_chat_contexts_of_closed_sessions()


async def keep_forgetting_closed_chats(every_s: float = 60.0) -> None:
    while True:
        await asyncio.sleep(every_s)
        forget_closed_chats()
        await asyncio.to_thread(give_back_free_memory)  # what they and the last minute's bursts freed (app/heap.py)
