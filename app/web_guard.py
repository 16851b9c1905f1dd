"""Who may talk to the app from a browser, and how much: Host, Origin, body size, /v1 content type, CSP.

Issue 16 found that a page on any other origin could open Chainlit's socket (python-socketio is created
with ``cors_allowed_origins=[]``, which turns its Origin check off) and chat, with the user's login cookie
when a page on another port of the same host did it; that a ``text/plain`` cross-site POST to /v1 (no CORS
preflight) was parsed as JSON; that any Host header was served (DNS rebinding reads the answers); that a
300 MB body was read into memory (709 -> 1,626 MB); and that a Markdown image made the page fetch any URL.

``WebGuard`` is plain ASGI, outside every other middleware, so it sees the websocket handshake too and
refuses before anything reads the body. The rules live in ``GuardPolicy``, a pure object the unit tests
drive directly.
"""
from __future__ import annotations

import json
import logging
import socket
from dataclasses import dataclass, field
from typing import Optional
from urllib.parse import urlsplit

log = logging.getLogger("ernie_chat.web_guard")
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
WILDCARD_BINDS = frozenset({"0.0.0.0", "::", ""})
DEFAULT_PORTS = {"http": 80, "https": 443, "ws": 80, "wss": 443}
# Images from the app itself and data: URLs only: a Markdown image the model writes (a prompt injection)
# cannot send the chat to another server. frame-ancestors: no other site may frame the chat (clickjacking).
CONTENT_SECURITY_POLICY = "img-src 'self' data:; frame-ancestors 'none'"


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
    root_path: str = ""
    extra_host_names: frozenset[str] = field(default_factory=frozenset)

    @classmethod
    def from_settings(cls, server) -> GuardPolicy:
        extra = frozenset(machine_names()) if server.host in WILDCARD_BINDS else frozenset()
        return cls(bound_host=server.host, allowed_hosts=_split_list(server.allowed_hosts),
                   allowed_origins=tuple(o.rstrip("/") for o in _split_list(server.allowed_origins)),
                   max_body_bytes=server.max_body_bytes, root_path=server.root_path, extra_host_names=extra)

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

    def local_path(self, path: str) -> str:
        if self.root_path and path.startswith(self.root_path):  # behind a proxy prefix the scope may carry it
            return path[len(self.root_path):] or "/"
        return path

    def refusal(self, kind: str, method: str, path: str, scheme: str,
                headers: dict[str, str]) -> Optional[tuple[int, str]]:
        """(status, one line) when the request must not reach the app; None when it may."""
        host = headers.get("host", "")
        if not self.host_allowed(host):
            return 403, (f"host {host_name(host)!r} is not served here; add it with --allowed-hosts "
                         "(ERNIE_CHAT_ALLOWED_HOSTS)")
        path = self.local_path(path)
        origin = headers.get("origin")
        # Browsers send Origin on websocket handshakes and on every cross-origin POST; scripts and
        # OpenAI clients send none, and are not the attacker here (they could send any header).
        checks_origin = kind == "websocket" or method not in SAFE_METHODS or path.startswith("/ws/")
        if origin is not None and checks_origin and not self.origin_allowed(origin, scheme, host):
            return 403, (f"origin {origin!r} may not use this app; add it with --allowed-origins "
                         "(ERNIE_CHAT_ALLOWED_ORIGINS)")
        if kind == "http" and method == "POST" and path.startswith("/v1/"):
            media = headers.get("content-type", "").split(";", 1)[0].strip().lower()
            if media != "application/json":
                # text/plain and form posts need no CORS preflight: refusing them stops blind cross-site POSTs.
                return 415, f"content type {media or 'none'!r} is not accepted; send application/json"
        if kind == "http":
            length = headers.get("content-length")
            if length is not None:
                if not length.strip().isdigit():
                    return 400, f"bad Content-Length {length!r}"
                if int(length) > self.max_body_bytes:
                    return 413, (f"request body of {int(length)} bytes is over the limit of "
                                 f"{self.max_body_bytes} (--max-body-bytes)")
        return None


class BodyTooLarge(Exception):
    """Raised inside the app's ``receive`` once a chunked body passes the limit: reading stops there."""


def _headers(scope) -> dict[str, str]:
    found: dict[str, str] = {}
    for key, value in scope.get("headers", []):
        name = key.decode("latin-1").lower()
        found.setdefault(name, value.decode("latin-1"))
    return found


def _error_body(status: int, message: str) -> bytes:
    kind = {413: "request_too_large", 415: "invalid_request_error", 400: "invalid_request_error"}
    return json.dumps({"error": {"message": message, "type": kind.get(status, "forbidden")}}).encode()


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
        headers = _headers(scope)
        refusal = self.policy.refusal(kind, scope.get("method", "GET"), scope.get("path", ""),
                                      scope.get("scheme", "http"), headers)
        if refusal is not None:
            status, message = refusal
            log.warning("refused %s %s: %s", kind, scope.get("path", ""), message)
            if kind == "websocket":
                # Closing before accepting makes the server answer the handshake with 403.
                await send({"type": "websocket.close", "code": 1008})
            else:
                await _send_error(send, status, message)
            return
        if kind == "websocket":
            await self.app(scope, receive, send)
            return
        await self._serve_http(scope, receive, send)

    async def _serve_http(self, scope, receive, send) -> None:
        limit = self.policy.max_body_bytes
        state = {"received": 0, "exceeded": False, "started": False}

        async def limited_receive():
            message = await receive()
            if message["type"] == "http.request":
                state["received"] += len(message.get("body", b""))
                if state["received"] > limit:
                    state["exceeded"] = True
                    raise BodyTooLarge()
            return message

        async def guarded_send(message) -> None:
            if state["exceeded"] and not state["started"]:
                return  # the app's own answer to BodyTooLarge (a 500 from an inner error handler): ours is 413
            if message["type"] == "http.response.start":
                state["started"] = True
                message = {**message, "headers": [*message.get("headers", []),
                                                  (b"content-security-policy", CONTENT_SECURITY_POLICY.encode())]}
            await send(message)

        try:
            await self.app(scope, limited_receive, guarded_send)
        except BodyTooLarge:
            pass
        except Exception:
            if not state["exceeded"]:
                raise
        if state["exceeded"] and not state["started"]:
            log.warning("refused %s: chunked body over %d bytes", scope.get("path", ""), limit)
            await _send_error(send, 413, f"request body is over the limit of {limit} bytes (--max-body-bytes)")


async def _send_error(send, status: int, message: str) -> None:
    body = _error_body(status, message)
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            (b"connection", b"close"),
                            (b"content-security-policy", CONTENT_SECURITY_POLICY.encode())]})
    await send({"type": "http.response.body", "body": body})


def install(app, server_settings) -> GuardPolicy:
    """Put the guard in front of the FastAPI app (outermost user middleware). Returns the policy in force."""
    policy = GuardPolicy.from_settings(server_settings)
    app.add_middleware(WebGuard, policy=policy)
    return policy

