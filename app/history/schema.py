"""The chat database's tables (SQLAlchemy Core, the same on SQLite and PostgreSQL) and its migrations.

Each step (message) is kept whole as JSON in ``data``, next to the few columns that are queried (thread,
order, searchable text). Chainlit's own SQLAlchemyDataLayer maps every step field to a column and breaks
on SQLite where those fields are lists or dicts (Chainlit #2528 tags, #2750 modes, #1545 metadata); a
JSON column has nothing to break and survives Chainlit adding fields.
"""
from __future__ import annotations

import json
from collections.abc import Awaitable, Callable

from sqlalchemy import (
    BigInteger,
    Column,
    ForeignKey,
    Index,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    bindparam,
    select,
)
from sqlalchemy.ext.asyncio import AsyncConnection

from app.history.messages import search_text

SCHEMA_VERSION = 3

metadata = MetaData()

meta = Table(
    "ernie_meta", metadata,
    Column("key", String(64), primary_key=True),
    Column("value", Text, nullable=False),
)

users = Table(
    "users", metadata,
    Column("id", String(36), primary_key=True),
    Column("identifier", String(255), nullable=False),
    Column("metadata", Text, nullable=False, default="{}"),
    Column("created_at", String(40), nullable=False),
    UniqueConstraint("identifier", name="uq_users_identifier"),
)

threads = Table(
    "threads", metadata,
    Column("id", String(64), primary_key=True),
    Column("name", Text),
    Column("user_id", String(36), ForeignKey("users.id", ondelete="CASCADE")),
    Column("user_identifier", String(255)),
    Column("tags", Text, nullable=False, default="[]"),
    Column("metadata", Text, nullable=False, default="{}"),
    Column("created_at", String(40), nullable=False),
    Column("updated_at", String(40), nullable=False),
    Index("ix_threads_owner_updated", "user_id", "updated_at"),
)

steps = Table(
    "steps", metadata,
    Column("id", String(64), primary_key=True),
    Column("thread_id", String(64), ForeignKey("threads.id", ondelete="CASCADE"), nullable=False),
    Column("type", String(64), nullable=False),
    Column("created_at", String(40)),
    # Arrival order: Chainlit's timestamps tie at millisecond resolution when messages come fast.
    Column("position", BigInteger, nullable=False),
    Column("search_text", Text, nullable=False, default=""),
    Column("data", Text, nullable=False),
    Index("ix_steps_thread_order", "thread_id", "created_at", "position"),
)

elements = Table(
    "elements", metadata,
    Column("id", String(64), primary_key=True),
    Column("thread_id", String(64), ForeignKey("threads.id", ondelete="CASCADE"), nullable=False),
    Column("for_id", String(64)),
    Column("data", Text, nullable=False),
    Index("ix_elements_thread", "thread_id"),
)

feedbacks = Table(
    "feedbacks", metadata,
    Column("id", String(64), primary_key=True),
    Column("step_id", String(64), ForeignKey("steps.id", ondelete="CASCADE"), nullable=False),
    Column("value", BigInteger, nullable=False),
    Column("comment", Text),
)

# A user's saved chat settings (system prompt, temperature, top_p, answer length) under a name of their own.
presets = Table(
    "presets", metadata,
    Column("id", String(36), primary_key=True),
    Column("user_identifier", String(255), nullable=False),
    Column("name", String(200), nullable=False),
    Column("settings", Text, nullable=False),
    Column("created_at", String(40), nullable=False),
    UniqueConstraint("user_identifier", "name", name="uq_presets_owner_name"),
)


async def _add_presets(conn: AsyncConnection) -> None:
    await conn.run_sync(lambda sync_conn: presets.create(sync_conn))


# Messages read and rewritten per statement while their search text is made again: a bounded slice in memory
# however many chats the database holds, one statement per slice.
SEARCH_TEXT_BATCH = 500


async def _search_every_version(conn: AsyncConnection) -> None:
    """Every message's search text made again by today's rule (app/history/messages.py ``search_text``): the
    versions and branches a message keeps are searched too, and chats written before are found by them. Read in
    slices by id (each slice starts past the last id of the one before: no row read twice, none skipped); a
    message whose stored JSON cannot be read keeps the text it has."""
    last = ""
    while True:
        rows = (await conn.execute(select(steps.c.id, steps.c.data).where(steps.c.id > last)
                                   .order_by(steps.c.id).limit(SEARCH_TEXT_BATCH))).all()
        if not rows:
            return
        made = []
        for row in rows:
            try:
                step = json.loads(row.data)
            except ValueError:
                continue
            if isinstance(step, dict):
                made.append({"row_id": row.id, "text": search_text(step)})
        if made:
            await conn.execute(steps.update().where(steps.c.id == bindparam("row_id"))
                               .values(search_text=bindparam("text")), made)
        last = rows[-1].id


# version -> the step that brings a database from version - 1 to it. Add one per schema change; never edit
# a released one (a user's database may be at any older version).
Migration = Callable[[AsyncConnection], Awaitable[None]]
MIGRATIONS: dict[int, Migration] = {2: _add_presets, 3: _search_every_version}
