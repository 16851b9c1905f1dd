"""Chat history in the UI (issue 12): registers our data layer with Chainlit and decides who owns a chat.

Chainlit shows its history sidebar only when the page has both a data layer and a logged-in user
(``requireLogin && dataPersistence`` in its frontend). So:
- with ``--auth-token``: the login page as before (app/chat.py), each user name owns its chats;
- on loopback without a token: one local user, logged in without a login page. Chainlit's header auth
  makes ``requireLogin`` true; the page then first asks ``/user``, and only without a valid cookie goes to
  ``/login`` (which would call header auth and come back). ``LocalUserCookie`` sets that cookie on the page
  itself, so the login page is never shown, also after a restart (a new signing secret);
- on another address with ``--insecure-no-auth``: no history. Everyone who reaches the port would share
  one user and read each other's chats.

``install_history(runtime)`` is called from app/chat.py ``install()``; ``history_router()`` is included by
app/server.py; ``store_before_answer(message)`` is awaited by the message handler before the engine answers.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import secrets
from pathlib import Path
from typing import Any, Optional

import chainlit as cl
from fastapi import APIRouter, Depends, HTTPException
from fastapi.responses import Response
from starlette.middleware.base import BaseHTTPMiddleware

from app.history import HistoryStore, locate, prepare_database
from app.history.transfer import file_name, to_json, to_markdown

log = logging.getLogger("ernie_chat.history")
LOCAL_USER = "local"


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
    server = settings.server
    if not server.is_loopback and server.auth_token is None:
        log.warning("chat history is off: --host %s without --auth-token would show every visitor everyone's "
                    "chats (set --auth-token to keep chats per user)", server.host)
        return
    # raises HistoryDatabaseError (one line) for a database from a newer ernie-chat
    runtime.damaged_history = _prepare(location)
    store = HistoryStore.open(location, on_write_error=runtime.metrics.history_write_errors.inc)
    runtime.history = store
    log.info("chats are kept in %s", location.shown)

    @cl.data_layer
    def data_layer() -> Any:
        return store.layer

    if server.auth_token is None:
        _install_local_user()
    # Resuming a chat (app/chat.py on_chat_resume): Chainlit puts its stored messages back into the chat
    # context, which every prompt is built from, and its saved session (with chat_settings) back in place.


def _install_local_user() -> None:
    from chainlit.server import app as chainlit_app

    # Chainlit signs its login cookie with this; only the one local user is ever signed in.
    os.environ.setdefault("CHAINLIT_AUTH_SECRET", secrets.token_urlsafe(48))

    @cl.header_auth_callback
    async def local_user(headers: Any) -> cl.User:
        return cl.User(identifier=LOCAL_USER, metadata={"provider": "local"})

    chainlit_app.add_middleware(LocalUserCookie)


class LocalUserCookie(BaseHTTPMiddleware):
    """On the HTML page, log the browser in as the local user when it has no valid login cookie."""

    async def dispatch(self, request, call_next):
        response = await call_next(request)
        if request.method != "GET" or not response.headers.get("content-type", "").startswith("text/html"):
            return response
        from chainlit.auth import create_jwt, get_token_from_cookies, set_auth_cookie
        from chainlit.auth.jwt import decode_jwt

        token = get_token_from_cookies(request.cookies)
        try:
            if token and decode_jwt(token).identifier == LOCAL_USER:
                return response
        except Exception:  # expired, or signed before a restart: issue a new one
            pass
        set_auth_cookie(request, response, create_jwt(cl.User(identifier=LOCAL_USER,
                                                              metadata={"provider": "local"})))
        return response


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


def _attachment(name: str) -> str:
    # HTTP headers are Latin-1: an ASCII name for old clients, the real (maybe Chinese) one per RFC 6266.
    from urllib.parse import quote

    fallback = name.encode("ascii", "replace").decode().replace("?", "_")
    return f"attachment; filename=\"{fallback}\"; filename*=UTF-8''{quote(name)}"


def history_router() -> APIRouter:
    """``GET /history/chats/{id}/export.md|json``: one chat as a download, for its owner only."""
    from chainlit.auth import get_current_user
    from chainlit.data.acl import is_thread_author

    router = APIRouter()

    @router.get("/history/chats/{thread_id}/export.{fmt}")
    async def export_chat(thread_id: str, fmt: str, user: Any = Depends(get_current_user)) -> Response:
        store = current_store()
        if store is None:
            raise HTTPException(404, "chat history is off (--no-history)")
        if fmt not in ("md", "json"):
            raise HTTPException(404, "export formats: md, json")
        if user is None:
            raise HTTPException(401, "log in first")
        await is_thread_author(user.identifier, thread_id)  # 404 unknown, 401 someone else's
        thread = await store.layer.get_thread(thread_id)
        if thread is None:
            raise HTTPException(404, "Thread not found")
        body = to_json(thread) if fmt == "json" else to_markdown(thread)
        media = "application/json" if fmt == "json" else "text/markdown"
        return Response(body, media_type=f"{media}; charset=utf-8",
                        headers={"Content-Disposition": _attachment(file_name(thread, fmt))})

    return router
