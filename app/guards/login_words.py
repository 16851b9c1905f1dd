"""A failed login says so in the page's language, not in Chainlit's code word.

Chainlit answers a wrong name or password with 401 ``{"detail": "credentialssignin"}``, and its page shows every
failed request in a toast as "<status text>: <detail>": "Unauthorized: credentialssignin" (issue 35 item 10). The
detail becomes the app's own line in the browser's language (its Accept-Language, which the page follows too);
the line in the form itself comes from .chainlit/translations (``auth.login.errors.unauthorized``).
"""
from __future__ import annotations

import json
from typing import Optional

from starlette.datastructures import Headers

from app.guards.requests import local_path
from app.i18n import t


class LoginWords:
    """Plain ASGI: rewrites the body of a 401 from POST /login; everything else passes untouched."""

    def __init__(self, app, root_path: str = "") -> None:
        self.app, self.root_path = app, root_path

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http" or scope.get("method") != "POST" \
                or local_path(scope.get("path", ""), self.root_path) != "/login":
            await self.app(scope, receive, send)
            return
        language = Headers(scope=scope).get("accept-language", "").split(",")[0].strip()
        held: list[Optional[dict]] = []  # the 401's start, held until its body is replaced (the length changes)

        async def reword(message) -> None:
            if message["type"] == "http.response.start" and message["status"] == 401:
                held.append(message)
                return
            if not held or message["type"] != "http.response.body":
                await send(message)
                return
            if held[0] is not None:  # Chainlit's body (in one piece or more) gives way to the app's line
                body = json.dumps({"detail": t(language, "login_failed")}, ensure_ascii=False).encode()
                headers = [(k, v) for k, v in held[0].get("headers", []) if k.lower() != b"content-length"]
                await send({**held[0], "headers": [*headers, (b"content-length", str(len(body)).encode())]})
                await send({"type": "http.response.body", "body": body})
                held[0] = None

        await self.app(scope, receive, reword)
