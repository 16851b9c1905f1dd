"""History settings: the flags, where the database goes, and one line for a bad --database-url."""
from pathlib import Path

import pytest

from app.cli import parse_command
from app.errors import SettingsError
from app.history.database import locate


def test_default_is_sqlite_in_the_user_data_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    location = locate(parse_command([], env_file=None).settings.history)
    assert location.sqlite_file == tmp_path / "ernie-chat" / "chats.db"
    assert location.url == f"sqlite+aiosqlite:///{tmp_path}/ernie-chat/chats.db"
    assert not (tmp_path / "ernie-chat").exists()  # nothing is created before the app starts


def test_data_dir_database_url_and_no_history(tmp_path):
    assert locate(parse_command(["--data-dir", str(tmp_path)], env_file=None).settings.history).sqlite_file == \
        tmp_path / "chats.db"
    pg = locate(parse_command(["--database-url", "postgresql+asyncpg://u:secret@db/ernie"],
                              env_file=None).settings.history)
    assert pg.sqlite_file is None and pg.shown == "postgresql+asyncpg://u:***@db/ernie"
    ro = locate(parse_command(["--database-url", f"sqlite+aiosqlite:///file:{tmp_path}/c.db?mode=ro&uri=true"],
                              env_file=None).settings.history)
    assert ro.sqlite_file == Path(f"{tmp_path}/c.db")
    assert locate(parse_command(["--no-history"], env_file=None).settings.history) is None


def test_a_bad_database_url_is_one_line():
    with pytest.raises(SettingsError) as info:
        parse_command(["--database-url", "mysql://x"], env_file=None)
    assert str(info.value) == ("invalid setting --database-url (ERNIE_CHAT_DATABASE_URL) = '***': value error, "
                               "must start with postgresql+asyncpg:// or sqlite+aiosqlite://")


def test_only_import_users_and_chats_take_arguments():
    assert parse_command(["import", "a.json", "--no-history", "b.json"], env_file=None).files == ("a.json", "b.json")
    with pytest.raises(SettingsError, match="only import, users and chats take arguments"):
        parse_command(["export", "a.json"], env_file=None)
