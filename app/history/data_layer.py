"""Chainlit's data layer over our own schema (app/history/schema.py): users, chats, messages, elements.

Why our own ``BaseDataLayer`` and not Chainlit's ``SQLAlchemyDataLayer``: that one never creates its tables,
is tested on PostgreSQL only, and on SQLite breaks on list/dict step fields (Chainlit's GitHub issues #2528,
#2750, #1545). Ours is SQLAlchemy Core, so one code path serves SQLite and PostgreSQL
(tests/unit/history/test_data_layer.py runs the same suite on both), and every write goes through the one
writer (app/history/writer.py).

Ownership: a chat belongs to the user who started it, and nothing here hands a chat to someone else:
``update_thread`` never changes an owner, a message is not written into another user's chat, and
``get_element`` answers only for the chat the element is in (Chainlit checks the chat's author, then asks
for the element by the chat id the caller sent).
"""
from __future__ import annotations

import contextlib
import json
import logging
import time
import uuid
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any, Optional

from chainlit.data.base import BaseDataLayer
from chainlit.data.utils import queue_until_user_message
from chainlit.types import Feedback, PageInfo, PaginatedResponse, Pagination, ThreadDict, ThreadFilter
from chainlit.user import PersistedUser, User
from chainlit.utils import utc_now
from fastapi import HTTPException
from sqlalchemy import and_, delete, exists, func, or_, select
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from app.history.messages import (
    ASSISTANT_AUTHOR,
    CHAT_NAME_CHARS,
    USER_AUTHOR,
    USER_MESSAGE,
    search_text,
)
from app.history.recent_searches import RecentSearches
from app.history.schema import elements, feedbacks, steps, threads, users
from app.history.writer import HistoryWriter
from app.i18n import t

if TYPE_CHECKING:
    from chainlit.element import Element, ElementDict
    from chainlit.step import StepDict

log = logging.getLogger("ernie_chat.history")
MAX_SEARCH_CHARS = 1000  # a search is a few words; a pasted page is not one
# Each word is one more test per chat: on 1,000 chats, 32 words with a short one found nowhere (tested last)
# took 106 ms median on SQLite, 16 such words 34 ms, 45 ms on PostgreSQL (docs/benchmarks.md).
MAX_SEARCH_WORDS = 16
# How long the user's message may hold its answer back while it is stored; a slow or broken database
# must not stop the chat (the write still completes, or is counted as failed, afterwards).
STORE_BEFORE_ANSWER_TIMEOUT_S = 2.0
# What a user's own action (delete, rename, feedback, the first login) waits for its write; other writes
# (messages, titles, settings) are not waited for at all: they land in order, retried while the database refuses.
USER_ACTION_WAIT_S = 10.0
READ_AFTER_WRITES_S = 2.0


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def _loads(text: Optional[str], empty: Any) -> Any:
    if not text:
        return empty
    try:
        return json.loads(text)
    except ValueError:
        return empty


def _unreadable_step(row: Any, thread_id: str) -> dict[str, Any]:
    """A stored message whose JSON cannot be read: kept in its place, saying so, rather than dropped."""
    text = " / ".join(t(language, "message_unreadable") for language in ("en-US", "zh-CN"))
    return {"id": row.id, "threadId": thread_id, "parentId": None, "type": row.type, "output": text,
            "name": USER_AUTHOR if row.type == USER_MESSAGE else ASSISTANT_AUTHOR, "createdAt": row.created_at,
            "start": row.created_at, "end": row.created_at, "streaming": False, "isError": True,
            "metadata": {"unreadable": True}}


def _plain_json(metadata: dict[str, Any]) -> dict[str, Any]:
    """What of a session's metadata can be kept: Chainlit persists the whole user session, which holds live
    objects too (our status-panel task); stored as text they would come back as strings on resume."""
    kept = {}
    for key, value in metadata.items():
        try:
            json.dumps(value)
        except (TypeError, ValueError):
            continue
        if value is not None:
            kept[key] = value
    return kept


def _like_pattern(words: str) -> str:
    escaped = words.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def _search_words(search: str) -> list[str]:
    """The words a search must all find, lower-cased: split at whitespace (Unicode's, the ideographic space
    too), so that a Chinese query typed without spaces stays one word, found as a substring. A repeated word,
    or one inside another word of the search ("eat" in "weather"), adds nothing and is dropped. Longest first:
    a longer word is rarer, and a chat without it is passed over before the other words are looked for."""
    words = list(dict.fromkeys(search.lower().split()))
    kept = [w for w in words if not any(w != other and w in other for other in words)]
    return sorted(kept, key=len, reverse=True)


def session_user_identifier() -> Optional[str]:
    """The logged-in user of the websocket session this call runs in, if any."""
    try:
        from chainlit.context import context

        user = context.session.user
        return user.identifier if user else None
    except Exception:
        return None


def step_values(step: dict[str, Any], thread_id: str) -> dict[str, Any]:
    """A message's row in ``steps`` (without its id and position), from Chainlit's step dict."""
    return {"thread_id": thread_id, "type": str(step.get("type") or "undefined"),
            "created_at": step.get("createdAt") or utc_now(), "search_text": search_text(step), "data": _dumps(step)}


async def _empty_the_wal(conn: AsyncConnection) -> None:
    # Waits (busy timeout) for readers of an older snapshot; one still reading leaves the frames to the next one.
    await conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")


class HistoryDataLayer(BaseDataLayer):
    def __init__(self, engine: AsyncEngine, writer: HistoryWriter) -> None:
        self.engine = engine
        self.writer = writer
        self._position = 0
        # The words each user's search listed each chat for: opening it shows the version that holds them.
        self.searched = RecentSearches()

    def _next_position(self) -> int:
        # Arrival order of messages, also across restarts and app instances (a clock, made strictly rising).
        self._position = max(self._position + 1, time.time_ns() // 1000)
        return self._position

    # -- a whole chat from a file (app/history/restore.py), inside the writer's transaction ----------------------
    async def chat_owner(self, conn: AsyncConnection, thread_id: str) -> Optional[str]:
        """Whose the chat with this id is ("" when nobody's); None when there is no such chat."""
        row = (await conn.execute(select(threads.c.user_identifier).where(threads.c.id == thread_id))).first()
        return None if row is None else row.user_identifier or ""

    async def taken_ids(self, conn: AsyncConnection, kind: str, ids: list[str]) -> set[str]:
        """Which of these message (``kind`` "steps") or element ("elements") ids the database already holds, asked
        in slices: SQLite bounds a statement's parameters."""
        column = {"steps": steps.c.id, "elements": elements.c.id}[kind]
        found: set[str] = set()
        for start in range(0, len(ids), 500):
            found.update((await conn.execute(select(column).where(column.in_(ids[start:start + 500])))).scalars())
        return found

    async def insert_chat(self, conn: AsyncConnection, chat: dict[str, Any], user_id: Optional[str], batch: int,
                          between: Callable[[int, int], None]) -> int:
        """Insert a chat read from a file, its ids its own already (no clash): the chat, its messages ``batch``
        per statement, its elements. ``between(written, total)`` runs before each batch and once at the end (it
        may raise to roll the whole chat back). Returns the messages stored, counted, not what the file held."""
        await conn.execute(threads.insert().values(
            id=chat["id"], name=chat.get("name"), user_id=user_id, user_identifier=chat.get("user"),
            tags=_dumps(chat["tags"]), metadata=_dumps(chat["metadata"]),
            created_at=chat["created_at"], updated_at=chat["updated_at"]))
        rows = [{"id": step["id"], "position": self._next_position(),
                 **step_values({k: v for k, v in step.items() if k != "feedback"}, chat["id"])}
                for step in chat["steps"]]
        for start in range(0, len(rows), batch):
            between(start, len(rows))
            await conn.execute(steps.insert(), rows[start:start + batch])
        for element in chat["elements"]:
            await conn.execute(elements.insert().values(id=element["id"], thread_id=chat["id"],
                                                        for_id=element.get("forId"), data=_dumps(element)))
        between(len(rows), len(rows))
        return (await conn.execute(select(func.count()).select_from(steps)
                                   .where(steps.c.thread_id == chat["id"]))).scalar_one()

    # -- users -----------------------------------------------------------------------------------
    @contextlib.asynccontextmanager
    async def reading(self) -> AsyncIterator[AsyncConnection]:
        """A connection for a read that sees this app's own writes: the queued ones land first, for a bounded
        moment (a database that refuses writes must not hold the sidebar or a resumed chat for long)."""
        await self.writer.settle(READ_AFTER_WRITES_S)
        async with self.engine.connect() as conn:
            yield conn

    async def get_user(self, identifier: str) -> Optional[PersistedUser]:
        async with self.reading() as conn:
            row = (await conn.execute(select(users).where(users.c.identifier == identifier))).first()
        if row is None:
            return None
        return PersistedUser(id=row.id, identifier=row.identifier, createdAt=row.created_at,
                             metadata=_loads(row.metadata, {}))

    async def create_user(self, user: User) -> Optional[PersistedUser]:
        async def write(conn: AsyncConnection) -> None:
            found = (await conn.execute(select(users.c.id).where(users.c.identifier == user.identifier))).first()
            if found is None:
                await conn.execute(users.insert().values(id=str(uuid.uuid4()), identifier=user.identifier,
                                                         metadata=_dumps(user.metadata or {}),
                                                         created_at=utc_now()))
            else:
                await conn.execute(users.update().where(users.c.id == found.id)
                                   .values(metadata=_dumps(user.metadata or {})))

        await self.writer.write(write, "saving the user", wait=USER_ACTION_WAIT_S)
        return await self.get_user(user.identifier)

    async def _user_id(self, conn: AsyncConnection, identifier: str) -> Optional[str]:
        row = (await conn.execute(select(users.c.id).where(users.c.identifier == identifier))).first()
        return row.id if row else None

    # -- chats -----------------------------------------------------------------------------------
    async def get_thread_author(self, thread_id: str) -> str:
        async with self.reading() as conn:
            row = (await conn.execute(select(threads.c.user_identifier).where(threads.c.id == thread_id))).first()
        return (row.user_identifier or "") if row else ""

    async def _ensure_thread(self, conn: AsyncConnection, thread_id: str) -> Optional[str]:
        """Create the chat row if missing; returns its owner's identifier (None when it has none yet)."""
        row = (await conn.execute(select(threads.c.user_identifier).where(threads.c.id == thread_id))).first()
        if row is not None:
            return row.user_identifier
        now = utc_now()
        await conn.execute(threads.insert().values(id=thread_id, created_at=now, updated_at=now,
                                                   tags="[]", metadata="{}"))
        return None

    async def update_thread(self, thread_id: str, name: Optional[str] = None, user_id: Optional[str] = None,
                            metadata: Optional[dict] = None, tags: Optional[list[str]] = None) -> None:
        async def write(conn: AsyncConnection) -> None:
            owner = await self._ensure_thread(conn, thread_id)
            row = (await conn.execute(select(threads).where(threads.c.id == thread_id))).one()
            values: dict[str, Any] = {"updated_at": utc_now()}
            if user_id is not None:
                new_owner = (await conn.execute(select(users.c.identifier).where(users.c.id == user_id))).first()
                if new_owner is None:
                    raise ValueError(f"unknown user id {user_id}")
                if owner is not None and owner != new_owner.identifier:
                    log.warning("refused to hand chat %s from %s to %s", thread_id, owner, new_owner.identifier)
                    return
                values.update(user_id=user_id, user_identifier=new_owner.identifier)
            if name is not None:
                values["name"] = name.strip()[:CHAT_NAME_CHARS]
            if metadata is not None:
                values["metadata"] = _dumps({**_loads(row.metadata, {}), **_plain_json(metadata)})
            if tags is not None:
                values["tags"] = _dumps(list(tags))
            await conn.execute(threads.update().where(threads.c.id == thread_id).values(**values))

        renamed_by_user = name is not None and user_id is None  # the sidebar's rename: the page awaits it
        await self.writer.write(write, "saving the chat", wait=USER_ACTION_WAIT_S if renamed_by_user else 0,
                                raise_errors=renamed_by_user)

    async def delete_thread(self, thread_id: str) -> None:
        async def write(conn: AsyncConnection) -> None:
            # Messages, elements and feedback go with it (ON DELETE CASCADE, foreign keys on in SQLite).
            await conn.execute(delete(threads).where(threads.c.id == thread_id))

        await self.writer.write(write, "deleting a chat", wait=USER_ACTION_WAIT_S, raise_errors=True)
        if self.engine.dialect.name == "sqlite":
            # secure_delete zeroes the chat's pages, but SQLite keeps reusing its -wal file, where the frames
            # that first wrote them (an attached document's text) stay until overwritten: empty it now.
            self.writer.submit(_empty_the_wal, "clearing a deleted chat from the write-ahead log")

    def _thread_dict(self, row: Any, step_dicts: list[Any], element_dicts: list[Any]) -> ThreadDict:
        return ThreadDict(id=row.id, createdAt=row.created_at, name=row.name, userId=row.user_id,
                          userIdentifier=row.user_identifier, tags=_loads(row.tags, []),
                          metadata=_loads(row.metadata, {}), steps=step_dicts, elements=element_dicts)

    async def list_threads(self, pagination: Pagination, filters: ThreadFilter) -> PaginatedResponse[ThreadDict]:
        if not filters.userId:
            raise ValueError("list_threads needs a user id")  # never list everyone's chats
        query = select(threads).where(threads.c.user_id == filters.userId)
        if filters.search and len(filters.search) > MAX_SEARCH_CHARS:
            # Chainlit's route calls this directly: an HTTP error is how the page gets one line. (Past 50,000
            # characters SQLite refused the pattern with a 500, and the search text reached the log.)
            raise HTTPException(400, f"search text is {len(filters.search):,} characters; at most "
                                     f"{MAX_SEARCH_CHARS:,} are searched")
        if filters.search and len(filters.search.split()) > MAX_SEARCH_WORDS:
            raise HTTPException(400, f"search has {len(filters.search.split()):,} words; at most "
                                     f"{MAX_SEARCH_WORDS} are searched")
        if filters.search and filters.search.strip():
            # Every word must occur in the chat, in any order: in its title or in any of its messages (not
            # necessarily the same message: "keeper lighthouse" finds a chat whose question says lighthouse and
            # whose answer says keeper). Each word is a substring test (instr / strpos) on text lower-cased
            # when stored: on 1,000 chats x 20 messages a Chinese word took 28 ms median against 53 ms for
            # lower(text) LIKE '%...%' on SQLite, 24 vs 48 ms on PostgreSQL, in the same run; all-words
            # searches are timed there too (docs/benchmarks.md, bench/history_search.py).
            position = func.strpos if self.engine.dialect.name == "postgresql" else func.instr
            for word in _search_words(filters.search):
                in_messages = exists().where(and_(steps.c.thread_id == threads.c.id,
                                                  position(steps.c.search_text, word) > 0))
                in_name = func.lower(threads.c.name).like(_like_pattern(word), escape="\\")
                query = query.where(or_(in_name, in_messages))
        if filters.feedback is not None:
            query = query.where(exists().where(and_(steps.c.thread_id == threads.c.id,
                                                    feedbacks.c.step_id == steps.c.id,
                                                    feedbacks.c.value == filters.feedback)))
        async with self.reading() as conn:
            if pagination.cursor:
                anchor = (await conn.execute(select(threads.c.updated_at, threads.c.id)
                                             .where(threads.c.id == pagination.cursor))).first()
                if anchor is not None:
                    query = query.where(or_(threads.c.updated_at < anchor.updated_at,
                                            and_(threads.c.updated_at == anchor.updated_at,
                                                 threads.c.id < anchor.id)))
            query = query.order_by(threads.c.updated_at.desc(), threads.c.id.desc()).limit(pagination.first + 1)
            rows = (await conn.execute(query)).all()
        page = rows[:pagination.first]
        data = [self._thread_dict(row, [], []) for row in page]
        if filters.search and filters.search.strip():
            self.searched.listed(filters.userId, _search_words(filters.search), [row.id for row in page])
        return PaginatedResponse(
            pageInfo=PageInfo(hasNextPage=len(rows) > pagination.first,
                              startCursor=data[0]["id"] if data else None,
                              endCursor=data[-1]["id"] if data else None),
            data=data)

    async def get_thread(self, thread_id: str) -> Optional[ThreadDict]:
        async with self.reading() as conn:
            row = (await conn.execute(select(threads).where(threads.c.id == thread_id))).first()
            if row is None:
                return None
            step_rows = (await conn.execute(select(steps.c.id, steps.c.type, steps.c.created_at, steps.c.data)
                                            .where(steps.c.thread_id == thread_id)
                                            .order_by(steps.c.created_at, steps.c.position))).all()
            feedback_rows = (await conn.execute(
                select(feedbacks).join(steps, feedbacks.c.step_id == steps.c.id)
                .where(steps.c.thread_id == thread_id))).all()
            element_rows = (await conn.execute(select(elements.c.data).where(elements.c.thread_id == thread_id)
                                               )).all()
        by_step = {f.step_id: {"id": f.id, "forId": f.step_id, "value": f.value, "comment": f.comment}
                   for f in feedback_rows}
        step_dicts = []
        for s in step_rows:
            step = _loads(s.data, None)
            if not isinstance(step, dict):
                log.warning("chat %s: message %s could not be read (its stored JSON is damaged); shown as such",
                            thread_id, s.id)
                step = _unreadable_step(s, thread_id)
            if s.id in by_step:
                step["feedback"] = by_step[s.id]
            step_dicts.append(step)
        return self._thread_dict(row, step_dicts, [_loads(e.data, {}) for e in element_rows])

    # -- messages (steps) ------------------------------------------------------------------------
    def _step_write(self, step_dict: StepDict, owner_user_id: Optional[str] = None):
        step = dict(step_dict)
        step.pop("feedback", None)  # kept in its own table
        thread_id = str(step.get("threadId") or "")
        position = self._next_position()
        writer_identity = session_user_identifier()

        async def write(conn: AsyncConnection) -> None:
            if not thread_id:
                return
            owner = await self._ensure_thread(conn, thread_id)
            if owner is not None and writer_identity is not None and owner != writer_identity:
                log.warning("refused a message from %s into chat %s of %s", writer_identity, thread_id, owner)
                return
            if owner is None and owner_user_id is not None:
                identifier = (await conn.execute(select(users.c.identifier).where(users.c.id == owner_user_id))).first()
                if identifier is not None:
                    await conn.execute(threads.update().where(threads.c.id == thread_id)
                                       .values(user_id=owner_user_id, user_identifier=identifier.identifier))
            values = step_values(step, thread_id)
            existing = (await conn.execute(select(steps.c.thread_id, steps.c.data)
                                           .where(steps.c.id == step["id"]))).first()
            if existing is None:
                await conn.execute(steps.insert().values(id=step["id"], position=position, **values))
            elif existing.thread_id == thread_id:
                # An update may carry only some fields (Chainlit sends whole dicts today; be safe).
                merged = {**_loads(existing.data, {}), **step}
                values.update(data=_dumps(merged), search_text=search_text(merged),
                              created_at=merged.get("createdAt") or values["created_at"])
                await conn.execute(steps.update().where(steps.c.id == step["id"]).values(**values))
            else:
                log.warning("refused to move message %s to another chat", step["id"])
                return
            await conn.execute(threads.update().where(threads.c.id == thread_id).values(updated_at=utc_now()))

        return write

    @queue_until_user_message()
    async def create_step(self, step_dict: StepDict) -> None:
        await self.writer.write(self._step_write(step_dict), "saving a message")

    @queue_until_user_message()
    async def update_step(self, step_dict: StepDict) -> None:
        await self.writer.write(self._step_write(step_dict), "saving a message")

    async def store_now(self, step_dict: StepDict, owner_user_id: Optional[str]) -> None:
        """Store a message (and give its chat its owner) and wait for it, up to a short timeout: the
        user's message is stored before the engine answers, so a crash mid-answer still leaves the question in
        its chat (CHANGELOG, "Chats are kept")."""
        await self.writer.write(self._step_write(step_dict, owner_user_id), "saving a message",
                                wait=STORE_BEFORE_ANSWER_TIMEOUT_S)

    @queue_until_user_message()
    async def delete_step(self, step_id: str) -> None:
        async def write(conn: AsyncConnection) -> None:
            await conn.execute(delete(steps).where(steps.c.id == step_id))

        await self.writer.write(write, "deleting a message")

    async def get_favorite_steps(self, user_id: str) -> list[StepDict]:
        async with self.reading() as conn:
            rows = (await conn.execute(
                select(steps.c.data).join(threads, steps.c.thread_id == threads.c.id)
                .where(threads.c.user_id == user_id, steps.c.data.like('%"favorite": true%'))
                .order_by(steps.c.created_at))).all()
        found = [_loads(r.data, {}) for r in rows]
        return [s for s in found if (s.get("metadata") or {}).get("favorite") is True]

    # -- elements --------------------------------------------------------------------------------
    @queue_until_user_message()
    async def create_element(self, element: Element) -> None:
        element_dict = dict(element.to_dict())
        if isinstance(getattr(element, "content", None), str):
            element_dict["content"] = element.content  # text elements: kept with the chat, no file store
        thread_id = str(element_dict.get("threadId") or "")
        if not thread_id:
            return

        async def write(conn: AsyncConnection) -> None:
            await self._ensure_thread(conn, thread_id)
            query = select(elements.c.thread_id).where(elements.c.id == element_dict["id"])
            existing = (await conn.execute(query)).first()
            if existing is None:
                await conn.execute(elements.insert().values(id=element_dict["id"], thread_id=thread_id,
                                                            for_id=element_dict.get("forId"),
                                                            data=_dumps(element_dict)))
            elif existing.thread_id == thread_id:
                await conn.execute(elements.update().where(elements.c.id == element_dict["id"])
                                   .values(for_id=element_dict.get("forId"), data=_dumps(element_dict)))

        await self.writer.write(write, "saving an element")

    async def get_element(self, thread_id: str, element_id: str) -> Optional[ElementDict]:
        async with self.reading() as conn:
            row = (await conn.execute(select(elements.c.data).where(elements.c.id == element_id,
                                                                    elements.c.thread_id == thread_id))).first()
        return _loads(row.data, None) if row else None

    @queue_until_user_message()
    async def delete_element(self, element_id: str, thread_id: Optional[str] = None) -> None:
        async def write(conn: AsyncConnection) -> None:
            query = delete(elements).where(elements.c.id == element_id)
            if thread_id:
                query = query.where(elements.c.thread_id == thread_id)
            await conn.execute(query)

        await self.writer.write(write, "deleting an element")

    # -- feedback --------------------------------------------------------------------------------
    async def owners_of(self, step_ids: tuple[str, ...] = (), feedback_ids: tuple[str, ...] = ()) -> set[str]:
        """The users whose chats hold these messages and feedback ("" for a chat without an owner). Chainlit's
        /feedback routes check no owner; app/guards/ownership.py asks this first."""
        by_step = (select(threads.c.user_identifier)
                   .select_from(steps.join(threads, steps.c.thread_id == threads.c.id))
                   .where(steps.c.id.in_(step_ids)))
        by_feedback = (select(threads.c.user_identifier)
                       .select_from(feedbacks.join(steps, feedbacks.c.step_id == steps.c.id)
                                    .join(threads, steps.c.thread_id == threads.c.id))
                       .where(feedbacks.c.id.in_(feedback_ids)))
        async with self.reading() as conn:
            rows = (await conn.execute(by_step.union(by_feedback))).all()
        return {row[0] or "" for row in rows}

    async def upsert_feedback(self, feedback: Feedback) -> str:
        feedback_id = feedback.id or str(uuid.uuid4())

        async def write(conn: AsyncConnection) -> None:
            if (await conn.execute(select(steps.c.id).where(steps.c.id == feedback.forId))).first() is None:
                raise ValueError(f"no message {feedback.forId} to attach feedback to")
            await conn.execute(delete(feedbacks).where(or_(feedbacks.c.id == feedback_id,
                                                           feedbacks.c.step_id == feedback.forId)))
            await conn.execute(feedbacks.insert().values(id=feedback_id, step_id=feedback.forId,
                                                         value=int(feedback.value), comment=feedback.comment))

        await self.writer.write(write, "saving feedback", wait=USER_ACTION_WAIT_S, raise_errors=True)
        return feedback_id

    async def delete_feedback(self, feedback_id: str) -> bool:
        async def write(conn: AsyncConnection) -> None:
            await conn.execute(delete(feedbacks).where(feedbacks.c.id == feedback_id))

        await self.writer.write(write, "deleting feedback", wait=USER_ACTION_WAIT_S, raise_errors=True)
        return True

    # -- the rest of Chainlit's interface --------------------------------------------------------
    async def build_debug_url(self) -> str:
        return ""

    async def close(self) -> None:
        await self.writer.close()
        await self.engine.dispose()
