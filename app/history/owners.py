"""Whose chats are whose: what each name owns (chats and presets), and giving all of one name's to another.

A chat shows in the sidebar of the user its row names (``threads.user_id`` / ``user_identifier``); presets are
kept per name. Chats made before any account existed belong to the local user (app/guards/identity.py), whom
nobody logs in as once users exist: issue 35 found a first user's sidebar empty, and an import of the export
skipping every chat as "already there". ``launch.py users add`` (the first user) and ``launch.py chats give``
move them here.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass

from chainlit.utils import utc_now
from sqlalchemy import func, select

from app.history.data_layer import HistoryDataLayer
from app.history.schema import presets, threads, users

# Giving waits for the one writer like an import does: the running app may hold the database for a while.
GIVE_WAIT_S = 60.0


def _count(n: int, what: str) -> str:
    return f"{n} {what}{'' if n == 1 else 's'}"


@dataclass(frozen=True)
class Holdings:
    chats: int = 0
    presets: int = 0

    def __bool__(self) -> bool:
        return bool(self.chats or self.presets)

    def __str__(self) -> str:
        return f"{_count(self.chats, 'chat')} and {_count(self.presets, 'preset')}"


@dataclass(frozen=True)
class Given:
    """What moved; ``presets_kept``: the giver's presets left with the giver, because the taker has one of that name
    (a preset is replaced only by its owner saving it again)."""

    chats: int
    presets: int
    presets_kept: tuple[str, ...] = ()

    def __str__(self) -> str:
        kept = "" if not self.presets_kept else (
            f" ({_count(len(self.presets_kept), 'preset')} kept back, the name already taken: "
            + ", ".join(repr(name) for name in self.presets_kept) + ")")
        return f"{Holdings(self.chats, self.presets)}{kept}"


async def holdings(layer: HistoryDataLayer) -> dict[str, Holdings]:
    """Every name that owns a chat or a preset, with how many of each."""
    async with layer.reading() as conn:
        chats: dict[str, int] = dict((await conn.execute(select(threads.c.user_identifier, func.count())
                                         .where(threads.c.user_identifier.is_not(None))
                                         .group_by(threads.c.user_identifier))).all())
        saved: dict[str, int] = dict((await conn.execute(select(presets.c.user_identifier, func.count())
                                         .group_by(presets.c.user_identifier))).all())
    return {name: Holdings(chats.get(name, 0), saved.get(name, 0)) for name in sorted({*chats, *saved})}


async def user_id_of(conn, identifier: str) -> str:
    """The users row of ``identifier`` (as Chainlit makes one at login), made when missing: a chat's owner is
    that row's id."""
    found = (await conn.execute(select(users.c.id).where(users.c.identifier == identifier))).first()
    if found is not None:
        return found.id
    user_id = str(uuid.uuid4())
    await conn.execute(users.insert().values(id=user_id, identifier=identifier, metadata="{}", created_at=utc_now()))
    return user_id


async def give_all(layer: HistoryDataLayer, giver: str, taker: str) -> Given:
    """Every chat and preset of ``giver`` becomes ``taker``'s, in one transaction (all or nothing)."""

    async def write(conn) -> Given:
        taker_id = await user_id_of(conn, taker)
        moved = await conn.execute(threads.update().where(threads.c.user_identifier == giver)
                                   .values(user_id=taker_id, user_identifier=taker))
        taken = set((await conn.execute(select(presets.c.name).where(presets.c.user_identifier == taker))).scalars())
        mine = list((await conn.execute(select(presets.c.name).where(presets.c.user_identifier == giver)
                                        .order_by(presets.c.created_at, presets.c.name))).scalars())
        free = [name for name in mine if name not in taken]
        if free:
            await conn.execute(presets.update().where((presets.c.user_identifier == giver) & presets.c.name.in_(free))
                               .values(user_identifier=taker))
        return Given(moved.rowcount, len(free), tuple(name for name in mine if name in taken))

    return await layer.writer.write(write, f"giving {giver}'s chats to {taker}", wait=GIVE_WAIT_S, raise_errors=True)
