"""The chat's status panel: the card (or the remote server), profile, engine state and start progress, context,
speed, restarts, unsaved history, the chat's download links and GPU memory, beside the chat.

``status_markdown`` is the panel's text, a function of the runtime (tested without a page); ``show_status`` and
``keep_status_fresh`` draw it into the chat that calls them, in that chat's language.
"""
from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import chainlit as cl

from app.chainlit_internals import element_file_url
from app.engine.status import START_STEPS, EngineStatus, Speed
from app.history.data_layer import session_user_identifier
from app.history.writer import SLOW_SAVE_S
from app.i18n import starting_engine_cost, t, worded
from app.planning.hardware import gib
from app.runtime import Runtime
from app.ui.branding import model_name
from app.ui.session_keys import STATUS_PANEL_ID

STATUS_REFRESH_SECONDS = 1.0
# What the page's "Status" button posts on a phone (app/ui/static/ui/face.js): draw the panel, which opens it there.
SHOW_STATUS_MESSAGE = {"ernie_chat": "show_status"}


def model_label(model: str) -> str:
    """The model's name, then where it comes from: 'SmolLM2-135M-Instruct (/models/SmolLM2-135M-Instruct)',
    'ERNIE-4.5-0.3B-PT (baidu/ERNIE-4.5-0.3B-PT)'. Any model may be served: the panel says which."""
    return f"{model_name(model)} ({model})"


def engine_state_text(status: EngineStatus, language: str) -> str:
    """'ready — ready in 12.3s' in the page's language (an error's own words stay as they came)."""
    state = t(language, "state_" + status.state.value)
    return f"{state} — {worded(language, status.detail)}" if status.detail else state


def status_markdown(rt: Runtime, language: str) -> str:
    status = rt.host.status
    gpu = rt.gpu
    if rt.plan.device == "remote":  # the card is the server's; say where the answers come from
        where = f"**{t(language, 'panel_remote')}:** {rt.plan.engine_args.get('remote_url')}"
    else:
        where = f"**{t(language, 'panel_card')}:** {gpu.name if gpu else 'CPU'}"
    lines = [
        f"**{t(language, 'panel_model')}:** {model_label(rt.settings.model.model)}",
        where,
        f"**{t(language, 'panel_profile')}:** {rt.plan.profile}",
        f"**{t(language, 'panel_engine')}:** {engine_state_text(status, language)}"
        + (f"  \n{start_progress_line(status, language)}" if status.starting else ""),
        f"**{t(language, 'panel_context')}:** {t(language, 'panel_context_value', tokens=rt.max_model_len)}",
    ]
    if status.speed is not None:
        seconds = status.full_speed_seconds if status.full_speed_seconds is not None else (
            time.time() - status.start_began_at)
        speed = t(language, "speed_" + status.speed.value, seconds=seconds, reason=status.speed_reason,
                  cost=starting_engine_cost(language, rt.plan.device), attempt=status.full_speed_try,
                  tries=status.full_speed_tries)
        lines.append(f"**{t(language, 'panel_speed')}:** {speed}")
    if status.restarts:
        lines.append(f"**{t(language, 'panel_restarts')}:** {status.restarts}")
    history = _history_line(rt, language)
    if history:
        lines.append(f"**{t(language, 'panel_history')}:** {history}")
    download = _download_links(rt, language)
    if download:
        lines.append(download)
    watch = rt.gpu_memory
    if watch is not None:
        now = watch.last if watch.last is not None else watch.sample()
        fmt = lambda b: "–" if b is None else gib(b)
        lines.append(f"**{t(language, 'panel_gpu_memory')}:** "
                     f"{fmt(watch.after_load)} / {fmt(watch.peak)} / {fmt(now)}")
    return "  \n".join(lines)


def _download_links(rt: Runtime, language: str) -> str:
    """'This chat: Markdown · JSON', once the chat is saved (the routes check that it is the user's)."""
    try:
        session = cl.context.session
    except Exception:  # no chat in this context (tests of the panel's text)
        return ""
    if rt.history is None or not session.has_first_interaction or not session.thread_id:
        return ""
    base = f"{rt.settings.server.root_path}/history/chats/{session.thread_id}/export"
    return (f"**{t(language, 'panel_download')}:** [Markdown]({base}.md) · [JSON]({base}.json)")


def start_progress_line(status: EngineStatus, language: str) -> str:
    """'step 3 of 4 · 12 s' as a text bar, the UI's twin of the terminal's progress bar."""
    step = int(status.step or 0)
    bar = "▰" * (step - 1) + "▱" * (START_STEPS - step + 1)
    return t(language, "start_progress", bar=bar, step=step, steps=START_STEPS,
             seconds=time.time() - status.start_began_at)


async def show_status(rt: Runtime, language: str) -> cl.Text:
    """Draw the status panel: one side element of this chat, replaced in place (same id) on each redraw.

    Not ``cl.ElementSidebar``: the page clears that side view whenever its message list mounts or its elements
    change (after the first message, when the address becomes /thread/<id>, and on a page still loading), so
    the panel vanished until the next redraw. A side element in the chat's own elements is shown again by the
    page itself after each of those. Never stored with the chat (persist=False)."""
    panel_id = STATUS_PANEL_ID.get()
    if panel_id is None:
        panel_id = str(uuid.uuid4())
        STATUS_PANEL_ID.set(panel_id)
    text = cl.Text(id=panel_id, name=t(language, "status_title"), content=status_markdown(rt, language),
                   display="side")
    await text.send(for_id="", persist=False)
    return text


async def show_status_in_resumed_chat(rt: Runtime, language: str, thread: dict[str, Any]) -> None:
    """Draw the panel into a chat being reopened, so that it is there when the page shows that chat.

    Chainlit calls on_chat_resume before it sends the chat to the page, and the page then replaces its whole
    element list with the chat's saved elements: a panel drawn before that is gone, and with nothing left to
    change in it, no redraw brings it back. So the panel also rides in the chat Chainlit is about to send."""
    panel = (await show_status(rt, language)).to_dict()
    if panel["chainlitKey"]:  # Chainlit keys a sent panel's file; the page fetches it by that key and the tab's id
        panel["url"] = element_file_url(rt.settings.server.root_path, panel["chainlitKey"], cl.context.session.id)
    thread["elements"] = [*(e for e in thread.get("elements") or () if e.get("id") != panel["id"]), panel]


async def keep_status_fresh(rt: Runtime, language: str) -> None:
    """Redraw the status panel when something in it changes: the engine state (loading -> ready,
    restarts), the start's elapsed seconds, the GPU memory peak while an answer is generated, and the chat
    being saved for the first time (its download links appear)."""
    shown = None
    session = cl.context.session
    while True:
        status = rt.host.status
        watch = rt.gpu_memory
        current = (status.state, status.detail, status.restarts, status.speed,
                   int(time.time() - status.start_began_at) if status.starting or status.speed is Speed.STARTING
                   else None,
                   (watch.peak or 0) >> 20 if watch else None, session.has_first_interaction, status.full_speed_try,
                   _history_line(rt, language))
        if current != shown:
            shown = current
            await show_status(rt, language)
        await asyncio.sleep(STATUS_REFRESH_SECONDS)


def _history_line(rt: Runtime, language: str) -> str:
    """Whether this user's chats are being saved, when they are not: their own changes over their share of the
    waiting writes, or any write waiting past SLOW_SAVE_S; else ""."""
    if rt.history is None:
        return ""
    if rt.history.over_share(session_user_identifier()):
        return t(language, "history_over_share")
    waited = rt.history.unsaved_seconds
    return t(language, "history_waiting", seconds=int(waited)) if waited > SLOW_SAVE_S else ""
