"""Chainlit's socket as the page uses it, from a plain client: messages, uploads, answers."""
from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Optional

if TYPE_CHECKING:
    import httpx
    import socketio



async def socket_connect(app, client: httpx.Client, thread_id: str, events: list,
                         session_id: Optional[str] = None) -> socketio.AsyncClient:
    """Chainlit's chat socket, opened as the page opens it (socket.io, the login cookie of ``client``, or its
    Authorization header where it has one); what the app sends lands in ``events`` as (name, data). Files are
    uploaded to the session ``session_id`` (POST /project/file?session_id=...)."""
    import socketio

    sio = socketio.AsyncClient(reconnection=False)
    headers = {"Cookie": f"access_token={client.cookies.get('access_token')}"}
    if "authorization" in client.headers:
        headers["Authorization"] = client.headers["authorization"]
    for name in ("resume_thread", "new_message", "update_message", "first_interaction"):
        sio.on(name, (lambda n: lambda data=None: events.append((n, data)))(name))
    await sio.connect(app.url, socketio_path="/ws/socket.io", transports=["websocket"],
                      headers=headers,
                      auth={"sessionId": session_id or str(uuid.uuid4()), "threadId": thread_id, "clientType": "webapp",
                            "userEnv": "{}"}, wait_timeout=20)
    await sio.emit("connection_successful")
    return sio


def finished_answer(events: list) -> str | None:
    """The text of the first finished answer among the socket's events (it ends with its stats line)."""
    for name, data in events:
        if (name in ("new_message", "update_message") and isinstance(data, dict)
                and data.get("type") == "assistant_message" and "prompt" in (data.get("output") or "")):
            return data["output"]
    return None


async def answer_within(events: list, within_s: float, poll_s: float = 0.1) -> str:
    """The finished answer among a socket's ``events`` once it has come; the test fails without it by ``within_s``."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        answer = finished_answer(events)
        if answer is not None:
            return answer
        await asyncio.sleep(poll_s)
    raise AssertionError(f"no answer; events: {[e for e, _ in events][-10:]}")


async def answer_over_socket(app, client: httpx.Client, thread_id: str, text: str, events: list,
                             also: Callable[[list], bool] = lambda events: True) -> tuple[float, str]:
    """Send one message as the page does; seconds until its answer is finished, and the answer. ``also``: what
    else the events must hold before the socket closes (a notice that follows the answer)."""
    sio = await socket_connect(app, client, thread_id, events)
    try:
        started = time.monotonic()
        await sio.emit("client_message", {"message": {
            "id": str(uuid.uuid4()), "threadId": thread_id, "type": "user_message", "name": "local",
            "output": text, "createdAt": "2026-12-04T10:00:00.000Z"}, "fileReferences": []})
        seconds = None
        while time.monotonic() - started < 120:
            answer = finished_answer(events)
            if answer is not None and seconds is None:
                seconds = time.monotonic() - started
            if answer is not None and also(events):
                return seconds, answer
            await asyncio.sleep(0.1)
        raise AssertionError(f"no answer; events: {[e for e, _ in events][-10:]}")
    finally:
        await sio.disconnect()


def upload_request(session_id: str, name: str, body: bytes) -> dict:
    """The arguments of ``client.post`` that send a file to Chainlit's upload route as the page sends it. The
    multipart body is written by hand: httpx escapes control characters in a file name, a hostile client need not."""
    boundary = uuid.uuid4().hex
    form = (f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{name}"\r\n'
            f"Content-Type: text/plain\r\n\r\n").encode() + body + f"\r\n--{boundary}--\r\n".encode()
    return {"url": "/project/file", "params": {"session_id": session_id}, "content": form,
            "headers": {"Content-Type": f"multipart/form-data; boundary={boundary}"}}


def upload(client: httpx.Client, session_id: str, name: str, body: bytes) -> str:
    """A file uploaded to the tab ``session_id``; its id."""
    answer = client.post(**upload_request(session_id, name, body))
    assert answer.status_code == 200, answer.text
    return answer.json()["id"]


async def send_and_wait(app, client: httpx.Client, thread_id: str, message: dict,
                        files: tuple[tuple[str, bytes], ...] = (), wait_s: float = 180) -> str:
    """Send ``message`` (the page's fields, overridden by what is given) down the socket, with ``files`` (name,
    contents) uploaded first; its finished answer (within ``wait_s``)."""
    events: list = []
    session_id = str(uuid.uuid4())
    sio = await socket_connect(app, client, thread_id, events, session_id=session_id)
    try:
        references = [{"id": upload(client, session_id, name, body)} for name, body in files]
        await sio.emit("client_message", {"message": {
            "id": str(uuid.uuid4()), "threadId": thread_id, "type": "user_message", "name": "alice",
            "output": "what is in the file?", "createdAt": time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime()),
            "metadata": {"location": app.url}, **message}, "fileReferences": references})
        return await answer_within(events, wait_s)
    finally:
        await sio.disconnect()
