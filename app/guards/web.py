"""Who may talk to the app from a browser, and how much: Host, Origin, body size, /v1 content type, CSP.

Any web page the user visits can reach an app on localhost: it can open Chainlit's socket (python-socketio
is created with ``cors_allowed_origins=[]``, which turns its Origin check off), POST ``text/plain`` to /v1
without a CORS preflight, read answers through DNS rebinding (any Host header), or send a body too large to
hold (docs/security.md, rows "Cross-site socket" to "Outside images").

``WebGuard`` is plain ASGI, outside every other middleware, so it sees the websocket handshake too and
refuses before anything reads the body. The rules live in ``GuardPolicy``, a pure object the unit tests
drive directly.
"""
from __future__ import annotations

import logging
import socket
from dataclasses import dataclass, field
from typing import Optional
from urllib.parse import urlsplit

from starlette.datastructures import Headers

from app.chainlit_internals import CHAINLIT_FILE_ROUTE
from app.errors import (
    BadRequestError,
    BodyTooLargeError,
    ErnieChatError,
    RequestForbidden,
    UnsupportedMediaTypeError,
)
from app.guards.requests import CONTENT_SECURITY_POLICY, local_path, send_error

log = logging.getLogger("ernie_chat.web_guard")
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
WILDCARD_BINDS = frozenset({"0.0.0.0", "::", ""})
DEFAULT_PORTS = {"http": 80, "https": 443, "ws": 80, "wss": 443}


def _split_list(text: str) -> tuple[str, ...]:
    return tuple(item.strip() for item in text.split(",") if item.strip())


def host_name(host_header: str) -> str:
    """'Example.com.:8000' -> 'example.com', '[::1]:8000' -> '::1'."""
    host = host_header.strip().lower()
    if host.startswith("["):
        return host[1:host.find("]")] if "]" in host else host
    if host.count(":") == 1:
        host = host.split(":", 1)[0]
    return host.rstrip(".")


def _origin_key(scheme: str, netloc: str) -> Optional[tuple[str, str, int]]:
    """(scheme, host, port) with the scheme's default port filled in; None when it does not parse."""
    scheme = {"ws": "http", "wss": "https"}.get(scheme, scheme)
    try:
        parts = urlsplit(f"{scheme}://{netloc}")
        port = parts.port or DEFAULT_PORTS.get(scheme)
    except ValueError:
        return None
    if not parts.hostname or port is None:
        return None
    return scheme, parts.hostname.rstrip("."), port


def machine_names() -> set[str]:
    """This machine's host names and interface addresses: the Host a client uses when we bind to all."""
    names = {socket.gethostname().lower(), socket.getfqdn().lower()}
    try:
        import psutil

        for addresses in psutil.net_if_addrs().values():
            names.update(a.address.split("%", 1)[0].lower() for a in addresses
                         if a.family in (socket.AF_INET, socket.AF_INET6))
    except Exception:  # psutil missing or the interface list unreadable: names alone
        pass
    return names


@dataclass(frozen=True)
class GuardPolicy:
    """The rules. ``allowed_hosts`` / ``allowed_origins`` hold what the user added; '*' allows any."""

    bound_host: str
    allowed_hosts: tuple[str, ...] = ()
    allowed_origins: tuple[str, ...] = ()
    max_body_bytes: int = 8 * 2**20
    # Chainlit's upload route (POST /project/file) takes one attached file: --max-upload-mb, not --max-body-bytes
    # (Chainlit reads the whole body into memory and checks its own max_size_mb only afterwards). From the settings
    # (app/documents/limits.py upload_body_bytes); the default here only serves tests of the other rules.
    max_upload_bytes: int = 8 * 2**20
    root_path: str = ""
    extra_host_names: frozenset[str] = field(default_factory=frozenset)

    @classmethod
    def from_settings(cls, server, max_upload_bytes: int) -> GuardPolicy:
        extra = frozenset(machine_names()) if server.host in WILDCARD_BINDS else frozenset()
        return cls(bound_host=server.host, allowed_hosts=_split_list(server.allowed_hosts),
                   allowed_origins=tuple(o.rstrip("/") for o in _split_list(server.allowed_origins)),
                   max_body_bytes=server.max_body_bytes, max_upload_bytes=max_upload_bytes,
                   root_path=server.root_path, extra_host_names=extra)

    def body_limit(self, method: str, path: str) -> tuple[int, str]:
        """The most bytes this request's body may have, and the flag that sets it."""
        if method == "POST" and local_path(path, self.root_path) == CHAINLIT_FILE_ROUTE:
            return self.max_upload_bytes, "--max-upload-mb"
        return self.max_body_bytes, "--max-body-bytes"

    def host_allowed(self, host_header: Optional[str]) -> bool:
        if "*" in self.allowed_hosts:
            return True
        if not host_header:
            return False
        name = host_name(host_header)
        known = {"localhost", "127.0.0.1", "::1", host_name(self.bound_host), *self.extra_host_names,
                 *(host_name(h) for h in self.allowed_hosts)}
        return name in known

    def origin_allowed(self, origin: str, scheme: str, host_header: str) -> bool:
        """Same origin as the request (scheme, Host and port), or one the user listed."""
        origin = origin.strip().rstrip("/")
        if "*" in self.allowed_origins or origin in self.allowed_origins:
            return True
        sent = urlsplit(origin)
        key = _origin_key(sent.scheme, sent.netloc) if sent.scheme and sent.netloc else None
        return key is not None and key == _origin_key(scheme, host_header)

    def refusal(self, kind: str, method: str, path: str, scheme: str,
                headers: Headers) -> Optional[ErnieChatError]:
        """The error (one line) when the request must not reach the app; None when it may."""
        host = headers.get("host", "")
        if not self.host_allowed(host):
            return RequestForbidden(f"host {host_name(host)!r} is not served here; add it with --allowed-hosts "
                                    "(ERNIE_CHAT_ALLOWED_HOSTS)")
        path = local_path(path, self.root_path)
        origin = headers.get("origin")
        # Browsers send Origin on websocket handshakes and on every cross-origin POST; scripts and
        # OpenAI clients send none, and are not the attacker here (they could send any header).
        checks_origin = kind == "websocket" or method not in SAFE_METHODS or path.startswith("/ws/")
        if origin is not None and checks_origin and not self.origin_allowed(origin, scheme, host):
            return RequestForbidden(f"origin {origin!r} may not use this app; add it with --allowed-origins "
                                    "(ERNIE_CHAT_ALLOWED_ORIGINS)")
        if kind == "http" and method == "POST" and path.startswith("/v1/"):
            media = headers.get("content-type", "").split(";", 1)[0].strip().lower()
            if media != "application/json":
                # text/plain and form posts need no CORS preflight: refusing them stops blind cross-site POSTs.
                return UnsupportedMediaTypeError(f"content type {media or 'none'!r} is not accepted; "
                                                 "send application/json")
        if kind == "http":
            length = headers.get("content-length")
            if length is not None:
                if not length.strip().isdigit():
                    return BadRequestError(f"bad Content-Length {length!r}")
                limit, flag = self.body_limit(method, path)
                if int(length) > limit:
                    return BodyTooLargeError(f"request body of {int(length)} bytes is over the limit of "
                                             f"{limit} ({flag})")
        return None


class BodyTooLarge(Exception):
    """Raised inside the app's ``receive`` once a chunked body passes the limit: reading stops there."""


class WebGuard:
    """Pure ASGI middleware applying ``GuardPolicy`` to every HTTP request and websocket handshake."""

    def __init__(self, app, policy: GuardPolicy) -> None:
        self.app = app
        self.policy = policy

    async def __call__(self, scope, receive, send) -> None:
        kind = scope["type"]
        if kind not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        refusal = self.policy.refusal(kind, scope.get("method", "GET"), scope.get("path", ""),
                                      scope.get("scheme", "http"), Headers(scope=scope))
        if refusal is not None:
            log.warning("refused %s %s: %s", kind, scope.get("path", ""), refusal)
            if kind == "websocket":
                # Closing before accepting makes the server answer the handshake with 403.
                await send({"type": "websocket.close", "code": 1008})
            else:
                await send_error(send, refusal, [(b"connection", b"close")])
            return
        if kind == "websocket":
            await self.app(scope, receive, send)
            return
        await self._serve_http(scope, receive, send)

    async def _serve_http(self, scope, receive, send) -> None:
        limit, flag = self.policy.body_limit(scope.get("method", "GET"), scope.get("path", ""))
        body = _LimitedBody(receive, send, limit)
        try:
            await self.app(scope, body.receive, body.send)
        except BodyTooLarge:
            pass
        except Exception:
            if not body.exceeded:
                raise
        if body.exceeded and not body.started:
            log.warning("refused %s: chunked body over %d bytes", scope.get("path", ""), limit)
            await send_error(send, BodyTooLargeError(f"request body is over the limit of {limit} bytes "
                                                     f"({flag})"), [(b"connection", b"close")])


class _LimitedBody:
    """One request's receive and send, as the app behind the guard sees them: the body stops at ``limit`` bytes
    (BodyTooLarge, answered 413 by the guard), and every response carries the Content-Security-Policy."""

    def __init__(self, receive, send, limit: int) -> None:
        self._receive, self._send, self._limit = receive, send, limit
        self.received, self.exceeded, self.started = 0, False, False

    async def receive(self):
        message = await self._receive()
        if message["type"] == "http.request":
            self.received += len(message.get("body", b""))
            if self.received > self._limit:
                self.exceeded = True
                raise BodyTooLarge()
        return message

    async def send(self, message) -> None:
        if self.exceeded and not self.started:
            return  # the app's own answer to BodyTooLarge (a 500 from an inner error handler): ours is 413
        if message["type"] == "http.response.start":
            self.started = True
            message = {**message, "headers": [*message.get("headers", []),
                                              (b"content-security-policy", CONTENT_SECURITY_POLICY.encode())]}
        await self._send(message)


def install(app, server_settings, max_upload_bytes: int) -> GuardPolicy:
    """Put the guard in front of the FastAPI app (outermost user middleware). Returns the policy in force."""
    policy = GuardPolicy.from_settings(server_settings, max_upload_bytes)
    app.add_middleware(WebGuard, policy=policy)
    return policy

