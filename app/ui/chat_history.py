"""Chat history in the UI: registers our data layer with Chainlit; each chat belongs to the user who made it.

Chainlit shows its history sidebar only when the page has both a data layer and a logged-in user
(``requireLogin && dataPersistence`` in its frontend). Who logs in is app/guards/identity.py's ``LoginPolicy``:
users with their own secrets, the one person of --auth-token, or the local user on loopback
(app/guards/local_user.py). On another address with ``--insecure-no-auth`` and no users there is no
history: everyone who reaches the port would be one user and read each other's chats.

``install_history(runtime)`` is called from app/ui/chat.py ``install()``; ``history_router()`` is included by
app/server.py; ``store_before_answer(message)`` is awaited by the message handler before the engine answers.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import logging
from pathlib import Path
from typing import Any, Optional

import chainlit as cl
from fastapi import APIRouter, Depends
from fastapi.responses import Response

from app.control_characters import without_controls
from app.documents.prompt import documents_of
from app.errors import AuthenticationError, ErnieChatError, NotFoundError, error_response
from app.guards.identity import LoginMode
from app.guards.local_user import install_local_user
from app.history import HistoryStore, locate, prepare_database
from app.history.export import file_name, thread_for_export, to_json, to_markdown

log = logging.getLogger("ernie_chat.history")


def current_store() -> Optional[HistoryStore]:
    from app.runtime import current_runtime

    return current_runtime().history


def _prepare(location) -> Optional[Path]:
    """Migrate; returns where a damaged database was kept, if it was. Called while create_app builds the app (no
    event loop yet, but be safe if there is one): in a loop of its own; the store connects later, in the
    server's loop."""
    kept: list[Path] = []
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        pool.submit(asyncio.run, prepare_database(location, kept.append)).result()
    return kept[0] if kept else None


def install_history(runtime: Any) -> None:
    """Open (create, migrate) the chat database and register the data layer and the local user."""
    settings = runtime.settings
    location = locate(settings.history)
    if location is None:
        log.info("--no-history: chats live in the browser tab only; nothing is written to disk")
        return
    login = runtime.login
    if not login.tells_users_apart:
        log.warning("chat history is off: --host %s without users or --auth-token would show every visitor "
                    "everyone's chats (add users: python launch.py users add NAME)", settings.server.host)
        return
    # raises HistoryDatabaseError (one line) for a database from a newer ernie-chat
    runtime.damaged_history = _prepare(location)
    store = HistoryStore.open(location, on_write_error=runtime.metrics.history_write_errors.inc)
    runtime.history = store
    log.info("chats are kept in %s", location.shown)

    @cl.data_layer
    def data_layer() -> Any:
        return store.layer

    if login.mode is LoginMode.LOCAL:
        install_local_user(login.local_identity())
    # Resuming a chat (app/ui/chat.py on_chat_resume): Chainlit puts its stored messages back into the chat
    # context, which every prompt is built from, and its saved session (with chat_settings) back in place.


async def store_before_answer(message: cl.Message) -> None:
    """Store the user's message (and its chat's owner) before the engine answers it; waits at most
    a couple of seconds, and never raises: a failing database must not stop the chat."""
    store = current_store()
    if store is None:
        return
    try:
        user = cl.context.session.user
        user_id = getattr(user, "id", None)
        if user is not None and user_id is None:
            persisted = await store.layer.get_user(user.identifier)
            user_id = persisted.id if persisted else None
        await store.layer.store_now(message.to_dict(), user_id)
    except Exception as err:  # noqa: BLE001 - reported by the writer's counter and flag when it was a write
        log.warning("could not store the message before answering: %s", err)


def attachment(name: str) -> str:
    """The Content-Disposition of a download named ``name``. Headers are Latin-1 without control characters: a NUL
    in a file's name made its document link a dropped connection (uvicorn refuses the header; issue 36, N17). An
    ASCII name for old clients (anything else, quotes and backslashes too, as "_"), the real (maybe Chinese) one per
    RFC 6266, percent-encoded."""
    from urllib.parse import quote

    shown = without_controls(name) or "download"  # an uploaded or imported name may hold any
    fallback = "".join(c if " " <= c <= "~" and c not in '"\\' else "_" for c in shown)
    return f"attachment; filename=\"{fallback}\"; filename*=UTF-8''{quote(shown, safe='')}"


def history_router() -> APIRouter:
    """``GET /history/chats/{id}/export.md|json``: one chat as a download; ``.../documents/{message}/{n}``: the text
    of a file attached to it. For the chat's owner only."""
    from chainlit.auth import get_current_user

    router = APIRouter()

    @router.get("/history/chats/{thread_id}/export.{fmt}")
    async def export_chat(thread_id: str, fmt: str, user: Any = Depends(get_current_user)) -> Response:
        return await _exported_chat(thread_id, fmt, user)

    @router.get("/history/chats/{thread_id}/documents/{step_id}/{index}")
    async def document_text(thread_id: str, step_id: str, index: int,
                            user: Any = Depends(get_current_user)) -> Response:
        """The text kept from a file attached to one of the chat's messages (app/documents)."""
        return await _document_text(thread_id, step_id, index, user)

    return router


async def _owned_chat(thread_id: str, user: Any) -> dict:
    """The chat (with every message's stored time), when ``user`` owns it; raises the error to answer with.
    Someone else's chat answers as an unknown one does: its id is not confirmed."""
    store = current_store()
    if store is None:
        raise NotFoundError("chat history is off (--no-history)")
    if user is None:
        raise AuthenticationError("log in first")
    thread = await thread_for_export(store.layer, thread_id)
    if thread is None or await store.layer.get_thread_author(thread_id) != user.identifier:
        raise NotFoundError("no such chat")
    return thread


async def _exported_chat(thread_id: str, fmt: str, user: Any) -> Response:
    if fmt not in ("md", "json"):
        return error_response(NotFoundError("export formats: md, json"))
    try:
        thread = await _owned_chat(thread_id, user)
    except ErnieChatError as err:
        return error_response(err)
    body = to_json(thread) if fmt == "json" else to_markdown(thread)
    media = "application/json" if fmt == "json" else "text/markdown"
    return Response(body, media_type=f"{media}; charset=utf-8",
                    headers={"Content-Disposition": attachment(file_name(thread, fmt))})


async def _document_text(thread_id: str, step_id: str, index: int, user: Any) -> Response:
    try:
        thread = await _owned_chat(thread_id, user)
    except ErnieChatError as err:
        return error_response(err)
    step: dict[str, Any] = next((dict(s) for s in thread.get("steps") or [] if s.get("id") == step_id), {})
    documents = documents_of(step.get("metadata"))
    if not 0 <= index < len(documents):
        return error_response(NotFoundError("no such document"))
    document = documents[index]
    return Response(document.get("text", ""), media_type="text/plain; charset=utf-8",
                    headers={"Content-Disposition": attachment(f"{document.get('name', 'document')}.txt")})
