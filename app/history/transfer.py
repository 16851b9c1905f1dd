"""``python launch.py export [--out DIR] [--format md|json]`` and ``python launch.py import FILE... [--user NAME]``:
the commands over app/history/export.py (chats out, as files) and app/history/restore.py (chats in, from files).
"""
from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, Optional

from app.errors import ErnieChatError
from app.guards.identity import chat_owners
from app.history.database import DatabaseLocation, check_for_reading
from app.history.export import PRESETS_FILE_NAME, export_all
from app.history.restore import ImportOwner, LazyStore, import_files, plural


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
              + (f", and the presets of {plural(users_with_presets, 'user')}" if users_with_presets else ""))
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
          + f"; refused: {plural(report.refused, 'chat')}, {plural(report.files_refused, 'file')})")
    return 1 if not_landed else 0


def run_transfer_command(command: Any) -> int:
    """launch.py's ``export`` / ``import`` (``command`` is app.cli.Command)."""
    from app.history.database import locate

    owner = ImportOwner.checked(command.user, chat_owners(command.settings)) if command.action == "import" \
        else ImportOwner()
    return run_transfer(command.action, locate(command.settings.history), Path(command.out),
                        command.export_format, list(command.files), owner)
