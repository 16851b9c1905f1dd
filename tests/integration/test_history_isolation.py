"""Two users on one app (--auth-token): Bob asks for Alice's chat by its id through the UI's own HTTP and
websocket calls (list, open, resume, rename, delete, element, download) and is refused every time.

Alice's chat is made through Chainlit's websocket, as the page makes it (socket.io, client_message)."""
from __future__ import annotations

import asyncio
import json
import sqlite3
import time
import uuid
from collections.abc import Callable

import httpx
import pytest
import socketio

from tests.helpers import running_app

pytestmark = pytest.mark.timeout(600)
TOKEN = "shared-secret-42"


def login(app, user: str) -> httpx.Client:
    client = httpx.Client(base_url=app.url, timeout=30)
    response = client.post("/login", data={"username": user, "password": TOKEN})
    assert response.status_code == 200, response.text
    assert client.cookies.get("access_token")
    return client


async def socket_connect(app, client: httpx.Client, thread_id: str, events: list) -> socketio.AsyncClient:
    sio = socketio.AsyncClient(reconnection=False)
    for name in ("resume_thread", "new_message", "update_message", "first_interaction"):
        sio.on(name, (lambda n: lambda data=None: events.append((n, data)))(name))
    await sio.connect(app.url, socketio_path="/ws/socket.io", transports=["websocket"],
                      headers={"Cookie": f"access_token={client.cookies.get('access_token')}"},
                      auth={"sessionId": str(uuid.uuid4()), "threadId": thread_id, "clientType": "webapp",
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


async def alice_chats(app, client: httpx.Client, thread_id: str) -> None:
    events: list = []
    sio = await socket_connect(app, client, thread_id, events)
    try:
        await sio.emit("client_message", {"message": {
            "id": str(uuid.uuid4()), "threadId": thread_id, "type": "user_message", "name": "alice",
            "output": "my secret plans", "createdAt": time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime())},
            "fileReferences": []})
        deadline = time.time() + 120
        while time.time() < deadline:
            steps = (client.get(f"/project/thread/{thread_id}").json() or {}).get("steps", [])
            if any(s["type"] == "assistant_message" and "prompt" in (s.get("output") or "") for s in steps):
                return
            await asyncio.sleep(0.5)
        raise AssertionError(f"no answer stored; events: {events[-5:]}")
    finally:
        await sio.disconnect()


async def try_resume(app, client: httpx.Client, thread_id: str) -> list:
    """Connect to the chat as the page does when it is opened from the sidebar; the events that came."""
    events: list = []
    sio = await socket_connect(app, client, thread_id, events)
    await asyncio.sleep(3)
    await sio.disconnect()
    return events


@pytest.fixture(scope="module")
def two_users(tiny_model_dir, tmp_path_factory):
    data = tmp_path_factory.mktemp("shared-chats")
    with running_app(tiny_model_dir, tmp_path_factory.mktemp("auth-run"), "--auth-token", TOKEN,
                     "--data-dir", str(data), "--max-tokens", "16") as app:
        alice, bob = login(app, "alice"), login(app, "bob")
        alice_thread = str(uuid.uuid4())
        asyncio.run(alice_chats(app, alice, alice_thread))
        # An element in Alice's chat (the app itself sends none that are kept; Chainlit's route serves them)
        with sqlite3.connect(data / "chats.db") as conn:
            conn.execute("insert into elements (id, thread_id, data) values (?, ?, ?)",
                         ("alice-element", alice_thread, json.dumps({"id": "alice-element", "name": "plans.txt"})))
        yield {"app": app, "alice": alice, "bob": bob, "thread": alice_thread, "db": data / "chats.db"}
        alice.close()
        bob.close()


def test_alice_sees_her_own_chat_everywhere(two_users):
    alice, thread = two_users["alice"], two_users["thread"]
    listed = alice.post("/project/threads", json={"pagination": {"first": 20}, "filter": {}}).json()["data"]
    assert [t["id"] for t in listed] == [thread]
    assert alice.get(f"/project/thread/{thread}").status_code == 200
    assert alice.get(f"/project/thread/{thread}/element/alice-element").json()["name"] == "plans.txt"
    assert alice.get(f"/history/chats/{thread}/export.md").status_code == 200
    events = asyncio.run(try_resume(two_users["app"], alice, thread))
    assert [e for e, _ in events if e == "resume_thread"] == ["resume_thread"]


def test_bob_cannot_list_or_find_alices_chat(two_users):
    bob = two_users["bob"]
    alice_user_id = two_users["alice"].get("/user").json()["id"]
    for body in ({"pagination": {"first": 20}, "filter": {}},
                 {"pagination": {"first": 20}, "filter": {"userId": alice_user_id}},
                 {"pagination": {"first": 20}, "filter": {"search": "secret"}}):
        assert bob.post("/project/threads", json=body).json()["data"] == []


def test_bob_cannot_open_rename_delete_or_download_alices_chat(two_users):
    bob, thread = two_users["bob"], two_users["thread"]
    assert bob.get(f"/project/thread/{thread}").status_code == 401
    assert bob.get(f"/project/share/{thread}").status_code == 404
    assert bob.put("/project/thread", json={"threadId": thread, "name": "pwned"}).status_code == 401
    assert bob.request("DELETE", "/project/thread", json={"threadId": thread}).status_code == 401
    assert bob.get(f"/project/thread/{thread}/element/alice-element").status_code == 401
    for fmt in ("md", "json"):
        assert bob.get(f"/history/chats/{thread}/export.{fmt}").status_code == 401
    with sqlite3.connect(two_users["db"]) as conn:
        assert conn.execute("select name, user_identifier from threads where id = ?", (thread,)).fetchone() == (
            "my secret plans", "alice")


def test_bob_cannot_reach_alices_element_through_his_own_chat(two_users):
    bob = two_users["bob"]
    bob_thread = str(uuid.uuid4())
    asyncio.run(alice_chats(two_users["app"], bob, bob_thread))  # Bob makes a chat of his own
    response = bob.get(f"/project/thread/{bob_thread}/element/alice-element")
    assert response.status_code == 200 and response.json() is None


def test_bob_cannot_resume_alices_chat_over_the_websocket(two_users):
    with pytest.raises(socketio.exceptions.ConnectionError):
        asyncio.run(try_resume(two_users["app"], two_users["bob"], two_users["thread"]))
    assert two_users["alice"].get(f"/project/thread/{two_users['thread']}").json()["steps"][0]["output"] == \
        "my secret plans"


def test_a_search_too_long_gets_one_line_and_no_search_text_reaches_the_log(two_users):
    """Past 50,000 characters SQLite refused the pattern with a 500 and the text landed in the log file."""
    app, alice = two_users["app"], two_users["alice"]
    text = "lighthouse-" + "x" * 60_000
    answer = alice.post("/project/threads", json={"pagination": {"first": 20}, "filter": {"search": text}})
    assert answer.status_code == 400
    assert answer.json() == {"detail": "search text is 60,011 characters; at most 1,000 are searched"}
    assert alice.post("/project/threads", json={"pagination": {"first": 20},
                                                "filter": {"search": "secret"}}).json()["data"]  # still works
    log = app.log_file.read_text()
    assert "lighthouse-" not in log and "my secret plans" not in log
    assert app.log_file.stat().st_mode & 0o777 == 0o600
