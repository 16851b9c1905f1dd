"""Import bounds only the time the database takes nothing of a chat (not the time it is being written), and one chat
refused for that never stops the chats after it, nor lands later (app/history/restore.py; issue 36, N8)."""
import asyncio
import contextlib
import json
import sqlite3
import threading
import time

from app.history import restore
from app.history.database import DatabaseLocation
from app.history.restore import ImportOwner, LazyStore, import_files


def test_a_chat_the_locked_database_takes_nothing_of_is_refused_and_the_next_lands_without_it(tmp_path, monkeypatch):
    monkeypatch.setattr(restore, "IMPORT_STALL_S", 0.5)
    path = tmp_path / "two.json"
    path.write_text(json.dumps([{"id": title, "title": title, "chat": {"messages": [
        {"role": "user", "content": f"{title} question"}, {"role": "assistant", "content": f"{title} answer"}]}}
        for title in ("Locked out", "After")]))
    db = tmp_path / "chats.db"
    locked, lines = threading.Event(), []

    def hold_the_file():
        # Another program holds the whole file past the stall bound, then lets go while the refused chat's write
        # still waits for it (SQLite's busy timeout): that write must not land after it was reported refused.
        conn = sqlite3.connect(db, timeout=30, isolation_level=None)
        conn.execute("BEGIN EXCLUSIVE")
        locked.set()
        time.sleep(1.5)
        conn.execute("ROLLBACK")
        conn.close()

    async def main():
        store = LazyStore(DatabaseLocation(f"sqlite+aiosqlite:///{db}", db))
        try:
            await store.layer()  # the database exists before the other program takes it
            holder = threading.Thread(target=hold_the_file)
            holder.start()
            await asyncio.to_thread(locked.wait, 10)
            await import_files(store, [str(path)], ImportOwner(), lines.append)
            await asyncio.to_thread(holder.join)
        finally:
            await store.close()

    asyncio.run(main())
    assert lines[1].startswith('  refused: chat 1 "Locked out": the chat database took nothing for 0 s'), lines
    assert lines[2] == '  imported: chat 2 "After", 2 messages', lines
    with contextlib.closing(sqlite3.connect(db)) as conn:
        assert [name for (name,) in conn.execute("select name from threads")] == ["After"]
