"""On loopback without users or a token: the person at this machine is logged in without a login page.

Chainlit shows its history sidebar only when the page has both a data layer and a logged-in user
(``requireLogin && dataPersistence`` in its frontend). Header auth makes ``requireLogin`` true; the page then
first asks ``/user``, and only without a valid cookie goes to ``/login`` (which would call header auth and
come back). ``LocalUserCookie`` sets that cookie on the page itself, so the login page is never shown, also
after a restart (a new signing secret).

Once a user is added while the app runs (`launch.py users add`), the local user's login ends: the cookie is no longer
given, and ``LoginModeFollower`` has Chainlit offer its login form instead of the header login (issue 35 item 6).
"""
from __future__ import annotations

from typing import Any

import chainlit as cl
from starlette.middleware.base import BaseHTTPMiddleware

from app.chainlit_internals import follow_login_mode, issue_login, logged_in_identifier, login_token
from app.guards.identity import Identity, LoginPolicy


def install_local_user(identity: Identity) -> None:
    """Chainlit's header auth: what makes the page require (and so show) a logged-in user. The cookie comes
    from ``LocalUserCookie``, which app/guards/__init__.py puts on the app."""

    @cl.header_auth_callback
    async def local_user(headers: Any) -> cl.User:
        return cl.User(identifier=identity.name, metadata=identity.metadata)


class LoginModeFollower:
    """Plain ASGI, before every request and socket of an app started without users: Chainlit offers the login that
    the users file asks for now (app/chainlit_internals.py ``follow_login_mode``)."""

    def __init__(self, app, policy: LoginPolicy) -> None:
        self.app, self.policy = app, policy

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] in ("http", "websocket"):
            follow_login_mode(self.policy.asks_for_login)
        await self.app(scope, receive, send)


class LocalUserCookie(BaseHTTPMiddleware):
    """On the HTML page, log the browser in as the local user when it has no valid login cookie, while no user
    exists."""

    def __init__(self, app, policy: LoginPolicy) -> None:
        super().__init__(app)
        self.policy = policy
        self.identity = policy.local_identity()

    async def dispatch(self, request, call_next):
        response = await call_next(request)
        if request.method != "GET" or not response.headers.get("content-type", "").startswith("text/html"):
            return response
        if self.policy.asks_for_login:  # a user was added while the app runs: the login page takes over
            return response
        token = login_token(request.cookies)
        if token is None or logged_in_identifier(token) != self.identity.name:  # expired, or from before a restart
            issue_login(request, response, self.identity.name, self.identity.metadata)
        return response
