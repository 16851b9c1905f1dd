"""Where the chat database lives, how it is opened (WAL, foreign keys), and its schema checked at start.

``prepare_database`` runs once before the server starts: it creates or migrates the schema and records
its version, refuses a database written by a newer ernie-chat (one line, nothing rewritten), and moves a
corrupt SQLite file aside (never deleted) before starting a fresh one.

Private files: chats are readable by this user only, whatever the umask. A folder the app creates for the
database (the data directory, and any missing folder above it) is made 0700; the default data directory, named
for the app, is made 0700 even when it already exists (earlier versions created it 0755); a folder the user
chose (--data-dir, a --database-url file's folder) that already exists is left as it is. ``chats.db`` is
created 0600 before SQLite opens it, and SQLite gives its -wal, -shm and -journal files the main file's
permissions (app/private_files.py makes them; tests/unit/test_private_files.py).
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from sqlalchemy import event, select
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from app.errors import HistoryDatabaseError
from app.history.schema import MIGRATIONS, SCHEMA_VERSION, meta, metadata
from app.private_files import create_private_file, data_folder, make_private_folder
from app.settings import HistorySettings

log = logging.getLogger("ernie_chat.history")
DB_FILE_NAME = "chats.db"
# A writer waits this long for another connection's lock before SQLite reports "database is locked".
# Our own writes are serialised (app/history/writer.py); this covers export/import run beside the app.
SQLITE_BUSY_TIMEOUT_MS = 10_000


@dataclass(frozen=True)
class DatabaseLocation:
    """Where chats go: a URL for SQLAlchemy, and the SQLite file when it is one."""

    url: str
    sqlite_file: Optional[Path] = None
    # The folder is the app's own (the default data directory): made private even when it already exists.
    own_folder: bool = False

    @property
    def shown(self) -> str:
        """The location for messages, without a password."""
        if self.sqlite_file is not None:
            return str(self.sqlite_file)
        from sqlalchemy.engine import make_url

        return make_url(self.url).render_as_string(hide_password=True)


def locate(settings: HistorySettings) -> Optional[DatabaseLocation]:
    """None with --no-history (nothing is written anywhere); else the database to use."""
    if not settings.history:
        return None
    if settings.database_url is not None:
        url = settings.database_url.get_secret_value()
        if url.startswith("sqlite+aiosqlite:///"):  # a file, maybe as a URI: file:/path?mode=ro&uri=true
            file_part = url.split(":///", 1)[1].split("?", 1)[0]
            return DatabaseLocation(url, Path(file_part.removeprefix("file:")))
        return DatabaseLocation(url)
    path = data_folder(settings) / DB_FILE_NAME
    return DatabaseLocation(f"sqlite+aiosqlite:///{path}", path, own_folder=settings.data_dir is None)


def _sqlite_pragmas(dbapi_connection, _record) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")  # readers never wait for the writer
    cursor.execute("PRAGMA foreign_keys=ON")  # deleting a chat deletes its messages and elements
    # ...and overwrites them in the file: a deleted chat's attached documents must not linger in free pages.
    cursor.execute("PRAGMA secure_delete=ON")
    cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
    cursor.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL: durable at checkpoints, no fsync per message
    cursor.close()


def create_engine(location: DatabaseLocation) -> AsyncEngine:
    # hide_parameters: a failed statement's error names its SQL, never its values (messages, search text), so no
    # chat text reaches the log through a traceback.
    if location.sqlite_file is not None:
        make_private_folder(location.sqlite_file.parent, own=location.own_folder)
        if "mode=ro" not in location.url:  # a read-only URI opens an existing file or fails: nothing to create
            create_private_file(location.sqlite_file)
        engine = create_async_engine(location.url, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_MS / 1000},
                                     hide_parameters=True)
        event.listen(engine.sync_engine, "connect", _sqlite_pragmas)
        return engine
    return create_async_engine(location.url, pool_pre_ping=True, hide_parameters=True)


async def _stored_version(conn: AsyncConnection) -> Optional[int]:
    has_meta = await conn.run_sync(lambda sync: sync.dialect.has_table(sync, meta.name))
    if not has_meta:
        return None
    row = (await conn.execute(select(meta.c.value).where(meta.c.key == "schema_version"))).first()
    return int(row[0]) if row else None


def _newer_version(location: DatabaseLocation, version: int) -> HistoryDatabaseError:
    return HistoryDatabaseError(
        f"the chat database {location.shown} has schema version {version}, newer than this ernie-chat "
        f"knows ({SCHEMA_VERSION}): upgrade ernie-chat, or use another --data-dir / --database-url")


async def check_for_reading(location: DatabaseLocation) -> None:
    """For commands that only read (export): a damaged database, or one of another schema version, is refused
    in one line, and nothing is renamed, created or migrated (the app's start does that)."""
    file = location.sqlite_file
    if file is not None:
        damage = await asyncio.to_thread(sqlite_damage, file)
        if damage:
            raise HistoryDatabaseError(
                f"the chat database {file} is damaged ({damage}); nothing was changed. The app's next start keeps "
                f"it as {file.name}.corrupt-<time> and begins a new one; `sqlite3 {file} .recover` may save chats")
    engine = create_engine(location)
    try:
        async with engine.connect() as conn:
            version = await _stored_version(conn)
    finally:
        await engine.dispose()
    if version is not None and version > SCHEMA_VERSION:
        raise _newer_version(location, version)
    if version is None:
        raise HistoryDatabaseError(f"the chat database {location.shown} holds no ernie-chat chats")
    if version != SCHEMA_VERSION:
        raise HistoryDatabaseError(f"the chat database {location.shown} has schema version {version}; start "
                                   f"ernie-chat once to bring it to version {SCHEMA_VERSION}, then export")


async def _migrate(engine: AsyncEngine, location: DatabaseLocation) -> int:
    async with engine.begin() as conn:
        version = await _stored_version(conn)
        if version is not None and version > SCHEMA_VERSION:
            raise _newer_version(location, version)
        if version is None:
            await conn.run_sync(metadata.create_all)
            await conn.execute(meta.insert().values(key="schema_version", value=str(SCHEMA_VERSION)))
            return SCHEMA_VERSION
        for step in range(version + 1, SCHEMA_VERSION + 1):
            log.info("migrating the chat database to schema version %d", step)
            await MIGRATIONS[step](conn)
        if version != SCHEMA_VERSION:
            await conn.execute(meta.update().where(meta.c.key == "schema_version").values(value=str(SCHEMA_VERSION)))
        return SCHEMA_VERSION


# PRAGMA quick_check reads the whole file: on a large history it could hold the start for long, so it stops
# here and the start goes on (the check is for damage seen at once, such as a truncated or overwritten file).
QUICK_CHECK_SECONDS = 5.0


def sqlite_damage(file: Path, seconds: float = QUICK_CHECK_SECONDS) -> Optional[str]:
    """What PRAGMA quick_check finds wrong with the file, in one line; None when sound, or when the check ran
    past ``seconds`` (logged). Opens the file read-only: nothing in it is changed."""
    import sqlite3

    deadline = time.monotonic() + seconds
    try:
        with contextlib.closing(sqlite3.connect(f"{file.resolve().as_uri()}?mode=ro", uri=True)) as conn:
            conn.set_progress_handler(lambda: time.monotonic() > deadline, 10_000)  # non-zero: interrupt
            rows = conn.execute("PRAGMA quick_check").fetchall()
    except sqlite3.OperationalError as err:  # interrupted, locked, cannot open: says nothing of damage
        log.warning("the chat database %s was not checked (%s)", file,
                    f"stopped after {seconds:.0f} s, {file.stat().st_size / 1e6:.0f} MB" if str(err) == "interrupted"
                    else err)
        return None
    except sqlite3.DatabaseError as err:  # "file is not a database", "database disk image is malformed"
        return str(err)
    result = "; ".join(str(row[0]) for row in rows[:3])
    return None if result == "ok" else result


def move_aside(path: Path) -> Path:
    """Rename a damaged database (and its WAL files) to chats.db.corrupt-<time>; never delete it."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    target = path.with_name(f"{path.name}.corrupt-{stamp}")
    n = 1
    while target.exists():
        n += 1
        target = path.with_name(f"{path.name}.corrupt-{stamp}-{n}")
    path.rename(target)
    for suffix in ("-wal", "-shm"):
        side = path.with_name(path.name + suffix)
        if side.exists():
            side.rename(target.with_name(target.name + suffix))
    return target


async def prepare_database(location: DatabaseLocation,
                           on_damaged: Callable[[Path], None] = lambda kept_as: None) -> int:
    """Make the database ready for this version of the app; returns the schema version. A damaged SQLite file
    is kept aside and ``on_damaged`` told where, so that the page can say so."""
    file = location.sqlite_file
    if file is not None and file.exists() and file.stat().st_size > 0:
        damage = await asyncio.to_thread(sqlite_damage, file)
        if damage:
            moved = move_aside(file)
            log.warning("the chat database %s is damaged (%s); kept it as %s and started a new one", file,
                        damage, moved)
            on_damaged(moved)
    engine = create_engine(location)
    try:
        return await _migrate(engine, location)
    except HistoryDatabaseError:
        raise
    except Exception as err:
        raise HistoryDatabaseError(f"cannot open the chat database {location.shown}: {err}".splitlines()[0]) from err
    finally:
        await engine.dispose()
