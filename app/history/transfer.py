"""Export and import chats (and each user's presets, as presets.json): Markdown to read, JSON to keep (a backup
that ``import`` reads back).

``python launch.py export [--out DIR] [--format md|json]`` writes every chat, one file each (0600), under a
folder per user; each message carries its stored time. ``python launch.py import FILE...`` reads our JSON
exports back, and ChatGPT's, Open WebUI's and OpenAI-format chat files (app/history/importers.py reads them);
a chat already there is left alone (with whose it is, when not whom it was imported for), and each file and
chat gets one line: imported, skipped or refused.
The page's download links use the same renderers (app/chat_history.py).
"""
from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from sqlalchemy import func, select

from app.accounts import NAME_RULE
from app.documents.prompt import documents_of
from app.errors import ErnieChatError, HistoryDatabaseError, SettingsError, one_line
from app.guards.identity import LOCAL_USER, chat_owners
from app.history.data_layer import HistoryDataLayer, _dumps, step_values
from app.history.database import DatabaseLocation, check_for_reading, prepare_database
from app.history.import_ids import file_ids, with_own_ids
from app.history.importers import EXPORT_FORMAT, PRESETS_FORMAT, ChatReading, ImportRefused, read_chat_file
from app.history.owners import user_id_of
from app.history.presets import PresetStore
from app.history.schema import elements, steps, threads
from app.private_files import make_private_folder, write_private

PRESETS_FILE_NAME = "presets.json"
ROLE_OF_TYPE = {"user_message": "user", "assistant_message": "assistant", "system_message": "system"}
# The line chat.py puts under an answer ("`prompt 44 tokens` · `answer ...`", or one code span before
# 2026-12-05): part of the page, not the answer.
_STATS_LINE = re.compile(r"\n\n`[^\n]*`\s*$")


def chat_messages(thread: dict) -> list[dict[str, Any]]:
    """The chat's messages as role/content pairs, in order; notices (author "system") left out."""
    found = []
    for step in thread.get("steps") or []:
        role = ROLE_OF_TYPE.get(str(step.get("type")))
        if role is None or role == "system" or step.get("name") == "system":
            continue
        text = str(step.get("output") or "")
        if role == "assistant":
            text = _STATS_LINE.sub("", text)
        message = {"role": role, "content": text, "created_at": step.get("createdAt")}
        documents = documents_of(step.get("metadata"))
        if role == "user" and documents:
            # Names and sizes here; each document's text is in its step's metadata (the "steps" that import reads).
            message["documents"] = [{"name": d.get("name"), "kind": d.get("kind"),
                                     "characters": len(d.get("text") or "")} for d in documents]
        found.append(message)
    return found


def to_json(thread: dict) -> str:
    return json.dumps({"format": EXPORT_FORMAT, "id": thread["id"], "name": thread.get("name"),
                       "created_at": thread.get("createdAt"), "user": thread.get("userIdentifier"),
                       "tags": thread.get("tags") or [], "metadata": thread.get("metadata") or {},
                       "messages": chat_messages(thread), "steps": thread.get("steps") or [],
                       "elements": thread.get("elements") or []}, ensure_ascii=False, indent=1, default=str)


def to_markdown(thread: dict) -> str:
    lines = [f"# {thread.get('name') or 'Chat'}", "", f"_{thread.get('createdAt', '')}_", ""]
    settings = (thread.get("metadata") or {}).get("chat_settings") or {}
    if settings.get("system_prompt"):
        lines += ["> **System prompt:** " + str(settings["system_prompt"]).replace("\n", "\n> "), ""]
    for m in chat_messages(thread):
        # Not "ERNIE": any model may have answered, and the chat does not record which.
        lines += [f"**{'You' if m['role'] == 'user' else 'Assistant'}:**", ""]
        lines += [f"- attached: {d['name']} ({d['kind']}, {d['characters']:,} characters)"
                  for d in m.get("documents", [])] + ([""] if m.get("documents") else [])
        lines += [m["content"], ""]
    return "\n".join(lines)


def file_name(thread: dict, fmt: str) -> str:
    title = re.sub(r"[^\w\-]+", "-", str(thread.get("name") or "chat"), flags=re.UNICODE).strip("-")[:40] or "chat"
    day = str(thread.get("createdAt") or "")[:10]
    return f"{day}-{title}-{thread['id'][:8]}.{fmt}"


async def export_all(layer: HistoryDataLayer, out: Path, fmt: str) -> list[Path]:
    async with layer.engine.connect() as conn:
        rows = (await conn.execute(select(threads.c.id, threads.c.user_identifier)
                                   .order_by(threads.c.created_at))).all()
    written = []
    for row in rows:
        thread = await thread_for_export(layer, row.id)
        if thread is None:
            continue
        folder = out / re.sub(r"[^\w\-.@]+", "_", row.user_identifier or "no-owner")
        make_private_folder(folder)
        path = folder / file_name(thread, fmt)
        write_private(path, to_json(thread) if fmt == "json" else to_markdown(thread))
        written.append(path)
    if fmt == "json":  # each user's presets, for import to bring back (the Markdown export is for reading)
        for user, saved in (await PresetStore(layer).by_user()).items():
            folder = out / re.sub(r"[^\w\-.@]+", "_", user)
            make_private_folder(folder)
            path = folder / PRESETS_FILE_NAME
            write_private(path, json.dumps({"format": PRESETS_FORMAT, "user": user, "presets": saved},
                                           ensure_ascii=False, indent=2))
            written.append(path)
    return written


async def thread_for_export(layer: HistoryDataLayer, thread_id: str) -> Optional[dict]:
    """The chat with every message's stored time: a streamed answer's JSON has none (Chainlit sends it before
    it has a time), and an import would then stamp it with its own, after every question."""
    thread = await layer.get_thread(thread_id)
    if thread is None:
        return None
    async with layer.engine.connect() as conn:
        stored = dict((await conn.execute(select(steps.c.id, steps.c.created_at)
                                          .where(steps.c.thread_id == thread_id))).all())
    thread["steps"] = [{**step, "createdAt": step.get("createdAt") or stored.get(step.get("id"))}
                       for step in thread.get("steps") or []]
    return thread


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
        there = (await conn.execute(select(threads.c.user_identifier).where(threads.c.id == chat["id"]))).first()
        if there:
            return ChatLanding(owner=there.user_identifier or "")
        step_ids, element_ids = file_ids(chat)
        data = with_own_ids(chat, await _taken(conn, steps.c.id, step_ids),
                            await _taken(conn, elements.c.id, element_ids))
        owner = data.get("user")
        user_id = await user_id_of(conn, owner) if owner else None
        await conn.execute(threads.insert().values(
            id=data["id"], name=data.get("name"), user_id=user_id, user_identifier=owner,
            tags=_dumps(data["tags"]), metadata=_dumps(data["metadata"]),
            created_at=data["created_at"], updated_at=data["updated_at"]))
        # The ids are the chat's own now (with_own_ids), so its messages are plain inserts, many per statement.
        rows = [{"id": step["id"], "position": layer.next_position(),
                 **step_values({k: v for k, v in step.items() if k != "feedback"}, data["id"])}
                for step in data["steps"]]
        for start in range(0, len(rows), IMPORT_BATCH):
            unless_given_up()
            await conn.execute(steps.insert(), rows[start:start + IMPORT_BATCH])
            progress.wrote(min(start + IMPORT_BATCH, len(rows)), len(rows))
        for element in data["elements"]:
            await conn.execute(elements.insert().values(id=element["id"], thread_id=data["id"],
                                                        for_id=element.get("forId"), data=_dumps(element)))
        unless_given_up()
        # What the command reports is what was written, counted, not what the file held.
        return ChatLanding(messages=(await conn.execute(select(func.count()).select_from(steps)
                                                        .where(steps.c.thread_id == data["id"]))).scalar_one())

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


async def _taken(conn, column, ids: list[str]) -> set[str]:
    """Which of ``ids`` the database already holds in ``column`` (asked in slices: SQLite bounds a statement's
    parameters)."""
    found: set[str] = set()
    for start in range(0, len(ids), 500):
        found.update((await conn.execute(select(column).where(column.in_(ids[start:start + 500])))).scalars())
    return found


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
        say(f"{name}: {reading.kind}, {_count(len(reading.chats), 'chat')}")
        for chat in reading.chats:
            progress = ImportProgress(lambda written, total, label=chat.label:
                                      say(f"  writing {label}: {written:,} of {total:,} messages"))
            say("  " + await _import_one(store, chat, report, owner, progress))
    return report


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
        return f"imported: {chat.label}, {_count(landed.messages, 'message')}"
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


def run_transfer(action: str, location: Optional[DatabaseLocation], out: Path, fmt: str, files: list[str],
                 owner: ImportOwner = ImportOwner()) -> int:
    """``export`` / ``import`` from the command line; prints one line per file (and chat) and a summary.
    ``owner``: whose the imported chats become (``--user``)."""
    if location is None:
        raise ErnieChatError(f"{action} needs the chat database: remove --no-history")
    if action == "export" and location.sqlite_file is not None and not location.sqlite_file.exists():
        print(f"no chats yet ({location.shown} does not exist)")
        return 0
    if action == "import" and not files:
        raise ErnieChatError("import needs one or more FILE arguments (chat files: an ernie-chat JSON export, "
                             "ChatGPT's conversations.json, an Open WebUI export, or {\"messages\": [...]})")
    if action == "import":
        return asyncio.run(_run_import(location, files, owner))

    async def main() -> int:
        from app.history import HistoryStore

        await check_for_reading(location)  # only reads: a damaged or older database is refused, never changed
        store = HistoryStore.open(location)
        try:
            written = await export_all(store.layer, out, fmt)
        finally:
            await store.close()
        for path in written:
            print(path)
        chats = [path for path in written if path.name != PRESETS_FILE_NAME]
        users_with_presets = len(written) - len(chats)
        print(f"exported {len(chats)} chats from {location.shown} to {out}"
              + (f", and the presets of {_count(users_with_presets, 'user')}" if users_with_presets else ""))
        return 0

    return asyncio.run(main())


async def _run_import(location: DatabaseLocation, files: list[str], owner: ImportOwner) -> int:
    store = LazyStore(location)
    try:
        report = await import_files(store, files, owner, lambda line: print(line, flush=True))
    finally:
        await store.close()
    not_landed = report.refused + report.files_refused + report.elsewhere
    print(f"imported {report.imported} of {report.chats} chats into {location.shown} ({report.there} already "
          "there" + (f"; {report.elsewhere} already another user's" if report.elsewhere else "")
          + f"; refused: {_count(report.refused, 'chat')}, {_count(report.files_refused, 'file')})")
    return 1 if not_landed else 0


def _count(n: int, what: str) -> str:
    return f"{n} {what}{'' if n == 1 else 's'}"


def run_transfer_command(command: Any) -> int:
    """launch.py's ``export`` / ``import`` (``command`` is app.cli.Command)."""
    from app.history.database import locate

    owner = ImportOwner.checked(command.user, chat_owners(command.settings)) if command.action == "import" \
        else ImportOwner()
    return run_transfer(command.action, locate(command.settings.history), Path(command.out),
                        command.export_format, list(command.files), owner)
