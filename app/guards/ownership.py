"""Feedback only on one's own chats. Chainlit's PUT and DELETE /feedback take a message or feedback id and
check no owner (its other routes call ``is_thread_author``): anyone logged in could comment on, or delete the
rating of, another user's answer by its id (docs/security.md, "Feedback on another's chat")."""
from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Optional

from starlette.datastructures import Headers

from app.chainlit_internals import logged_in_identifier
from app.errors import BodyTooLargeError, NotFoundError
from app.guards.login import request_login_token
from app.guards.requests import bearer_token, local_path, send_error

MAX_FEEDBACK_BYTES = 64 * 2**10  # a rating and a comment; the page sends a few hundred bytes


def _ids(body: dict[str, Any], method: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(message ids, feedback ids) a /feedback body would change."""
    if method == "DELETE":
        return (), (str(body.get("feedbackId", "")),)
    found = body.get("feedback")
    feedback: dict[str, Any] = found if isinstance(found, dict) else {}
    return (str(feedback.get("forId", "")),), ((str(feedback["id"]),) if feedback.get("id") else ())


async def _read_body(receive, send) -> Optional[bytes]:
    """The whole request body, read up to MAX_FEEDBACK_BYTES; None when the client went away or the body was over
    the limit (then answered 413 here)."""
    chunks, size, more = [], 0, True
    while more:
        message = await receive()
        if message["type"] != "http.request":
            return None  # the client went away
        chunks.append(message.get("body", b""))
        size += len(chunks[-1])
        if size > MAX_FEEDBACK_BYTES:
            await send_error(send, BodyTooLargeError(f"a feedback body holds at most {MAX_FEEDBACK_BYTES:,} bytes"))
            return None
        more = message.get("more_body", False)
    return b"".join(chunks)


class FeedbackOwnerCheck:
    """Pure ASGI: a PUT or DELETE /feedback whose message or feedback is in another user's chat gets 404 (as an
    unknown one would: ids of others' chats are not confirmed). ``history`` gives the chat store, or None."""

    def __init__(self, app, history: Callable[[], Optional[Any]], root_path: str = "") -> None:
        self.app, self.history, self.root_path = app, history, root_path

    async def __call__(self, scope, receive, send) -> None:
        store = self.history()
        if (scope["type"] != "http" or scope.get("method") not in ("PUT", "DELETE") or store is None
                or local_path(scope.get("path", ""), self.root_path) != "/feedback"):
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        # Chainlit takes the login from the cookie, else from an Authorization: Bearer header: check either.
        token = request_login_token(headers) or bearer_token(headers)
        user = logged_in_identifier(token) if token else None
        if user is None:  # not logged in: Chainlit answers 401 itself
            await self.app(scope, receive, send)
            return
        body = await _read_body(receive, send)
        if body is None:
            return
        try:
            parsed = json.loads(body)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict):
            step_ids, feedback_ids = _ids(parsed, scope["method"])
            if await store.layer.owners_of(step_ids, feedback_ids) - {user}:
                await send_error(send, NotFoundError("no such message or feedback"))
                return
        replayed = False

        async def replay() -> dict:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)
