"""Chats are private whatever the umask (issue 24): the data directory the app creates is 0700, chats.db and its
-wal and -shm files 0600; a folder the user chose that already exists is left as it is."""
from __future__ import annotations

import asyncio
import contextlib
import os
import stat
import uuid
from pathlib import Path

import pytest

from app.history import HistoryStore, locate, prepare_database
from app.history.database import DB_FILE_NAME
from app.settings import HistorySettings
from tests.support.fakes import logged_in_user


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@contextlib.contextmanager
def umask(value: int):
    old = os.umask(value)
    try:
        yield
    finally:
        os.umask(old)


def write_a_chat_and_look(location) -> dict[str, int]:
    """Start the database as the app does, store a message, and, with the store still open (the -wal and -shm
    files exist while a connection is), give each file's mode."""
    async def main():
        await prepare_database(location)
        store = HistoryStore.open(location)
        try:
            user = await logged_in_user(store.layer, "alice")
            thread_id = str(uuid.uuid4())
            await store.layer.store_now({"id": str(uuid.uuid4()), "threadId": thread_id, "type": "user_message",
                                         "name": "User", "output": "a private question",
                                         "createdAt": "2026-12-03T10:00:00.000Z"}, user.id)
            await store.layer.writer.drain()
            assert (await store.layer.get_thread(thread_id))["steps"][0]["output"] == "a private question"
            file = location.sqlite_file
            return {name: mode(file.with_name(name)) for name in (file.name, f"{file.name}-wal", f"{file.name}-shm")}
        finally:
            await store.close()

    return asyncio.run(main())


@pytest.mark.parametrize("mask", [0o022, 0o000])
def test_a_new_data_directory_and_database_are_private_whatever_the_umask(tmp_path, mask):
    data = tmp_path / "new" / "data"  # neither folder exists: both are the app's
    with umask(mask):
        files = write_a_chat_and_look(locate(HistorySettings(data_dir=data)))
    assert files == {DB_FILE_NAME: 0o600, f"{DB_FILE_NAME}-wal": 0o600, f"{DB_FILE_NAME}-shm": 0o600}
    assert mode(data) == 0o700 and mode(data.parent) == 0o700


@pytest.mark.parametrize("mask", [0o022, 0o000])
def test_the_default_data_directory_is_made_private_even_when_it_exists(tmp_path, monkeypatch, mask):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    location = locate(HistorySettings())
    folder = location.sqlite_file.parent
    assert folder == tmp_path / "xdg" / "ernie-chat"
    folder.mkdir(parents=True)
    folder.chmod(0o755)  # as earlier versions left it
    with umask(mask):
        files = write_a_chat_and_look(location)
    assert mode(folder) == 0o700 and set(files.values()) == {0o600}


def test_a_folder_the_user_chose_is_left_as_it_is(tmp_path):
    data = tmp_path / "shared"
    data.mkdir()
    data.chmod(0o750)  # shared with a group on purpose
    with umask(0o022):
        files = write_a_chat_and_look(locate(HistorySettings(data_dir=data)))
    assert mode(data) == 0o750 and set(files.values()) == {0o600}


def test_a_sqlite_url_gets_a_private_file_too(tmp_path):
    path = tmp_path / "elsewhere" / "mine.db"
    with umask(0o000):
        files = write_a_chat_and_look(locate(HistorySettings(database_url=f"sqlite+aiosqlite:///{path}")))
    assert set(files.values()) == {0o600} and mode(path.parent) == 0o700


@pytest.mark.parametrize("mask", [0o022, 0o000, 0o200])
def test_a_replaced_file_and_a_temporary_folder_are_private_whatever_the_umask(tmp_path, mask):
    """The users file (written whole or not at all) and the page's per-process folder: 0600 and 0700 set again past
    the umask, as every other private file (a umask of 0o200 takes the owner's write bit from mkdtemp's 0700)."""
    from app.private_files import make_private_temp_folder, replace_private

    users = tmp_path / "users.json"
    users.write_text("old")
    os.chmod(users, 0o644)
    with umask(mask):
        replace_private(users, "new\n")
        folder = make_private_temp_folder("ernie-chat-test-")
    try:
        assert users.read_text() == "new\n" and mode(users) == 0o600
        assert [p.name for p in tmp_path.iterdir()] == ["users.json"]  # no temporary file left beside it
        assert mode(folder) == 0o700
    finally:
        folder.rmdir()
