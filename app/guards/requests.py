"""What every guard reads from a request, and the one way each of them refuses one."""
from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Optional

from starlette.datastructures import Headers

from app.errors import ErnieChatError, error_body

# Images from the app itself, data: URLs and the page's own blob: URLs only: a Markdown image the model writes (a
# prompt injection) cannot send the chat to another server. blob: is the composer's thumbnail of an attached image
# (URL.createObjectURL of the picked file; issue 35): a blob: URL names an object this page made, in this browser,
# and fetches nothing from anywhere. frame-ancestors: no other site may frame the chat (clickjacking).
CONTENT_SECURITY_POLICY = "img-src 'self' data: blob:; frame-ancestors 'none'"


def local_path(path: str, root_path: str) -> str:
    """The path inside the app: behind a proxy prefix (--root-path) the scope's path may still carry it."""
    if root_path and path.startswith(root_path):
        return path[len(root_path):] or "/"
    return path


def bearer_token(headers: Headers) -> Optional[str]:
    """The token of ``Authorization: Bearer <token>``, if the request sent one."""
    scheme, _, token = headers.get("authorization", "").partition(" ")
    return token.strip() or None if scheme.lower() == "bearer" else None


def error_json(err: ErnieChatError) -> bytes:
    return json.dumps(error_body(err)).encode()


async def send_error(send, err: ErnieChatError, extra: Iterable[tuple[bytes, bytes]] = (),
                     for_chainlits_page: bool = False) -> None:
    """Answer an ASGI HTTP request with ``err`` in the one error body (app/errors.py) and end it.
    ``for_chainlits_page``: the line also as ``detail``, FastAPI's field, which Chainlit's page shows (an upload's)."""
    body = error_json(err) if not for_chainlits_page else json.dumps({**error_body(err), "detail": str(err)}).encode()
    await send({"type": "http.response.start", "status": err.http_status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            (b"content-security-policy", CONTENT_SECURITY_POLICY.encode()), *extra]})
    await send({"type": "http.response.body", "body": body})
