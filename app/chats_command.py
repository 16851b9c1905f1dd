"""``python launch.py chats list | chats give --from NAME --to NAME``: whose the chats are, and moving all of one
person's chats and presets to another. ``users add`` gives the first user what was made before users existed
through the same move (issue 35: that user's sidebar was empty, and nobody logs in as the local user any more).
"""
from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable
from typing import Any, Optional, TypeVar

from app.errors import ErnieChatError, SettingsError
from app.guards.identity import LOCAL_USER, chat_owners
from app.history.database import DatabaseLocation, locate
from app.history.owners import Holdings, give_all, holdings

USAGE = "usage: python launch.py chats list | chats give --from NAME --to NAME"
T = TypeVar("T")


def _on_database(location: DatabaseLocation, job: Callable[[Any], Awaitable[T]]) -> Optional[T]:
    """``job(layer)`` on the chat database; None when there is none yet (a SQLite file never made holds no chats,
    and none is made here)."""
    if location.sqlite_file is not None and not location.sqlite_file.exists():
        return None

    async def run() -> T:
        from app.history import HistoryStore, prepare_database

        await prepare_database(location)  # as import does: a database of an older version is brought up to date
        store = HistoryStore.open(location)
        try:
            return await job(store.layer)
        finally:
            await store.close()

    return asyncio.run(run())


def _location(settings: Any) -> DatabaseLocation:
    location = locate(settings.history)
    if location is None:
        raise ErnieChatError("chats needs the chat database: remove --no-history")
    return location


def give_first_user_what_exists(settings: Any, name: str, keep_local: bool) -> int:
    """After the first ``users add``: the local user's chats and presets become ``name``'s, said in one line (with
    ``keep_local`` they stay, and the line says how to move them later). Returns the exit code."""
    location = locate(settings.history)
    if location is None:  # --no-history: no chats anywhere
        return 0
    later = f"python launch.py chats give --from {LOCAL_USER} --to {name}"
    try:
        if keep_local:
            local = (_on_database(location, holdings) or {}).get(LOCAL_USER, Holdings())
            if local:
                print(f"kept {local} made before users existed with {LOCAL_USER}, whom nobody logs in as now; "
                      f"`{later}` moves them")
            return 0
        given = _on_database(location, lambda layer: give_all(layer, LOCAL_USER, name))
    except ErnieChatError as err:
        print(f"error: {name} was added, but the chats made before users existed are still {LOCAL_USER}'s: {err}; "
              f"`{later}` moves them", file=sys.stderr)
        return 1
    if given is not None and (given.chats or given.presets or given.presets_kept):
        print(f"gave {name} the {given} made before users existed (they are in {name}'s sidebar; "
              "`users add --keep-local` leaves them)")
    return 0


def run_chats_command(command: Any) -> int:
    """``command`` is app.cli.Command with action "chats"; ``files`` hold the verb, ``giver``/``taker`` the names."""
    verb, *rest = command.files or ("list",)
    if rest or verb not in ("list", "give"):
        raise SettingsError(f"chats {' '.join(command.files)!r} is not a chats command; {USAGE}")
    location = _location(command.settings)
    owners = chat_owners(command.settings)
    if verb == "list":
        found = _on_database(location, holdings) or {}
        for who, held in found.items():
            print(f"{who}\t{held}" + ("" if who in owners else "\t(nobody logs in as them here)"))
        print(f"{len(found)} name(s) own chats or presets in {location.shown}", file=sys.stderr)
        return 0
    giver, taker = command.giver, command.taker
    if giver is None or taker is None:
        raise SettingsError(f"chats give needs --from NAME and --to NAME (to one of: {', '.join(owners)}); {USAGE}")
    if taker not in owners:
        raise SettingsError(f"invalid --to {taker!r}: chats can be given to {', '.join(owners)}"
                            + (" (no users exist: `python launch.py users add NAME` adds one)"
                               if owners == [LOCAL_USER] else ""))
    if giver == taker:
        raise SettingsError(f"--from and --to are both {giver!r}: nothing would move")
    given = _on_database(location, lambda layer: give_all(layer, giver, taker))
    if not given or not (given.chats or given.presets or given.presets_kept):
        names = sorted(_on_database(location, holdings) or {})
        print(f"error: {giver} has no chats or presets in {location.shown}; names that have: "
              f"{', '.join(names) or 'none yet'}", file=sys.stderr)
        return 1
    print(f"gave {taker} the {given} of {giver}'s (they are in {taker}'s sidebar at the next page load)")
    return 0
