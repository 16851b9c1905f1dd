"""How much one chat tab, and one user over all their tabs, may upload (``--max-uploads-per-session``,
``--max-upload-mb-per-session``, ``--max-uploads-per-user``, ``--max-upload-mb-per-user``).

Chainlit's upload route (``POST /project/file?session_id=...``) kept every file a tab sent until 10 minutes after
the tab closed, with no count or size over them all: 40 x 19 MiB went into one tab in 8.5 s (873 MiB), 24 sent at
once held 1,329 MiB (issue 36, N7). Each upload is counted here when it arrives, before Chainlit reads a byte, by
its Content-Length (uploads still arriving count too: those 24 were all in flight at once); one that did not land
is taken off again. A tab's uploads are deleted when the tab closes (app/ui/chat.py on_chat_end).

Chainlit's own session files (the status panel's text) are not uploads and are not counted: only what passed
this route is.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Optional
from urllib.parse import parse_qs

from app.chainlit_internals import CHAINLIT_FILE_ROUTE, session_user
from app.errors import BodyTooLargeError
from app.guards.requests import local_path, send_error

MIB = 1 << 20


def _flag(name: str) -> str:
    """The setting's flag and its allowed values, from its field (the one place its bounds are written)."""
    from app.settings import ChatSettings, flag_name

    rules = ChatSettings.model_fields[name].metadata
    low = next(rule.ge for rule in rules if hasattr(rule, "ge"))
    high = next(rule.le for rule in rules if hasattr(rule, "le"))
    return f"{flag_name(name)}, {low} to {high}"


# The setting each limit comes from (UploadLimits.from_settings): named in the line that refuses.
_LIMIT_OF = {"max_uploads_per_session": "files_per_session", "max_upload_mb_per_session": "mib_per_session",
             "max_uploads_per_user": "files_per_user", "max_upload_mb_per_user": "mib_per_user"}


@dataclass(frozen=True)
class UploadLimits:
    files_per_session: int
    mib_per_session: int
    files_per_user: int
    mib_per_user: int

    @classmethod
    def from_settings(cls, chat) -> UploadLimits:  # chat: app.settings.ChatSettings
        return cls(**{limit: getattr(chat, name) for name, limit in _LIMIT_OF.items()})


@dataclass
class _Held:
    user: Optional[str]
    files: dict[str, int] = field(default_factory=dict)  # Chainlit's file id -> bytes, of uploads that landed
    arriving: list[int] = field(default_factory=list)  # bytes of uploads still arriving

    @property
    def count(self) -> int:
        return len(self.files) + len(self.arriving)

    @property
    def size(self) -> int:
        return sum(self.files.values()) + sum(self.arriving)


class UploadLedger:
    """What each open tab holds of uploads, and who it belongs to."""

    def __init__(self, limits: UploadLimits) -> None:
        self.limits = limits
        self._sessions: dict[str, _Held] = {}

    def refusal(self, session_id: str, user: Optional[str], size: int) -> Optional[str]:
        """The one line refusing an upload of ``size`` bytes into ``session_id``, or None when it fits."""
        lim = self.limits
        tab = self._sessions.get(session_id) or _Held(user)
        mine = [held for held in self._sessions.values() if held.user == user]
        checks = (
            (tab.count + 1 > lim.files_per_session,
             f"this chat tab has {tab.count} files uploaded", "max_uploads_per_session"),
            (tab.size + size > lim.mib_per_session * MIB,
             f"this chat tab has {tab.size / MIB:.1f} MiB uploaded, this file {size / MIB:.1f} MiB",
             "max_upload_mb_per_session"),
            (sum(h.count for h in mine) + 1 > lim.files_per_user,
             f"your open chat tabs have {sum(h.count for h in mine)} files uploaded", "max_uploads_per_user"),
            (sum(h.size for h in mine) + size > lim.mib_per_user * MIB,
             f"your open chat tabs have {sum(h.size for h in mine) / MIB:.1f} MiB uploaded, this file "
             f"{size / MIB:.1f} MiB", "max_upload_mb_per_user"),
        )
        over = next(((held, name) for failed, held, name in checks if failed), None)
        if over is None:
            return None
        held, name = over
        return f"upload refused: {held}; at most {getattr(lim, _LIMIT_OF[name])} ({_flag(name)})"

    def arriving(self, session_id: str, user: Optional[str], size: int) -> None:
        self._sessions.setdefault(session_id, _Held(user)).arriving.append(size)

    def arrived(self, session_id: str, size: int, file_id: Optional[str]) -> None:
        """The upload of ``size`` bytes ended: kept under ``file_id`` when it landed, else no longer counted."""
        held = self._sessions.get(session_id)
        if held is None:  # the tab closed while it arrived: on_chat_end has already deleted its uploads
            return
        held.arriving.remove(size)
        if file_id is not None:
            held.files[file_id] = size

    def session_ended(self, session_id: str) -> list[str]:
        """Forget a closed tab; the ids of the files it uploaded, for deleting."""
        held = self._sessions.pop(session_id, None)
        return list(held.files) if held else []


class UploadQuota:
    """Pure ASGI, in front of Chainlit's upload route: refuses (413, one line naming the flag) an upload past the
    tab's or the user's share before Chainlit reads it, and records what landed."""

    def __init__(self, app, ledger: UploadLedger, max_file_bytes: int, root_path: str = "") -> None:
        self.app, self.ledger, self.max_file_bytes, self.root_path = app, ledger, max_file_bytes, root_path

    async def __call__(self, scope, receive, send) -> None:
        if not (scope["type"] == "http" and scope.get("method") == "POST"
                and local_path(scope.get("path", ""), self.root_path) == CHAINLIT_FILE_ROUTE):
            await self.app(scope, receive, send)
            return
        session_id = (parse_qs(scope.get("query_string", b"").decode("latin-1")).get("session_id") or [""])[0]
        found, user = session_user(session_id)
        if not found:  # Chainlit answers an unknown session itself (404)
            await self.app(scope, receive, send)
            return
        length = dict(scope.get("headers") or ()).get(b"content-length")
        # No Content-Length (a chunked body): counted as the largest file the body-size guard lets through.
        size = int(length) if length and length.isdigit() else self.max_file_bytes
        line = self.ledger.refusal(session_id, user, size)
        if line is not None:
            await send_error(send, BodyTooLargeError(line), for_chainlits_page=True)  # the page shows it
            return
        self.ledger.arriving(session_id, user, size)
        response: dict = {"status": 0, "body": b""}

        async def watch(message) -> None:
            if message["type"] == "http.response.start":
                response["status"] = message["status"]
            elif message["type"] == "http.response.body":
                response["body"] += message.get("body", b"")
            await send(message)

        try:
            await self.app(scope, receive, watch)
        finally:
            self.ledger.arrived(session_id, size, _file_id(response))


def _file_id(response: dict) -> Optional[str]:
    """The id Chainlit gave the file it kept (its 200 answer is ``{"id": ...}``); None when it kept none."""
    if response["status"] != 200:
        return None
    try:
        return str(json.loads(response["body"])["id"])
    except (ValueError, KeyError, TypeError):
        return None
