"""Another program holds the chat database locked (BEGIN EXCLUSIVE) while chats answer: the answers come at
their usual pace, /readyz says the chats are not saved yet, and once the lock is gone every message and every
chat title lands, in order. Before, each first answer waited out the lock (44.5 s of 45) and titles were lost."""
from __future__ import annotations

import asyncio
import json
import sqlite3
import threading
import time
import uuid

import httpx
import pytest

from tests.support.app_process import history_states_until, running_app
from tests.support.chat_socket import answer_over_socket

pytestmark = pytest.mark.timeout(600)
LOCK_SECONDS = 90  # the most the lock is held: the test releases it once the writes failed and were told
CHATS = 4


def test_chats_answer_through_a_locked_database_and_nothing_is_lost(tiny_model_dir, tmp_path):
    data = tmp_path / "data"
    with running_app(tiny_model_dir, tmp_path, "--data-dir", str(data), "--max-tokens", "16") as app:
        client = httpx.Client(base_url=app.url, timeout=30)
        client.get("/")  # the page logs the local user in (a cookie), before the lock
        locked, release = threading.Event(), threading.Event()

        def hold_the_lock():
            with sqlite3.connect(data / "chats.db", isolation_level=None) as conn:
                conn.execute("BEGIN EXCLUSIVE")
                locked.set()
                release.wait(LOCK_SECONDS)
                conn.execute("COMMIT")

        holder = threading.Thread(target=hold_the_lock)
        holder.start()
        assert locked.wait(10)
        threads = [str(uuid.uuid4()) for _ in range(CHATS)]

        async def chats():
            return await asyncio.gather(*(answer_over_socket(app, client, tid, f"question {i}", [])
                                          for i, tid in enumerate(threads)))

        answer_seconds = [seconds for seconds, _ in asyncio.run(chats())]
        # The writes wait for the lock: /readyz tells it (past 3 s), then tells they fail (past SQLite's 10 s busy
        # timeout), so they are tried again. Read until then: the answers may end before the first 3 s are over.
        states = history_states_until(app, "not saving: ")
        release.set()
        holder.join()
        # The answers did not wait for the lock (only the user's message waits, up to 2 s, to be stored).
        assert max(answer_seconds) < 8, answer_seconds
        order = ["saving", "waiting", "not"]  # never back while the lock is held
        kinds = [state.split()[0] for state in states]
        assert kinds == sorted(kinds, key=order.index), states

        deadline = time.time() + 60
        while True:  # once the lock is gone, the queued writes land
            with sqlite3.connect(data / "chats.db") as conn:
                named = conn.execute("select count(*) from threads where name like 'question %'").fetchone()[0]
                # the answers are queued after the names: wait for those too (finished: with the stats line)
                answered = conn.execute("select count(*) from steps where type = 'assistant_message' "
                                        "and data like '%prompt %'").fetchone()[0]
            if (named == CHATS and answered >= CHATS) or time.time() > deadline:
                break
            time.sleep(0.2)
        with sqlite3.connect(data / "chats.db") as conn:
            for i, tid in enumerate(threads):
                name = conn.execute("select name from threads where id = ?", (tid,)).fetchone()
                stored = [(kind, json.loads(data)["output"]) for kind, data in conn.execute(
                    "select type, data from steps where thread_id = ? and type like '%message' "
                    "order by created_at, position", (tid,))]
                # the question first, then its finished answer (with its stats line) and the page's notice
                assert name == (f"question {i}",) and stored[0] == ("user_message", f"question {i}"), stored
                assert [kind for kind, text in stored[1:] if "prompt" in text] == ["assistant_message"], stored
        history_states_until(app, "saving", 10)  # the last writes behind them land too
        assert "chat history is being saved again" in app.log_file.read_text()
        client.close()
