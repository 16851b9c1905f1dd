"""The UI login: failed attempts slow down per client, logout ends the session for good, and a login stops
working once its user is removed or given a new secret.

2,000 wrong passwords once went through in 3.4 s with no slowdown, and Chainlit's login cookie lived 15 days
and still worked after logout (its /logout only asks the browser to forget the cookie; the signed token
stays valid until it expires): docs/security.md, "Login guessing" and "Logout". ``LoginGuard`` is plain
ASGI in front of Chainlit's /login, /logout, every route and the socket; ``FailedLogins`` and
``RevokedTokens`` hold the rules and are tested without a server.
"""
from __future__ import annotations

import asyncio
import hashlib
import logging
import math
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Optional

from starlette.datastructures import Headers
from starlette.requests import cookie_parser

from app.chainlit_internals import auth_cookie_name, login_token, set_login_lifetime
from app.errors import TooManyLogins
from app.guards.identity import LoginPolicy
from app.guards.requests import bearer_token, local_path, send_error

log = logging.getLogger("ernie_chat.login")
class FailedLogins:
    """Per client: the first ``free`` failures cost nothing, then each one doubles the wait (1 s, 2 s, 4 s,
    ... up to ``max_delay``) before the next attempt is even looked at. A success clears the client.

    The guard counts an attempt as a failure when it lets it through, before its secret is hashed: counted after
    the hash, 200 wrong secrets sent at once all passed the check while none had failed yet, and all 200 were
    hashed (24 s; issue 36, N3)."""

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


def unverified_claims(token: str) -> dict[str, Any]:
    """A login token's claims, read without checking its signature: only to decide whether to drop it (which
    can only take access away); Chainlit checks the signature of every token that stays."""
    try:
        import jwt

        claims = jwt.decode(token, options={"verify_signature": False})
        return claims if isinstance(claims, dict) else {}
    except Exception:
        return {}


def request_login_token(headers: Headers) -> Optional[str]:
    """The login token the request carries: Chainlit's cookie (whole or in chunks)."""
    return login_token(cookie_parser(headers.get("cookie", "")))


def _without_login(headers: Headers) -> list[tuple[bytes, bytes]]:
    """The headers minus the login cookie and any Bearer header: the request arrives logged out."""
    name = auth_cookie_name()
    kept = []
    for key, value in headers.raw:
        if key == b"cookie":
            parts = [p for p in value.decode("latin-1").split(";") if not p.strip().startswith(name)]
            if parts:
                kept.append((key, ";".join(parts).encode("latin-1")))
        elif key != b"authorization":
            kept.append((key, value))
    return kept


# Logins being checked at once, from every client together; more get 429 at once. Checks run one at a time
# (app/guards/identity.py), ~0.1 s each: a login waits at most about a second behind others, and a flood from many
# addresses queues no more work than this.
MAX_LOGINS_AT_ONCE = 8
# Seconds a refusal is held before it is answered (too many failures: at most the client's wait).
REFUSAL_HOLD_S = 1.0


class LoginGuard:
    """Pure ASGI: rate-limits POST /login per client and in all; drops login tokens ended by POST /logout and those
    the login policy no longer accepts (a removed user, a changed secret), on every route and the socket.

    The client is the connection's address; X-Forwarded-For names it only from --forwarded-allow-ips (uvicorn
    rewrites the scope's client before this sees it)."""

    def __init__(self, app, policy: LoginPolicy, failures: FailedLogins, revoked: RevokedTokens,
                 root_path: str = "", max_at_once: int = MAX_LOGINS_AT_ONCE,
                 refusal_hold_s: float = REFUSAL_HOLD_S) -> None:
        self.app, self.policy, self.failures, self.revoked = app, policy, failures, revoked
        self.root_path, self.max_at_once, self.refusal_hold_s = root_path, max_at_once, refusal_hold_s
        self.checking = 0

    def _ended(self, token: str) -> bool:
        if self.revoked.is_revoked(token):
            return True
        claims = unverified_claims(token)  # {} for what is no login token at all (the /v1 Bearer key): not ours to drop
        return bool(claims) and not self.policy.still_valid(claims)

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        token = request_login_token(headers)
        if any(t and self._ended(t) for t in (token, bearer_token(headers))):
            scope = {**scope, "headers": _without_login(headers)}
            token = None
        path = local_path(scope.get("path", ""), self.root_path)
        if scope["type"] == "http" and scope.get("method") == "POST":
            if path == "/login":
                await self._login(scope, receive, send)
                return
            if path == "/logout" and token:
                self.revoked.revoke(token)
        await self.app(scope, receive, send)

    async def _login(self, scope, receive, send) -> None:
        client = (scope.get("client") or ("unknown", 0))[0]
        # Refusals are held before they are answered: a script that asked again on every refusal got ~300 of them a
        # second out of the app during a flood (bench/load_run.py, 2026-12-06), most of them "being checked". Held,
        # it gets about one a second per connection; the wait costs a sleeping task, no CPU.
        wait = self.failures.wait_left(client)
        if wait > 0:
            seconds = math.ceil(wait)
            await asyncio.sleep(min(wait, self.refusal_hold_s))
            await _too_many(send, seconds, f"too many failed logins; try again in {seconds} s")
            return
        if self.checking >= self.max_at_once:  # not counted against this client: nothing of it was tried
            await asyncio.sleep(self.refusal_hold_s)
            await _too_many(send, 1, f"{self.max_at_once} logins are being checked; try again in 1 s")
            return
        self.failures.failed(client)  # counted as it comes in, before its secret is hashed; a success clears it
        status = {}

        async def watch(message) -> None:
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
            await send(message)

        self.checking += 1
        try:
            await self.app(scope, receive, watch)
        finally:
            self.checking -= 1
        if status.get("code", 500) < 400:
            self.failures.succeeded(client)
        elif status.get("code") == 401:  # counted when it came in
            log.warning("failed login from %s (next attempt checked in %.0f s)", client,
                        self.failures.wait_left(client))


async def _too_many(send, seconds: int, line: str) -> None:
    await send_error(send, TooManyLogins(line), [(b"retry-after", str(seconds).encode())])


def install(app, policy: LoginPolicy, server_settings) -> None:
    """With a login page (users, or --auth-token): the login rules in front of Chainlit, and its lifetime."""
    if not policy.has_login_page:
        return
    set_login_lifetime(server_settings.login_lifetime)
    app.add_middleware(LoginGuard, policy=policy, failures=FailedLogins(),
                       revoked=RevokedTokens(server_settings.login_lifetime), root_path=server_settings.root_path)
