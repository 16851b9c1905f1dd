"""`python launch.py export` / `import`: every chat out as files, and back in, unchanged (round trip)."""
from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import uuid

from chainlit.context import init_http_context
from chainlit.user import User

from app.history import HistoryStore, prepare_database
from app.history.database import DatabaseLocation
from tests.conftest import ROOT


def location_in(folder) -> DatabaseLocation:
    return DatabaseLocation(f"sqlite+aiosqlite:///{folder / 'chats.db'}", folder / "chats.db")


def launch(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "launch.py", *args], cwd=ROOT, capture_output=True, text=True, timeout=120)


async def make_chats(location: DatabaseLocation) -> list[str]:
    await prepare_database(location)
    store = HistoryStore.open(location)
    ids = []
    try:
        for who, words in (("alice", ["the weather in Paris", "sunny"]), ("bob", ["量子纠缠", "两个粒子"])):
            user = await store.layer.create_user(User(identifier=who))
            init_http_context(user=user)
            thread_id = str(uuid.uuid4())
            for n, text in enumerate(words):
                kind = "user_message" if n % 2 == 0 else "assistant_message"
                await store.layer.create_step({"id": str(uuid.uuid4()), "threadId": thread_id, "type": kind,
                                               "name": kind, "output": text + ("\n\n`prompt 9 tokens`" if n else ""),
                                               "createdAt": f"2026-12-03T10:00:0{n}.000Z"})
            await store.layer.update_thread(thread_id, name=words[0], user_id=user.id,
                                            metadata={"chat_settings": {"system_prompt": "be brief"}})
            ids.append(thread_id)
    finally:
        await store.close()
    return ids


async def read_chats(location: DatabaseLocation, ids: list[str]) -> list[dict]:
    store = HistoryStore.open(location)
    try:
        return [await store.layer.get_thread(i) for i in ids]
    finally:
        await store.close()


def test_export_then_import_gives_back_the_same_chats(tmp_path):
    source, target, out = tmp_path / "source", tmp_path / "target", tmp_path / "backup"
    ids = asyncio.run(make_chats(location_in(source)))
    exported = launch("export", "--data-dir", str(source), "--out", str(out))
    assert exported.returncode == 0, exported.stderr
    files = sorted(out.rglob("*.json"))
    assert [f.parent.name for f in files] == ["alice", "bob"]
    assert "exported 2 chats" in exported.stdout

    imported = launch("import", "--data-dir", str(target), *map(str, files))
    assert imported.returncode == 0, imported.stderr
    assert "imported 2 of 2 chats" in imported.stdout
    def comparable(chats):  # user ids are the target database's own; the user names must match
        return [{k: v for k, v in chat.items() if k != "userId"} for chat in chats]

    back = comparable(asyncio.run(read_chats(location_in(target), ids)))
    assert back == comparable(asyncio.run(read_chats(location_in(source), ids)))
    assert [c["userIdentifier"] for c in back] == ["alice", "bob"]

    again = launch("import", "--data-dir", str(target), str(files[0]))
    assert "imported 0 of 1 chats" in again.stdout and "already there" in again.stdout


def test_markdown_export_reads_as_the_chat(tmp_path):
    source, out = tmp_path / "source", tmp_path / "md"
    asyncio.run(make_chats(location_in(source)))
    assert launch("export", "--data-dir", str(source), "--out", str(out), "--format", "md").returncode == 0
    text = next((out / "bob").glob("*.md")).read_text(encoding="utf-8")
    assert text.startswith("# 量子纠缠\n")
    assert "> **System prompt:** be brief" in text
    assert "**You:**\n\n量子纠缠\n\n**ERNIE:**\n\n两个粒子\n" in text  # the stats line is not part of the answer


def test_import_refuses_what_is_not_an_export(tmp_path):
    bad = tmp_path / "notes.json"
    bad.write_text(json.dumps({"hello": 1}))
    result = launch("import", "--data-dir", str(tmp_path / "db"), str(bad))
    assert result.returncode == 2
    expected = f"error: cannot import {bad}: not an ernie-chat JSON export (format ernie-chat/chat-v1)"
    assert result.stderr.strip() == expected
    assert not (tmp_path / "db").exists()  # nothing written for a refused import
    refused = launch("export", "--no-history").stderr.strip()
    assert refused == "error: export needs the chat database: remove --no-history"


def test_a_database_from_a_newer_version_stops_the_app_with_one_line(tmp_path):
    import sqlite3

    from app.history.schema import SCHEMA_VERSION
    from tests.helpers import free_port

    asyncio.run(prepare_database(location_in(tmp_path)))
    with sqlite3.connect(tmp_path / "chats.db") as conn:
        conn.execute("update ernie_meta set value = ?", (str(SCHEMA_VERSION + 1),))
    def dump():
        with sqlite3.connect(tmp_path / "chats.db") as conn:
            return list(conn.iterdump())

    before = dump()
    result = launch("--data-dir", str(tmp_path), "--port", str(free_port()), "--log-file", str(tmp_path / "log"))
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1] == (
        f"error: the chat database {tmp_path / 'chats.db'} has schema version {SCHEMA_VERSION + 1}, newer than "
        f"this ernie-chat knows ({SCHEMA_VERSION}): upgrade ernie-chat, or use another --data-dir / --database-url")
    assert dump() == before  # never rewritten
