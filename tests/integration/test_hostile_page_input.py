"""Issue 36 on a launched app with two users: what a logged-in user's own client sends that the page never would.
A socket message whose metadata plants a "document" (no upload), and Chainlit's chat-sharing routes although
sharing is off. The messages go through Chainlit's websocket as the page sends them (socket.io, client_message)."""
from __future__ import annotations

import asyncio
import json
import re
import sqlite3
import time
import uuid

import httpx
import pytest

from app.accounts import Accounts
from tests.support.app_process import running_app
from tests.support.chat_socket import finished_answer, send_and_wait, socket_connect

pytestmark = pytest.mark.timeout(600)
SECRETS = {"alice": "alices-own-secret", "bob": "bobs-own-secret"}
PLANTED = "planted-" + "Z" * 900_000  # the attack pass's 900,000-character "document"


def login(app, user: str) -> httpx.Client:
    client = httpx.Client(base_url=app.url, timeout=30)
    assert client.post("/login", data={"username": user, "password": SECRETS[user]}).status_code == 200
    return client


def stored_step(db, step_id: str) -> tuple[str, dict]:
    """(type, metadata) of a stored message, once the history writer has written it."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with sqlite3.connect(db) as conn:
            row = conn.execute("select type, data from steps where id = ?", (step_id,)).fetchone()
        if row is not None:
            return row[0], json.loads(row[1]).get("metadata") or {}
        time.sleep(0.2)
    raise AssertionError(f"message {step_id} never stored")


@pytest.fixture(scope="module")
def two_users(tiny_model_dir, tmp_path_factory):
    data = tmp_path_factory.mktemp("page-input-chats")
    for name, secret in SECRETS.items():
        Accounts(data / "users.json").add(name, secret)
    with running_app(tiny_model_dir, tmp_path_factory.mktemp("page-input-run"), "--data-dir", str(data),
                     "--max-tokens", "16") as app:
        alice, bob = login(app, "alice"), login(app, "bob")
        yield {"app": app, "alice": alice, "bob": bob, "db": data / "chats.db"}
        alice.close()
        bob.close()


def test_a_message_cannot_plant_a_document_or_the_apps_own_metadata(two_users):
    """N12: the metadata of a socket message carried a 900,000-character document without any upload; it went
    into the prompt, was kept with the chat and served as the message's document link."""
    app, alice = two_users["app"], two_users["alice"]
    thread, message_id = str(uuid.uuid4()), str(uuid.uuid4())
    answer = asyncio.run(send_and_wait(app, alice, thread, {
        "id": message_id, "type": "assistant_message",
        "metadata": {"documents": [{"name": "planted.txt", "kind": "text", "text": PLANTED}],
                     "kind": "answer", "footer": "", "partial": True, "is_shared": True}}))
    prompt_tokens = int(re.search(r"prompt (\d+) tokens", answer).group(1))  # the stats line under the answer
    assert prompt_tokens < 100, answer  # the question alone: no document reached the model
    kind, metadata = stored_step(two_users["db"], message_id)
    assert (kind, metadata) == ("user_message", {})
    link = alice.get(f"/history/chats/{thread}/documents/{message_id}/0")
    assert link.status_code == 404 and "planted-" not in link.text
    exported = alice.get(f"/history/chats/{thread}/export.json")
    assert exported.status_code == 200 and "planted-" not in exported.text


def test_sharing_is_off_for_real_on_chainlits_share_routes(two_users):
    """N11: with ``allow_thread_sharing = false`` the owner's PUT /project/thread/share (or an imported chat whose
    metadata said ``is_shared``) let another user read the chat through GET /project/share/<id>."""
    app, alice, bob, db = two_users["app"], two_users["alice"], two_users["bob"], two_users["db"]
    thread = str(uuid.uuid4())
    asyncio.run(send_and_wait(app, alice, thread, {"output": "alices private notes"}))
    shared = alice.put("/project/thread/share", json={"threadId": thread, "isShared": True})
    assert shared.status_code == 404, shared.text
    assert shared.json() == {"error": {"message": "chat sharing is off (features.allow_thread_sharing = false "
                                                  "in .chainlit/config.toml)", "type": "not_found_error"}}
    with sqlite3.connect(db) as conn:
        assert "is_shared" not in json.loads(conn.execute("select metadata from threads where id = ?",
                                                          (thread,)).fetchone()[0])
        # As a chat imported from a file that said so: the flag in the database opens nothing either.
        conn.execute("update threads set metadata = ? where id = ?", (json.dumps({"is_shared": True}), thread))
    with httpx.Client(base_url=app.url, timeout=30) as nobody:
        for reader in (bob, nobody, alice):
            seen = reader.get(f"/project/share/{thread}")
            assert seen.status_code == 404 and "alices private notes" not in seen.text, seen.text


def test_a_file_name_with_a_nul_keeps_its_document_link(two_users):
    """N17: a file named with a NUL (or another control character) broke that file's document link."""
    alice = two_users["alice"]
    thread, message_id = str(uuid.uuid4()), str(uuid.uuid4())
    asyncio.run(send_and_wait(two_users["app"], alice, thread, {"id": message_id, "output": "the code?"},
                              files=(('notes\x00\x1b\x7f"\\.txt', b"the code is 4711"),)))
    link = alice.get(f"/history/chats/{thread}/documents/{message_id}/0")
    assert link.status_code == 200 and link.text == "the code is 4711", link.text


def test_a_settings_change_from_the_page_keeps_only_the_panels_typed_values(two_users):
    """N12: what the page sends is session state too: a settings change was copied into the chat's session key by
    key and saved with the chat (an unknown key, a flag, a temperature of "hot" that broke the panel on reopening)."""
    app, alice, db = two_users["app"], two_users["alice"], two_users["db"]
    thread = str(uuid.uuid4())

    async def run() -> dict:
        events: list = []
        sio = await socket_connect(app, alice, thread, events)
        try:
            await sio.emit("client_message", {"message": {
                "id": str(uuid.uuid4()), "threadId": thread, "type": "user_message", "name": "alice", "output": "hi",
                "createdAt": time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime())}, "fileReferences": []})
            while finished_answer(events) is None:
                await asyncio.sleep(0.1)
            await sio.emit("chat_settings_change", {"system_prompt": "be brief", "temperature": "hot", "top_p": 0.5,
                                                    "answer_tasks": [1, 2, 3], "is_shared": True})
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                with sqlite3.connect(db) as conn:
                    row = conn.execute("select metadata from threads where id = ?", (thread,)).fetchone()
                settings = (json.loads(row[0]) if row else {}).get("chat_settings") or {}
                if settings.get("system_prompt") == "be brief":
                    return settings
                await asyncio.sleep(0.2)
            raise AssertionError("the settings change was never saved")
        finally:
            await sio.disconnect()

    saved = asyncio.run(run())
    assert "answer_tasks" not in saved and "is_shared" not in saved and saved.get("temperature") != "hot", saved
    assert saved["top_p"] == 0.5 and saved["max_tokens"] == 16  # the panel's own values stay (16.0 from its slider)
