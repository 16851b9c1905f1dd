"""Damage is visible and read-only commands stay read-only: a message whose stored JSON is damaged is shown as
unreadable (it vanished from the chat and its export before), `export` refuses a damaged database in one line
and changes nothing (it renamed the file and made an empty one), and the start's integrity check is bounded."""
from __future__ import annotations

import asyncio
import logging
import sqlite3

import pytest

from app.errors import HistoryDatabaseError
from app.history import prepare_database
from app.history.database import DatabaseLocation, sqlite_damage
from app.history.transfer import run_transfer
from tests.support.history_store import message, run_with_store, start_chat


@pytest.fixture
def location(tmp_path) -> DatabaseLocation:
    path = tmp_path / "chats.db"
    return DatabaseLocation(f"sqlite+aiosqlite:///{path}", path)


def test_a_message_with_damaged_json_is_shown_as_unreadable_and_logged_without_its_text(location, caplog):
    async def write(store):
        _, thread_id = await start_chat(store, "alice", "the question")
        answer = message(thread_id, "the secret answer " * 10, kind="assistant_message",
                         created="2026-12-03T10:00:01.000Z")
        await store.layer.create_step(answer)
        return thread_id, answer["id"]

    thread_id, answer_id = run_with_store(location, write)
    with sqlite3.connect(location.sqlite_file) as conn:  # 64 bytes overwritten inside the answer's JSON
        data = conn.execute("select data from steps where id = ?", (answer_id,)).fetchone()[0]
        conn.execute("update steps set data = ? where id = ?", (data[:40] + "\x00" * 64 + data[104:], answer_id))

    async def read(store):
        return await store.layer.get_thread(thread_id)

    with caplog.at_level(logging.WARNING, logger="ernie_chat.history"):
        thread = run_with_store(location, read)
    outputs = [step["output"] for step in thread["steps"]]
    assert outputs[0] == "the question"
    assert outputs[1] == ("this message could not be read (its saved copy is damaged) / "
                          "此消息无法读取（其保存的副本已损坏）")
    assert thread["steps"][1]["type"] == "assistant_message" and thread["steps"][1]["id"] == answer_id
    assert [r.getMessage() for r in caplog.records] == [
        f"chat {thread_id}: message {answer_id} could not be read (its stored JSON is damaged); shown as such"]


def test_export_refuses_a_damaged_database_in_one_line_and_changes_nothing(location, tmp_path):
    run_with_store(location, lambda store: start_chat(store, "alice", "hello"))
    file = location.sqlite_file
    raw = bytearray(file.read_bytes())
    raw[4096:8192] = b"\xff" * 4096  # a page of the file overwritten
    file.write_bytes(bytes(raw))
    with pytest.raises(HistoryDatabaseError) as caught:
        run_transfer("export", location, tmp_path / "out", "json", [])
    line = str(caught.value)
    assert "\n" not in line and line.startswith(f"the chat database {file} is damaged (")
    assert "nothing was changed" in line
    assert file.read_bytes() == bytes(raw)  # not renamed, not replaced by an empty one
    assert not list(tmp_path.glob("chats.db.corrupt-*")) and not (tmp_path / "out").exists()


def test_the_start_moves_the_damaged_file_aside_and_says_where(location, tmp_path):
    location.sqlite_file.write_bytes(b"not a database at all " * 200)
    kept = []
    asyncio.run(prepare_database(location, kept.append))
    assert len(kept) == 1 and kept[0].name.startswith("chats.db.corrupt-") and kept[0].exists()


def test_the_integrity_check_stops_at_its_time_bound_and_the_start_goes_on(location, caplog):
    thread_id = run_with_store(location, lambda store: start_chat(store, "alice", "hello"))[1]
    with sqlite3.connect(location.sqlite_file) as conn:  # a long history: 20,000 messages
        conn.executemany("insert into steps (id, thread_id, type, created_at, position, search_text, data) "
                         "values (?, ?, 'user_message', '2026-12-03', ?, '', ?)",
                         [(f"m{i}", thread_id, i, "{}" + " " * 200) for i in range(20_000)])
    with caplog.at_level(logging.WARNING, logger="ernie_chat.history"):
        assert sqlite_damage(location.sqlite_file, seconds=0) is None  # not checked: no verdict of damage
    assert any("was not checked (stopped after 0 s" in r.getMessage() for r in caplog.records)
    assert sqlite_damage(location.sqlite_file) is None  # with time enough: sound
