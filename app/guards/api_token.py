"""With --auth-token set, /metrics and /v1/* need ``Authorization: Bearer <token>`` (what OpenAI clients and
Prometheus send); the UI's own routes use the login instead."""
from __future__ import annotations

import hmac
from typing import Optional

from pydantic import SecretStr
from starlette.datastructures import Headers

from app.errors import AuthenticationError
from app.guards.requests import bearer_token, local_path, send_error


def needs_token(path: str) -> bool:
    return path == "/metrics" or path.startswith("/v1/")


def token_matches(headers: Headers, token: SecretStr) -> bool:
    sent = bearer_token(headers)
    return sent is not None and hmac.compare_digest(sent.encode(), token.get_secret_value().encode())


class ApiTokenCheck:
    """Pure ASGI: refuses /metrics and /v1/* without the Bearer token (401, the one error body)."""

    def __init__(self, app, token: Optional[SecretStr], root_path: str = "") -> None:
        self.app, self.token, self.root_path = app, token, root_path

    async def __call__(self, scope, receive, send) -> None:
        if (self.token is not None and scope["type"] == "http"
                and needs_token(local_path(scope.get("path", ""), self.root_path))
                and not token_matches(Headers(scope=scope), self.token)):
            await send_error(send, AuthenticationError("missing or wrong bearer token (--auth-token)"),
                             [(b"www-authenticate", b"Bearer")])
            return
        await self.app(scope, receive, send)
