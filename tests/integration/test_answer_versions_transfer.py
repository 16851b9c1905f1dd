"""An answer's versions (Regenerate keeps the earlier texts) through `python launch.py export` and `import`: our
JSON carries them in the answer's metadata and importing it gives them back, the shown one shown; the Markdown
export reads the shown version and says how many others there are."""
from __future__ import annotations

import asyncio
import subprocess
import sys
import uuid

from chainlit.types import Pagination, ThreadFilter

from app.accounts import Accounts
from app.history import HistoryStore, prepare_database
from app.history.database import DatabaseLocation
from app.history.messages import FINISH, FOOTER, KIND, KIND_ANSWER, LENGTH, SHOWN, VERSIONS
from tests.support.app_process import ROOT
from tests.support.fakes import logged_in_user

STATS = "\n\n`prompt 9 tokens`"
VERSIONS_KEPT = [{"text": "Paris is the capital.", "footer": STATS},
                 {"text": "It is Paris, on the Seine.", "footer": STATS + "\n\n`length limit`", FINISH: LENGTH},
                 {"text": "Paris.", "footer": STATS}]
SHOWN_METADATA = {KIND: KIND_ANSWER, FOOTER: STATS, VERSIONS: VERSIONS_KEPT, SHOWN: 0}


def location_in(folder) -> DatabaseLocation:
    return DatabaseLocation(f"sqlite+aiosqlite:///{folder / 'chats.db'}", folder / "chats.db")


def launch(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "launch.py", *args], cwd=ROOT, capture_output=True, text=True, timeout=120)


async def make_chat(location: DatabaseLocation) -> str:
    await prepare_database(location)
    store = HistoryStore.open(location)
    try:
        user = await logged_in_user(store.layer, "alice")
        thread_id = str(uuid.uuid4())
        for n, (kind, text, metadata) in enumerate((("user_message", "Capital of France?", {}),
                                                    ("assistant_message", "Paris is the capital." + STATS,
                                                     SHOWN_METADATA))):
            await store.layer.create_step({"id": str(uuid.uuid4()), "threadId": thread_id, "type": kind,
                                           "name": kind, "output": text, "metadata": metadata,
                                           "createdAt": f"2026-12-03T10:00:0{n}.000Z"})
        await store.layer.update_thread(thread_id, name="Capital of France?", user_id=user.id)
    finally:
        await store.close()
    return thread_id


async def read_back(location: DatabaseLocation, thread_id: str) -> tuple[dict, list]:
    store = HistoryStore.open(location)
    try:
        thread = await store.layer.get_thread(thread_id)
        user = await store.layer.get_user("alice")
        found = await store.layer.list_threads(Pagination(first=5), ThreadFilter(userId=user.id, search="seine"))
        return thread, [chat["id"] for chat in found.data]
    finally:
        await store.close()


def test_export_and_import_keep_an_answers_versions_and_the_one_shown(tmp_path):
    source, target, out, md = tmp_path / "source", tmp_path / "target", tmp_path / "backup", tmp_path / "md"
    thread_id = asyncio.run(make_chat(location_in(source)))
    assert launch("export", "--data-dir", str(source), "--out", str(out)).returncode == 0
    Accounts(target / "users.json").add("alice", "alice-secret-1")
    imported = launch("import", "--data-dir", str(target), *map(str, sorted(out.rglob("*.json"))))
    assert imported.returncode == 0 and "imported 1 of 1 chats" in imported.stdout, imported.stdout + imported.stderr
    thread, searched = asyncio.run(read_back(location_in(target), thread_id))
    answer = thread["steps"][1]
    assert answer["metadata"] == SHOWN_METADATA and answer["output"] == "Paris is the capital." + STATS
    assert searched == [thread_id]  # "Seine" is only in a version not shown, and the import searches it too

    assert launch("export", "--data-dir", str(source), "--out", str(md), "--format", "md").returncode == 0
    text = next(md.rglob("*.md")).read_text(encoding="utf-8")
    assert "**Assistant:**\n\nParis is the capital.\n\n_(2 other version(s) of this answer are kept" in text
    assert "Seine" not in text
