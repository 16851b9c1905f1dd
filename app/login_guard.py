"""The UI login (--auth-token): failed attempts slow down per client, logout ends the session for good.

Issue 16: 2,000 wrong passwords went through in 3.4 s with no slowdown; Chainlit's login cookie lived 15
days and still worked after logout (its /logout only asks the browser to forget the cookie; the signed
token stays valid until it expires). ``LoginGuard`` is plain ASGI in front of Chainlit's /login and
/logout; ``FailedLogins`` and ``RevokedTokens`` hold the rules and are tested without a server.
"""
from __future__ import annotations

import hashlib
import json
import logging
import math
import time
from collections import OrderedDict
from collections.abc import Callable
from http.cookies import CookieError, SimpleCookie
from typing import Optional

log = logging.getLogger("ernie_chat.login")
AUTH_COOKIE = "access_token"  # Chainlit's default name (CHAINLIT_AUTH_COOKIE_NAME); long tokens are split into _0, _1


class FailedLogins:
    """Per client: the first ``free`` failures cost nothing, then each one doubles the wait (1 s, 2 s, 4 s,
    ... up to ``max_delay``) before the next attempt is even looked at. A success clears the client."""

    def __init__(self, free: int = 5, max_delay: float = 300.0, forget_after: float = 3600.0,
                 max_clients: int = 10_000, clock: Callable[[], float] = time.monotonic) -> None:
        self.free, self.max_delay, self.forget_after = free, max_delay, forget_after
        self.max_clients, self.clock = max_clients, clock
        self._clients: OrderedDict[str, tuple[int, float]] = OrderedDict()  # client -> (failures, last failure)

    def wait_left(self, client: str) -> float:
        """Seconds this client must still wait before its next attempt is checked (0: go ahead)."""
        entry = self._clients.get(client)
        if entry is None:
            return 0.0
        failures, last = entry
        now = self.clock()
        if now - last > self.forget_after:
            del self._clients[client]
            return 0.0
        return max(0.0, last + self.delay_after(failures) - now)

    def delay_after(self, failures: int) -> float:
        if failures < self.free:
            return 0.0
        return min(self.max_delay, 2.0 ** min(failures - self.free, 64))  # 2.0 ** 1024 overflows

    def failed(self, client: str) -> None:
        failures = self._clients.pop(client, (0, 0.0))[0] + 1
        self._clients[client] = (failures, self.clock())
        while len(self._clients) > self.max_clients:  # a bounded table: many addresses cannot grow memory
            self._clients.popitem(last=False)

    def succeeded(self, client: str) -> None:
        self._clients.pop(client, None)


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def _expiry(token: str, fallback: float) -> float:
    """The token's own ``exp`` (read, not verified: it only bounds how long we remember it)."""
    try:
        import jwt

        return float(jwt.decode(token, options={"verify_signature": False})["exp"])
    except Exception:
        return fallback


class RevokedTokens:
    """Login tokens ended by /logout, remembered (as hashes) until they would have expired anyway."""

    def __init__(self, lifetime: float, clock: Callable[[], float] = time.time) -> None:
        self.lifetime, self.clock = lifetime, clock
        self._until: dict[str, float] = {}

    def revoke(self, token: str) -> None:
        now = self.clock()
        self._until = {k: v for k, v in self._until.items() if v > now}
        self._until[_digest(token)] = _expiry(token, now + self.lifetime)

    def is_revoked(self, token: str) -> bool:
        until = self._until.get(_digest(token))
        return until is not None and until > self.clock()


def _cookies(headers: list[tuple[bytes, bytes]]) -> dict[str, str]:
    jar: dict[str, str] = {}
    for key, value in headers:
        if key.lower() == b"cookie":
            try:
                parsed = SimpleCookie(value.decode("latin-1"))
            except CookieError:
                continue
            jar.update({name: morsel.value for name, morsel in parsed.items()})
    return jar


def login_token(headers: list[tuple[bytes, bytes]]) -> Optional[str]:
    """Chainlit's login token from the cookie (whole or in chunks), as chainlit.auth.cookie reads it."""
    jar = _cookies(headers)
    if AUTH_COOKIE in jar:
        return jar[AUTH_COOKIE]
    chunks, i = [], 0
    while f"{AUTH_COOKIE}_{i}" in jar:
        chunks.append(jar[f"{AUTH_COOKIE}_{i}"])
        i += 1
    return "".join(chunks) or None


def _without_login(headers: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """The headers minus the login cookie and any Bearer header: the request arrives logged out."""
    kept = []
    for key, value in headers:
        if key.lower() == b"cookie":
            parts = [p for p in value.decode("latin-1").split(";")
                     if not p.strip().startswith(AUTH_COOKIE)]
            if parts:
                kept.append((key, ";".join(parts).encode("latin-1")))
        elif key.lower() != b"authorization":
            kept.append((key, value))
    return kept


def _bearer(headers: list[tuple[bytes, bytes]]) -> Optional[str]:
    for key, value in headers:
        if key.lower() == b"authorization" and value[:7].lower() == b"bearer ":
            return value[7:].decode("latin-1").strip()
    return None


class LoginGuard:
    """Pure ASGI: rate-limits POST /login per client; makes tokens ended by POST /logout useless."""

    def __init__(self, app, failures: FailedLogins, revoked: RevokedTokens, root_path: str = "") -> None:
        self.app, self.failures, self.revoked, self.root_path = app, failures, revoked, root_path

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        headers = scope.get("headers", [])
        token, bearer = login_token(headers), _bearer(headers)
        if any(t and self.revoked.is_revoked(t) for t in (token, bearer)):
            scope = {**scope, "headers": _without_login(headers)}
            token = None
        path = scope.get("path", "")
        if self.root_path and path.startswith(self.root_path):
            path = path[len(self.root_path):]
        if scope["type"] == "http" and scope.get("method") == "POST":
            if path == "/login":
                await self._login(scope, receive, send)
                return
            if path == "/logout" and token:
                self.revoked.revoke(token)
        await self.app(scope, receive, send)

    async def _login(self, scope, receive, send) -> None:
        client = (scope.get("client") or ("unknown", 0))[0]
        wait = self.failures.wait_left(client)
        if wait > 0:
            seconds = math.ceil(wait)
            body = json.dumps({"detail": f"too many failed logins; try again in {seconds} s"}).encode()
            await send({"type": "http.response.start", "status": 429,
                        "headers": [(b"content-type", b"application/json"), (b"retry-after", str(seconds).encode()),
                                    (b"content-length", str(len(body)).encode())]})
            await send({"type": "http.response.body", "body": body})
            return
        status = {}

        async def watch(message) -> None:
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
            await send(message)

        await self.app(scope, receive, watch)
        if status.get("code") == 401:
            self.failures.failed(client)
            log.warning("failed login from %s (next attempt checked in %.0f s)", client,
                        self.failures.wait_left(client))
        elif status.get("code", 500) < 400:
            self.failures.succeeded(client)


def install(app, server_settings) -> None:
    """With --auth-token: the login rules in front of Chainlit, and the login lifetime from the settings."""
    if server_settings.auth_token is None:
        return
    from chainlit.config import config

    # Chainlit signs its login token and sets its cookie for this long (its default: 15 days).
    config.project.user_session_timeout = server_settings.login_lifetime
    app.add_middleware(LoginGuard, failures=FailedLogins(), revoked=RevokedTokens(server_settings.login_lifetime),
                       root_path=server_settings.root_path)


def new_login_id() -> str:
    """A nonce for each login's token: Chainlit's token holds only the user and the second it was made, so
    two logins in one second were the same token, and a logout ended both (seen in the tests)."""
    import secrets

    return secrets.token_hex(8)
