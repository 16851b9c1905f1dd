"""Export and import chats: Markdown to read, JSON to keep (a backup that ``import`` reads back).

``python launch.py export [--out DIR] [--format md|json]`` writes every chat, one file each, under a folder
per user; ``python launch.py import FILE...`` reads JSON exports back (a chat already there is left alone).
The page's download links use the same renderers (app/chat_history.py).
"""
from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any, Optional

from sqlalchemy import select

from app.errors import ErnieChatError
from app.history.data_layer import HistoryDataLayer, _dumps
from app.history.database import DatabaseLocation, check_for_reading, prepare_database
from app.history.schema import threads, users

EXPORT_FORMAT = "ernie-chat/chat-v1"
ROLE_OF_TYPE = {"user_message": "user", "assistant_message": "assistant", "system_message": "system"}
# The stats line chat.py puts under an answer ("`prompt 44 tokens · ...`"): part of the page, not the answer.
_STATS_LINE = re.compile(r"\n\n`[^`\n]*`\s*$")


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
        found.append({"role": role, "content": text, "created_at": step.get("createdAt")})
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
        lines += [f"**{'You' if m['role'] == 'user' else 'ERNIE'}:**", "", m["content"], ""]
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
        thread = await layer.get_thread(row.id)
        if thread is None:
            continue
        folder = out / re.sub(r"[^\w\-.@]+", "_", row.user_identifier or "no-owner")
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / file_name(thread, fmt)
        path.write_text(to_json(thread) if fmt == "json" else to_markdown(thread), encoding="utf-8")
        written.append(path)
    return written


def read_export(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise ErnieChatError(f"cannot import {path}: {err} (import reads the .json files of "
                             "'python launch.py export --format json')") from None
    if not isinstance(data, dict) or data.get("format") != EXPORT_FORMAT:
        raise ErnieChatError(f"cannot import {path}: not an ernie-chat JSON export (format {EXPORT_FORMAT})")
    return data


IMPORT_WAIT_S = 60.0


async def import_chat(layer: HistoryDataLayer, data: dict) -> bool:
    """Store one exported chat; False when a chat with its id is already there."""
    async def write(conn) -> bool:
        if (await conn.execute(select(threads.c.id).where(threads.c.id == data["id"]))).first():
            return False
        owner = data.get("user")
        user_id = None
        if owner:
            found = (await conn.execute(select(users.c.id).where(users.c.identifier == owner))).first()
            if found is None:
                import uuid

                from chainlit.utils import utc_now

                user_id = str(uuid.uuid4())
                await conn.execute(users.insert().values(id=user_id, identifier=owner, metadata="{}",
                                                         created_at=utc_now()))
            else:
                user_id = found.id
        created = data.get("created_at") or ""
        await conn.execute(threads.insert().values(
            id=data["id"], name=data.get("name"), user_id=user_id, user_identifier=owner,
            tags=_dumps(data.get("tags") or []), metadata=_dumps(data.get("metadata") or {}),
            created_at=created, updated_at=max([created] + [str(s.get("createdAt") or "") for s in data["steps"]])))
        for step in data.get("steps") or []:
            await layer._step_write({**step, "threadId": data["id"]})(conn)
        for element in data.get("elements") or []:
            from app.history.schema import elements

            await conn.execute(elements.insert().values(id=element["id"], thread_id=data["id"],
                                                        for_id=element.get("forId"), data=_dumps(element)))
        return True

    # The command says what became of each chat, so it waits for each; a database locked by the running app is
    # waited for as long as that takes to clear, within a bound.
    return await layer.writer.write(write, "importing a chat", wait=IMPORT_WAIT_S, raise_errors=True)


def run_transfer(action: str, location: Optional[DatabaseLocation], out: Path, fmt: str, files: list[str]) -> int:
    """``export`` / ``import`` from the command line; prints one line per file and a summary."""
    if location is None:
        raise ErnieChatError(f"{action} needs the chat database: remove --no-history")
    if action == "export" and location.sqlite_file is not None and not location.sqlite_file.exists():
        print(f"no chats yet ({location.shown} does not exist)")
        return 0
    if action == "import" and not files:
        raise ErnieChatError("import needs one or more FILE arguments (the .json files of an export)")
    exports = [read_export(Path(f)) for f in files] if action == "import" else []

    async def main() -> int:
        from app.history import HistoryStore

        if action == "export":  # only reads: a damaged or older database is refused, never changed
            await check_for_reading(location)
        else:
            await prepare_database(location)
        store = HistoryStore.open(location)
        try:
            if action == "export":
                written = await export_all(store.layer, out, fmt)
                for path in written:
                    print(path)
                print(f"exported {len(written)} chats from {location.shown} to {out}")
                return 0
            added = 0
            for path, data in zip(files, exports, strict=True):
                if await import_chat(store.layer, data):
                    added += 1
                    print(f"imported {path}")
                else:
                    print(f"skipped {path}: chat {data['id']} is already there")
            print(f"imported {added} of {len(files)} chats into {location.shown}")
            return 0
        finally:
            await store.close()

    return asyncio.run(main())


def run_transfer_command(command: Any) -> int:
    """launch.py's ``export`` / ``import`` (``command`` is app.cli.Command)."""
    from app.history.database import locate

    return run_transfer(command.action, locate(command.settings.history), Path(command.out),
                        command.export_format, list(command.files))
