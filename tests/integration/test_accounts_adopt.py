"""Accounts adopt what exists (issue 35 item 1): someone chats without accounts, then runs `launch.py users add`;
the first user gets the chats and presets made before, `chats give` moves them later, and `import` says whose a
chat already is. Driven as a person types it: launch.py in a subprocess, then the chats the sidebar lists.

Slow-ish: each launch.py run is a new Python process (its imports take seconds)."""
from __future__ import annotations

import asyncio
import subprocess
import sys
import uuid

from chainlit.types import Pagination, ThreadFilter

from app.accounts import Accounts
from app.history import HistoryStore, prepare_database
from app.history.database import DatabaseLocation
from app.history.presets import PresetStore
from tests.support.app_process import ROOT
from tests.support.fakes import logged_in_user


def launch(*args: str, stdin: str = "") -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "launch.py", *args], cwd=ROOT, input=stdin, capture_output=True,
                          text=True, timeout=120)


def location_in(folder) -> DatabaseLocation:
    return DatabaseLocation(f"sqlite+aiosqlite:///{folder / 'chats.db'}", folder / "chats.db")


async def chat_as_the_local_user(folder, titles: list[str]) -> None:
    """What chatting on loopback without accounts leaves: chats and a preset of the one local user."""
    location = location_in(folder)
    await prepare_database(location)
    store = HistoryStore.open(location)
    try:
        user = await logged_in_user(store.layer, "local")
        for title in titles:
            thread_id = str(uuid.uuid4())
            await store.layer.create_step({"id": str(uuid.uuid4()), "threadId": thread_id, "type": "user_message",
                                           "name": "local", "output": title, "createdAt": "2026-12-06T08:00:00.000Z"})
            await store.layer.update_thread(thread_id, name=title, user_id=user.id)
        await PresetStore(store.layer).save("local", "Brief", {"system_prompt": "be brief", "temperature": 0.2})
    finally:
        await store.close()


async def sidebar_of(folder, name: str) -> tuple[list[str], list[str]]:
    """The chat titles ``name``'s sidebar lists (the data layer's list_threads, as the page asks it) and their
    presets."""
    store = HistoryStore.open(location_in(folder))
    try:
        user = await store.layer.get_user(name)
        titles = [] if user is None else [t["name"] for t in (await store.layer.list_threads(
            Pagination(first=50), ThreadFilter(userId=user.id))).data]
        return sorted(titles), sorted(await PresetStore(store.layer).all(name))
    finally:
        await store.close()


def test_the_first_user_gets_the_chats_made_before_accounts(tmp_path):
    asyncio.run(chat_as_the_local_user(tmp_path, ["the weather in Paris", "量子纠缠"]))
    added = launch("users", "add", "alice", "--data-dir", str(tmp_path), stdin="alice-secret-1\n")
    assert added.returncode == 0, added.stderr
    assert added.stdout.splitlines()[1] == ("gave alice the 2 chats and 1 preset made before users existed (they "
                                            "are in alice's sidebar; `users add --keep-local` leaves them)")
    assert asyncio.run(sidebar_of(tmp_path, "alice")) == (["the weather in Paris", "量子纠缠"], ["Brief"])
    assert asyncio.run(sidebar_of(tmp_path, "local")) == ([], [])
    second = launch("users", "add", "bob", "--data-dir", str(tmp_path), stdin="bob-secret-12\n")
    assert second.returncode == 0 and len(second.stdout.splitlines()) == 1  # only the first user adopts
    assert asyncio.run(sidebar_of(tmp_path, "bob")) == ([], [])


def test_keep_local_declines_and_chats_give_moves_them_later(tmp_path):
    asyncio.run(chat_as_the_local_user(tmp_path, ["the weather in Paris", "量子纠缠"]))
    added = launch("users", "add", "alice", "--keep-local", "--data-dir", str(tmp_path), stdin="alice-secret-1\n")
    assert added.returncode == 0, added.stderr
    assert added.stdout.splitlines()[1] == (
        "kept 2 chats and 1 preset made before users existed with local, whom nobody logs in as now; "
        "`python launch.py chats give --from local --to alice` moves them")
    assert asyncio.run(sidebar_of(tmp_path, "alice")) == ([], [])

    listed = launch("chats", "list", "--data-dir", str(tmp_path))
    assert listed.stdout == "local\t2 chats and 1 preset\t(nobody logs in as them here)\n"
    wrong = launch("chats", "give", "--from", "local", "--to", "mallory", "--data-dir", str(tmp_path))
    assert wrong.returncode == 2 and wrong.stderr == "error: invalid --to 'mallory': chats can be given to alice\n"
    given = launch("chats", "give", "--from", "local", "--to", "alice", "--data-dir", str(tmp_path))
    assert given.returncode == 0, given.stderr
    assert given.stdout == ("gave alice the 2 chats and 1 preset of local's (they are in alice's sidebar at the next "
                            "page load)\n")
    assert asyncio.run(sidebar_of(tmp_path, "alice")) == (["the weather in Paris", "量子纠缠"], ["Brief"])
    again = launch("chats", "give", "--from", "local", "--to", "alice", "--data-dir", str(tmp_path))
    assert again.returncode == 1
    assert again.stderr == f"error: local has no chats or presets in {tmp_path / 'chats.db'}; names that have: alice\n"


def test_import_says_whose_a_chat_already_is_and_fails_when_none_landed(tmp_path):
    """The issue's own steps: export, add a user who does not take the local chats, import them for her: f9ee3fd
    printed "imported 0 of 28 ... (28 already there)" and exited 0."""
    data, out = tmp_path / "data", tmp_path / "backup"
    asyncio.run(chat_as_the_local_user(data, ["the weather in Paris", "量子纠缠"]))
    assert launch("export", "--data-dir", str(data), "--out", str(out)).returncode == 0
    Accounts(data / "users.json").add("alice", "alice-secret-1")  # the local chats stay local's (as --keep-local)
    chat_files = sorted(str(f) for f in (out / "local").glob("*.json") if f.name != "presets.json")
    imported = launch("import", "--user", "alice", "--data-dir", str(data), *chat_files)
    assert imported.returncode == 1, imported.stdout
    skipped = [line for line in imported.stdout.splitlines() if line.startswith("  skipped")]
    assert len(skipped) == 2 and all(
        line.startswith("  skipped, already there as local's chat, not alice's: chat 1 ") and line.endswith(
            "; `python launch.py chats give --from local --to alice` moves all of local's") for line in skipped)
    assert imported.stdout.splitlines()[-1] == (
        f"imported 0 of 2 chats into {data / 'chats.db'} (0 already there; 2 already another user's; refused: "
        "0 chats, 0 files)")
