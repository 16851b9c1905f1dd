"""Chats into the database from files: our JSON exports, and ChatGPT's, Open WebUI's and OpenAI-format chat files
(app/history/importers.py reads them). ``python launch.py import FILE...`` (app/history/transfer.py) gives each
file and chat one line: imported, skipped (a chat already there, with whose it is when not whom it was imported
for) or refused; one refused file or chat never stops the rest, and a long chat says how far it got.
"""
from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from app.accounts import NAME_RULE
from app.errors import ErnieChatError, HistoryDatabaseError, SettingsError, one_line
from app.guards.identity import LOCAL_USER
from app.history.data_layer import HistoryDataLayer
from app.history.database import DatabaseLocation, prepare_database
from app.history.import_ids import file_ids, with_own_ids
from app.history.importers import ChatReading, ImportRefused, read_chat_file
from app.history.owners import user_id_of
from app.history.presets import PresetStore

# A chat being written is waited for however long it takes (20,000 messages took ~75 s, and a 60-s limit on the
# whole chat failed every chat that large with a false "database is busy": issue 36, N8); what is bounded is the
# time without progress, the database refusing (locked by another program) and nothing written.
IMPORT_STALL_S = 60.0
IMPORT_BATCH = 1_000  # messages per insert: one statement for many rows, instead of several per message
IMPORT_TELL_EVERY = 5_000  # a long chat says how far it got, every this many messages


@dataclass(frozen=True)
class ChatLanding:
    """What ``import_chat`` did: ``messages`` rows written; or None, when a chat with its id was already there, as
    ``owner``'s chat ("" when nobody's)."""

    messages: Optional[int] = None
    owner: Optional[str] = None


@dataclass
class ImportProgress:
    """How far the chat being written got; ``told(written, total)`` is called every IMPORT_TELL_EVERY messages."""

    told: Callable[[int, int], None] = lambda written, total: None
    written: int = 0
    last_beat: Optional[float] = None  # when the write last moved; None until it has begun (it may queue behind one)

    def wrote(self, written: int, total: int) -> None:
        if written // IMPORT_TELL_EVERY > self.written // IMPORT_TELL_EVERY:
            self.told(written, total)
        self.written, self.last_beat = written, time.monotonic()


class _GivenUp(Exception):
    """Raised inside a chat's write once the command has reported it refused: its transaction is rolled back."""


async def import_chat(layer: HistoryDataLayer, chat: dict, progress: Optional[ImportProgress] = None) -> ChatLanding:
    """Store one chat as app/history/importers.py reads it (our export's shape)."""
    progress = progress or ImportProgress()
    written: list[asyncio.Future] = []

    def unless_given_up() -> None:
        # A write that got the database only after the command gave up on it must not land: it was reported refused.
        if written and written[0].cancelled():
            raise _GivenUp

    async def write(conn) -> ChatLanding:
        progress.wrote(0, 0)  # a new try (after the database refused one) starts over
        there = await layer.chat_owner(conn, chat["id"])
        if there is not None:
            return ChatLanding(owner=there)
        step_ids, element_ids = file_ids(chat)
        data = with_own_ids(chat, await layer.taken_ids(conn, "steps", step_ids),
                            await layer.taken_ids(conn, "elements", element_ids))
        owner = data.get("user")
        user_id = await user_id_of(conn, owner) if owner else None

        def between(written: int, total: int) -> None:
            unless_given_up()
            progress.wrote(written, total)

        # The ids are the chat's own now (with_own_ids), so its messages are plain inserts, many per statement.
        return ChatLanding(messages=await layer.insert_chat(conn, data, user_id, IMPORT_BATCH, between))

    # The command says what became of each chat, so it waits for each.
    written.append(layer.writer.submit(write, "importing a chat"))
    while True:
        try:
            return await asyncio.wait_for(asyncio.shield(written[0]), IMPORT_STALL_S)
        except asyncio.TimeoutError:
            if progress.last_beat is not None and time.monotonic() - progress.last_beat > IMPORT_STALL_S:
                written[0].cancel()  # never tried again, nor kept if it gets the database now: reported refused
                raise HistoryDatabaseError(f"the chat database took nothing for {IMPORT_STALL_S:.0f} s (locked "
                                           "by another program?); import this file again later") from None


@dataclass
class ImportReport:
    """What became of each chat; the command's exit code is 1 when anything was refused or did not land where it
    was asked to (``elsewhere``: a chat with its id is already another user's)."""

    imported: int = 0
    there: int = 0
    elsewhere: int = 0
    refused: int = 0
    files_refused: int = 0

    @property
    def chats(self) -> int:
        return self.imported + self.there + self.elsewhere + self.refused


class LazyStore:
    """The database, opened (created, migrated) only once a file holds a chat to store: a run whose files
    are all refused writes nothing."""

    def __init__(self, location: DatabaseLocation) -> None:
        self.location = location
        self.store: Any = None

    async def layer(self) -> HistoryDataLayer:
        if self.store is None:
            from app.history import HistoryStore

            await prepare_database(self.location)
            self.store = HistoryStore.open(self.location)
        return self.store.layer

    async def close(self) -> None:
        if self.store is not None:
            await self.store.close()


@dataclass(frozen=True)
class ImportOwner:
    """Whose the imported chats become (``--user``). Named: every chat and presets file goes to ``name``. Not
    named: ours keep the owner they were exported with, other apps' chats go to the one local user; either is
    refused, with a line naming the flag, where that owner does not log in here (``choices``): kept, it would be
    in nobody's sidebar, and importing it again would skip it as already there.
    """

    name: Optional[str] = None
    choices: tuple[str, ...] = (LOCAL_USER,)

    @classmethod
    def checked(cls, name: Optional[str], choices: list[str]) -> ImportOwner:
        """Raises SettingsError (one line, the flag and the allowed values) for a name nobody here logs in as."""
        if name is not None and name not in choices:
            raise SettingsError(f"invalid --user {name!r}: chats can be imported for {', '.join(choices)}"
                                + ("" if choices != [LOCAL_USER] else " (no users exist: `python launch.py users "
                                                                      "add NAME` adds one)"))
        return cls(name, tuple(choices))

    @property
    def for_unowned(self) -> str:
        """What the readers put where a chat names no owner: the local user, or a mark nobody can log in as."""
        return self.name or (LOCAL_USER if self.choices == (LOCAL_USER,) else _NOBODY)

    def whose(self, in_file: Optional[str]) -> Optional[str]:
        """The sidebar a chat or presets file goes to, given the owner the file names; None: refused."""
        if self.name is not None:
            return self.name
        return in_file if in_file in self.choices else None

    def refusal(self, in_file: Optional[str], whose: str = "chat is it") -> str:
        allowed = f"give --user NAME ({', '.join(self.choices)})"
        if in_file in (None, _NOBODY):
            return f"whose {whose}? users log in here: {allowed}"
        add = f", or add that user first (`python launch.py users add {in_file}`)" if NAME_RULE.fullmatch(in_file) \
            else ""
        return f"whose {whose}? {in_file[:80]!r} does not log in here: {allowed}{add}"


_NOBODY = "\0unowned"  # never a user name (app/accounts.py NAME_RULE), and refused before anything is stored


async def import_files(store: LazyStore, files: list[str], owner: ImportOwner,
                       say: Callable[[str], None]) -> ImportReport:
    """Each file, then each of its chats, with one line each; a refused file or chat never stops the rest."""
    report = ImportReport()
    for name in files:
        try:
            reading = read_chat_file(Path(name), owner.for_unowned)
        except ImportRefused as err:
            report.files_refused += 1
            say(f"{name}: refused: {err}")
            continue
        if reading.presets is not None:
            in_file, saved = reading.presets
            user = owner.whose(in_file)
            if user is None:
                report.files_refused += 1
                say(f"{name}: refused: {owner.refusal(in_file, 'presets are they')}")
                continue
            say(f"{name}: {reading.kind}")
            for line in await _import_presets(store, user, saved, report):
                say("  " + line)
            continue
        say(f"{name}: {reading.kind}, {plural(len(reading.chats), 'chat')}")
        for chat in reading.chats:
            progress = ImportProgress(_writing_line(say, chat.label))
            say("  " + await _import_one(store, chat, report, owner, progress))
    return report


def _writing_line(say: Callable[[str], None], label: str) -> Callable[[int, int], None]:
    """How far one chat's write got, as the import's line says it."""
    return lambda written, total: say(f"  writing {label}: {written:,} of {total:,} messages")


async def _import_one(store: LazyStore, chat: ChatReading, report: ImportReport, owner: ImportOwner,
                      progress: ImportProgress) -> str:
    if chat.data is None:
        report.refused += 1
        return f"refused: {chat.label}: {chat.refused}"
    user = owner.whose(chat.data.get("user"))
    if user is None:
        report.refused += 1
        return f"refused: {chat.label}: {owner.refusal(chat.data.get('user'))}"
    chat.data["user"] = user
    try:
        landed = await import_chat(await store.layer(), chat.data, progress)
    except ErnieChatError as err:  # HistoryDatabaseError too: this chat is refused, the file's others are tried
        report.refused += 1
        return f"refused: {chat.label}: {err}"
    except Exception as err:  # noqa: BLE001 - a database error for this chat only (e.g. a clashing message id)
        report.refused += 1
        return f"refused: {chat.label}: the database refused it ({one_line(err)})"
    if landed.messages is not None:
        report.imported += 1
        return f"imported: {chat.label}, {plural(landed.messages, 'message')}"
    if landed.owner == user:
        report.there += 1
        return f"skipped, already there: {chat.label}"
    # The same chat, kept under another name (issue 35: every chat of the local user, after `users add alice`):
    # a copy would clash with its id, and moving it is for `chats give` to do, said here.
    report.elsewhere += 1
    owner_there = landed.owner
    whose = f"{owner_there}'s chat" if owner_there else "a chat of nobody's"
    move = (f"; `python launch.py chats give --from {owner_there} --to {user}` moves all of {owner_there}'s"
            if owner_there else "")
    return f"skipped, already there as {whose}, not {user}'s: {chat.label}{move}"


async def _import_presets(store: LazyStore, user: str, saved: dict[str, dict[str, Any]],
                          report: ImportReport) -> list[str]:
    """Each preset of a presets file, one line each; a name the user already has is left as it is."""
    presets = PresetStore(await store.layer())
    have = await presets.all(user)
    lines = []
    for name, settings in saved.items():
        if name in have:
            lines.append(f"skipped, already there: preset {name!r}")
            continue
        try:
            await presets.save(user, name, settings)
        except ErnieChatError as err:
            report.refused += 1
            lines.append(f"refused: preset {name[:60]!r}: {err}")
            continue
        lines.append(f"imported: preset {name!r}")
    return lines


def plural(n: int, what: str) -> str:
    return f"{n} {what}{'' if n == 1 else 's'}"
