"""Sessions end with the account: removing a user (`users remove`) or giving a new secret (`users add --reset`)
closes that person's open chat sockets, and their next socket event is refused at once.

HTTP requests with such a login were refused (app/guards/login.py), but Chainlit checks a socket's login only when
it connects: a removed user went on chatting over the tab already open, answered 0.64 s after `users remove` and
still 20 s later, and 1.19 s after `--reset` (issue 36 N2, docs/security.md). Two parts, because either alone
leaves a gap: each event is checked before Chainlit sees it (what the user sends next is refused the moment the
users file changes), and a watcher closes the sockets of ended logins a few times a second (an idle tab, or one
with an answer streaming, is closed without waiting for it to send something; closing it cancels its answers).
"""
from __future__ import annotations

import asyncio
import logging
from typing import Optional

from app.chainlit_internals import chat_socket_token, check_chat_socket_events, close_chat_socket, open_chat_sockets
from app.guards.identity import LoginPolicy
from app.guards.login import unverified_claims

log = logging.getLogger("ernie_chat.login")
# The watcher reads only the users file's change time (app/accounts.py caches the rest), so a short period is cheap.
WATCH_EVERY_S = 0.25


def login_ended(policy: LoginPolicy, token: Optional[str]) -> bool:
    """Whether the login a socket connected with no longer stands (its user removed, or given a new secret)."""
    claims = unverified_claims(token) if token else {}
    return bool(claims) and not policy.still_valid(claims)


def install(policy: LoginPolicy) -> None:
    """Check every chat socket event against the policy (with a login page: users, --auth-token, or loopback, where
    users may be added while the app runs)."""
    if policy.has_login_page:
        check_chat_socket_events(lambda sid: not login_ended(policy, chat_socket_token(sid)))
    else:
        check_chat_socket_events(lambda sid: True)  # nobody logs in: nothing to end


async def close_ended_logins(policy: LoginPolicy) -> int:
    """Close the open sockets whose login ended; how many."""
    closed = 0
    for sid, token in open_chat_sockets():
        if login_ended(policy, token):
            log.warning("closed the chat socket of %s: their login ended (user removed or given a new secret)",
                        unverified_claims(token or "").get("identifier", "?"))
            await close_chat_socket(sid)
            closed += 1
    return closed


async def keep_closing_ended_logins(policy: LoginPolicy, every_s: float = WATCH_EVERY_S) -> None:
    """The watcher, for the app's lifetime (app/server.py's lifespan); nothing to do without a login page."""
    if not policy.has_login_page:
        return
    while True:
        await asyncio.sleep(every_s)
        try:
            await close_ended_logins(policy)
        except Exception:  # noqa: BLE001 - one bad round (a users file being fixed) must not end the watching
            log.exception("checking the open chat sockets' logins failed; trying again")
