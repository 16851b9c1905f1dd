"""Who may log in to the UI, and as whom: from the settings and the users file, read again as it changes.

- accounts: ``launch.py users add`` made at least one user; each logs in with their own name and secret.
- token: no users, ``--auth-token`` set: one person. Any name with the token logs in as the same single
  user, so a name can never be claimed by whoever else holds the token (docs/security.md, "Claimed names").
- local: loopback, no users, no token: the person at this machine, logged in without a login page.
- open: another address with --insecure-no-auth and no users: nobody is told apart, so no history.

A user added while an app runs in the local or token mode takes over at once (the mode is the users file's, not
the start's): the login page then asks for a name and that user's secret, and the logins of the local mode or the
token end. `users add` said "the running app sees it at once" while such an app let anyone in until a restart
(issue 35 item 6). An app started open (--insecure-no-auth) keeps no history and has no login machinery: it needs
a restart to ask for logins.
"""
from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
import os
import secrets
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Optional

from pydantic import SecretStr

from app.accounts import Accounts
from app.errors import AccountError

log = logging.getLogger("ernie_chat.login")
LOCAL_USER = "local"  # the single person of the token and local modes; their chats are kept under this name


def chat_owners(settings: Any) -> list[str]:
    """The names chats can be kept under here, each one whose sidebar shows them: every account's when users
    exist, else the one local user's (loopback and --auth-token log in as it). ``settings``: AppSettings."""
    accounts = Accounts.of(settings.history).all()
    return sorted(accounts) if accounts else [LOCAL_USER]


class LoginMode(str, Enum):
    ACCOUNTS = "accounts"
    TOKEN = "token"
    LOCAL = "local"
    OPEN = "open"


@dataclass(frozen=True)
class Identity:
    """A logged-in person: the name their chats are kept under, and what their login token carries."""

    name: str
    metadata: dict[str, Any] = field(default_factory=dict)


def _lowest_cpu_priority() -> None:
    """Run this thread (and the threads Argon2 starts from it, which inherit it on Linux) at nice 19."""
    with contextlib.suppress(AttributeError, OSError):  # no per-thread priority on this system: run as is
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)


def login_checks() -> ThreadPoolExecutor:
    """Where secrets are hashed: one thread of its own at the lowest CPU priority. A login flood once filled the
    default thread pool (where the chat builds its prompts) and took the CPU from the engine: answers took
    12.8-20.6 s instead of under 1.7 s (issue 36, N3). One check at a time also bounds their memory (64 MiB each)."""
    return ThreadPoolExecutor(max_workers=1, thread_name_prefix="login-checks", initializer=_lowest_cpu_priority)


@dataclass(frozen=True)
class LoginPolicy:
    start_mode: LoginMode  # the mode the app started in; ``mode`` is the one in force now
    accounts: Optional[Accounts] = None
    token: Optional[SecretStr] = None
    checks: ThreadPoolExecutor = field(default_factory=login_checks, compare=False, repr=False)

    @classmethod
    def from_settings(cls, settings: Any) -> LoginPolicy:
        """``settings`` is app.settings.AppSettings. Raises AccountError (one line) for an unreadable users
        file, before anything starts."""
        server = settings.server
        accounts = Accounts.of(settings.history)
        if accounts.all():
            return cls(LoginMode.ACCOUNTS, accounts, server.auth_token)
        if server.auth_token is not None:
            return cls(LoginMode.TOKEN, accounts, server.auth_token)
        return cls(LoginMode.LOCAL if server.is_loopback else LoginMode.OPEN, accounts)

    @property
    def mode(self) -> LoginMode:
        """The mode in force now: accounts as soon as the users file holds a user (its change time is read on each
        call, the file only when it changed), else the start's."""
        if self.start_mode in (LoginMode.LOCAL, LoginMode.TOKEN) and self.accounts is not None:
            try:
                if self.accounts.all():
                    return LoginMode.ACCOUNTS
            except AccountError as err:  # broken while running: nobody logs in until it is fixed
                log.error("logins refused: %s", err)
                return LoginMode.ACCOUNTS
        return self.start_mode

    @property
    def has_login_page(self) -> bool:
        """Whether this run may show the login page: users or a token, or loopback, where a user may be added
        while it runs. The login rules (app/guards/login.py) and the socket checks are installed for it."""
        return self.start_mode is not LoginMode.OPEN

    @property
    def asks_for_login(self) -> bool:
        """Whether the login page asks for a name and secret now (else the local user is logged in without it)."""
        return self.mode in (LoginMode.ACCOUNTS, LoginMode.TOKEN)

    @property
    def tells_users_apart(self) -> bool:
        """Whether chats can be kept per person: never when anyone who reaches the port is the same user."""
        return self.mode is not LoginMode.OPEN

    def local_identity(self) -> Identity:
        return Identity(LOCAL_USER, {"provider": LoginMode.LOCAL.value})

    async def check(self, name: str, secret: str) -> Optional[Identity]:
        """The identity a login form's name and secret prove, or None. Each login carries a fresh nonce:
        Chainlit's token holds only the user and the second it was made, so two logins in one second were
        the same token, and logging one out ended both."""
        nonce = secrets.token_hex(8)
        mode = self.mode
        if mode is LoginMode.TOKEN and self.token is not None:
            if hmac.compare_digest(secret.encode(), self.token.get_secret_value().encode()):
                return Identity(LOCAL_USER, {"provider": LoginMode.TOKEN.value, "login": nonce})
            return None
        if mode is LoginMode.ACCOUNTS and self.accounts is not None:
            try:
                account = await asyncio.get_running_loop().run_in_executor(  # ~0.1 s of hashing
                    self.checks, self.accounts.check, name, secret)
            except AccountError as err:
                log.error("nobody can log in: %s", err)
                return None
            if account is None:
                return None
            return Identity(account.name, {"provider": LoginMode.ACCOUNTS.value, "stamp": account.stamp,
                                           "login": nonce})
        return None

    def still_valid(self, claims: dict[str, Any]) -> bool:
        """Whether a login token's claims (its signature is Chainlit's to check) may still be used: made in this
        mode, and for an account, one that still exists with the secret it was made with."""
        metadata = claims.get("metadata") or {}
        mode = self.mode
        if not isinstance(metadata, dict) or metadata.get("provider") != mode.value:
            return False
        if mode is not LoginMode.ACCOUNTS or self.accounts is None:
            return True
        try:
            return self.accounts.stamp_of(str(claims.get("identifier", ""))) == metadata.get("stamp")
        except AccountError as err:  # the file broke while running: nobody gets in until it is fixed
            log.error("logins refused: %s", err)
            return False
