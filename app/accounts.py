"""Per-person logins: each user's name and an Argon2id hash of their own secret, in ``users.json``.

``python launch.py users add|list|remove`` edits the file; the running app re-reads it when it changes, so a
removed user or a changed secret ends that person's logins at their next request (app/guards/login.py) and
closes their open chat sockets (app/guards/account_sockets.py).
The file lives in the data directory next to chats.db and is readable by its owner only (0600), in a
folder of mode 0700. Hashing: argon2-cffi (the reference Argon2 bindings, what Open WebUI-style apps and
Django use), not a hand-made scheme.

Every change reads, edits and replaces the file under one lock (``users.json.lock``, filelock: the library vLLM
already installs, an OS lock released when the process dies): six ``users add`` run at once used to leave 2-5
users in the file, and a removed user came back in 2 of 10 tries (issue 36 N4, docs/security.md). The write
stays atomic (a new file renamed over the old), so the running app, which reads without the lock, never sees
half a file.
"""
from __future__ import annotations

import hashlib
import json
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Optional

from app.errors import AccountError
from app.private_files import PRIVATE_FILE_MODE, data_folder, make_private_folder, replace_private

if TYPE_CHECKING:
    from app.settings import HistorySettings

USERS_FILE_NAME = "users.json"
FILE_FORMAT = 1
NAME_RULE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@-]{0,63}")
NAME_RULE_TEXT = "1-64 characters: letters, digits and . _ @ -, starting with a letter or digit"
MIN_SECRET_CHARS, MAX_SECRET_CHARS = 8, 1024
MAX_FILE_BYTES = 4 * 2**20  # tens of thousands of users; checked before the file is read
# A change holds the lock for a read and a write of a small file (milliseconds); waiting longer than this means
# another command is stuck (a full disk, a frozen terminal), and the user gets one line instead of a hang.
LOCK_WAIT_S = 30.0
# Argon2id at argon2-cffi's defaults (RFC 9106's second recommendation: 64 MiB, 3 passes) costs ~0.1 s and
# 64 MiB per check, so at most two checks run at once whatever arrives: a login burst cannot take the memory.
_CHECKS_AT_ONCE = threading.BoundedSemaphore(2)


def check_name(name: str) -> str:
    if not NAME_RULE.fullmatch(name):
        raise AccountError(f"user name {name[:80]!r} is not allowed: {NAME_RULE_TEXT}")
    return name


def check_secret(secret: str) -> str:
    if not MIN_SECRET_CHARS <= len(secret) <= MAX_SECRET_CHARS:
        raise AccountError(f"the secret has {len(secret):,} characters; it needs {MIN_SECRET_CHARS} to "
                           f"{MAX_SECRET_CHARS:,}")
    return secret


def login_stamp(secret_hash: str) -> str:
    """A short fingerprint of the stored hash, carried in each login: a new secret gives a new stamp, so the
    logins made with the old one stop working."""
    return hashlib.sha256(secret_hash.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Account:
    name: str
    secret_hash: str
    created: str  # ISO 8601, UTC

    @property
    def stamp(self) -> str:
        return login_stamp(self.secret_hash)


@dataclass(frozen=True)
class Added:
    """What ``Accounts.add`` did: the account, and whether it is the first user (none existed before it)."""

    account: Account
    first: bool


class Accounts:
    """The users file. Reads are cached by the file's change time and size; writes replace it atomically."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._cache: tuple[Optional[tuple[int, int]], dict[str, Account]] = (None, {})
        from argon2 import PasswordHasher

        self._hasher = PasswordHasher()
        self._unknown_user_hash = self._hasher.hash("no such user: checked anyway, to take the same time")

    @classmethod
    def of(cls, history: HistorySettings) -> Accounts:
        """The users file of this data directory (--data-dir, else the user data directory)."""
        return cls(data_folder(history) / USERS_FILE_NAME)

    # ----- reading --------------------------------------------------------------------------------------
    def all(self) -> dict[str, Account]:
        try:
            info = self.path.stat()
        except FileNotFoundError:
            return {}
        except OSError as err:
            raise AccountError(f"cannot read {self.path}: {err.strerror}") from None
        version = (info.st_mtime_ns, info.st_size)
        if self._cache[0] != version:
            self._cache = (version, self._read(info.st_size))
        return self._cache[1]

    def _read(self, size: int) -> dict[str, Account]:
        if size > MAX_FILE_BYTES:
            raise AccountError(f"{self.path} is {size:,} bytes; a users file holds at most {MAX_FILE_BYTES:,}")
        try:
            data = json.loads(self.path.read_bytes())
            if data.get("format") != FILE_FORMAT:
                raise ValueError(f"format {data.get('format')!r}, expected {FILE_FORMAT}")
            return {name: Account(check_name(name), str(entry["hash"]), str(entry.get("created", "")))
                    for name, entry in data["users"].items()}
        except (ValueError, KeyError, TypeError, AttributeError, AccountError) as err:
            raise AccountError(f"{self.path} cannot be read ({type(err).__name__}: {err}); fix or remove it, "
                               "then add the users again") from None

    def stamp_of(self, name: str) -> Optional[str]:
        account = self.all().get(name)
        return account.stamp if account else None

    def check(self, name: str, secret: str) -> Optional[Account]:
        """The account when ``secret`` is its secret, else None. An unknown name costs one hash check too, so
        the time taken does not tell which names exist. Blocking (~0.1 s): call it off the event loop."""
        from argon2.exceptions import InvalidHashError, VerificationError

        account = self.all().get(name) if NAME_RULE.fullmatch(name) else None
        if not MIN_SECRET_CHARS <= len(secret) <= MAX_SECRET_CHARS:
            secret = ""  # still hashed once below: a too-long secret must not cost more than a short one
        with _CHECKS_AT_ONCE:
            try:
                self._hasher.verify(account.secret_hash if account else self._unknown_user_hash, secret)
            except (VerificationError, InvalidHashError):
                return None
        return account if account and secret else None

    # ----- writing (launch.py users ...) ----------------------------------------------------------------
    def check_new(self, name: str, replace: bool = False) -> None:
        """Refuse a name before its secret is asked for (checked again under the lock when it is written)."""
        check_name(name)
        if name in self.all() and not replace:
            raise AccountError(f"user {name} already exists; to give them a new secret: "
                               f"python launch.py users add {name} --reset")

    def add(self, name: str, secret: str, replace: bool = False) -> Added:
        from datetime import datetime, timezone

        check_name(name)
        # Hashed before the lock is taken (~0.1 s): others' changes wait only for the read and the write.
        account = Account(name, self._hasher.hash(check_secret(secret)),
                          datetime.now(timezone.utc).isoformat(timespec="seconds"))
        with self._editing() as users:
            first = not users
            if name in users and not replace:
                raise AccountError(f"user {name} already exists; to give them a new secret: "
                                   f"python launch.py users add {name} --reset")
            users[name] = account
        return Added(account, first)

    def remove(self, name: str) -> None:
        with self._editing() as users:
            if users.pop(name, None) is None:
                raise AccountError(f"no user {name}; the users are: {', '.join(sorted(users)) or 'none yet'}")

    @contextmanager
    def _editing(self) -> Iterator[dict[str, Account]]:
        """The users as the file holds them now, read under the lock; what the block leaves in the dict is
        written before the lock is let go. An error in the block writes nothing."""
        from filelock import FileLock, Timeout

        make_private_folder(self.path.parent)
        lock = FileLock(self.path.with_name(self.path.name + ".lock"), timeout=LOCK_WAIT_S, mode=PRIVATE_FILE_MODE)
        try:
            lock.acquire()
        except Timeout:
            raise AccountError(f"another `users` command has held {lock.lock_file} for {LOCK_WAIT_S:.0f} s; "
                               "nothing was changed: try again when it is done") from None
        try:
            self._cache = (None, {})  # another process may have written within our cache's mtime resolution
            users = dict(self.all())
            yield users
            self._write(users)
        finally:
            lock.release()

    def _write(self, users: dict[str, Account]) -> None:
        body = json.dumps({"format": FILE_FORMAT, "users": {
            a.name: {"hash": a.secret_hash, "created": a.created} for a in users.values()}}, indent=2)
        replace_private(self.path, body + "\n")  # the new list appears whole or not at all
