"""The chat data layer, the same suite on SQLite and on a real PostgreSQL server (tests/postgres.py)."""
from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import time

import pytest
from chainlit.context import init_http_context
from chainlit.types import Feedback, Pagination, ThreadFilter
from chainlit.user import User
from sqlalchemy import func, select

from app.errors import HistoryDatabaseError
from app.history import HistoryStore, prepare_database
from app.history.data_layer import STORE_BEFORE_ANSWER_TIMEOUT_S
from app.history.database import DatabaseLocation
from app.history.schema import SCHEMA_VERSION, elements, meta, steps, threads
from tests.support.fakes import logged_in_user
from tests.support.history_store import message, run_with_store, start_chat


def test_schema_version_is_recorded_and_a_second_start_keeps_the_data(location):
    async def first(store):
        _, thread_id = await start_chat(store, "alice", "hello")
        async with store.layer.engine.connect() as conn:
            version = (await conn.execute(select(meta.c.value).where(meta.c.key == "schema_version"))).scalar()
        return thread_id, version

    thread_id, version = run_with_store(location, first)
    assert version == str(SCHEMA_VERSION)

    async def second(store):
        return await store.layer.get_thread(thread_id)

    thread = run_with_store(location, second)
    assert [s["output"] for s in thread["steps"]] == ["hello"]


def test_steps_keep_lists_and_dicts_that_break_chainlits_sqlalchemy_layer(location):
    # Chainlit #2528 (tags list), #2750 (modes dict), #1545 (metadata JSON not decoded)
    async def body(store):
        user_id, thread_id = await start_chat(store, "alice", "hello")
        await store.layer.update_thread(thread_id, tags=["x", "y"])
        # Chainlit persists the whole user session: a live object (our status task) is not kept as text
        await store.layer.update_thread(thread_id, metadata={"status_task": object(), "history": [1]})
        return await store.layer.get_thread(thread_id)

    thread = run_with_store(location, body)
    step = thread["steps"][0]
    assert step["tags"] == ["a", "b"] and step["modes"] == {"model": "ernie"} and step["metadata"] == {"k": [1, 2]}
    assert thread["tags"] == ["x", "y"]
    assert thread["metadata"] == {"chat_settings": {"top_p": 0.5}, "history": [1]}
    assert thread["userIdentifier"] == "alice" and thread["name"] == "hello"


def test_messages_come_back_in_order_and_updates_replace_them(location):
    async def body(store):
        _, thread_id = await start_chat(store, "alice", "q1")
        answer = message(thread_id, "", "assistant_message")
        await store.layer.create_step(answer)
        await store.layer.update_step({**answer, "output": "a1 complete"})
        await store.layer.create_step(message(thread_id, "q2"))
        return await store.layer.get_thread(thread_id)

    thread = run_with_store(location, body)
    assert [s["output"] for s in thread["steps"]] == ["q1", "a1 complete", "q2"]


def test_delete_removes_the_chat_its_messages_and_elements(location):
    async def body(store):
        _, thread_id = await start_chat(store, "alice", "hello")
        async with store.layer.engine.begin() as conn:
            await conn.execute(elements.insert().values(id="e1", thread_id=thread_id, data="{}"))
        await store.layer.delete_thread(thread_id)
        async with store.layer.engine.connect() as conn:
            return [(await conn.execute(select(func.count()).select_from(t).where(t.c.thread_id == thread_id))).scalar()
                    for t in (steps, elements)] + [
                (await conn.execute(select(func.count()).select_from(threads))).scalar()]

    assert run_with_store(location, body) == [0, 0, 0]


def test_a_deleted_chats_documents_leave_the_sqlite_file(tmp_path):
    # A chat's attached documents live in its messages; deleting the chat overwrites them in the file
    # (secure_delete) and empties the write-ahead log that first held them, not only unlinks them from the tables.
    path = tmp_path / "chats.db"
    marker = "ACCESS-CODE-7731-KESTREL"

    async def body(store):
        _, thread_id = await start_chat(store, "alice", "keep this")
        step = message(thread_id, "what is the code?")
        step["metadata"] = {"documents": [{"name": "a.txt", "text": f"{marker} " + "filler " * 2000}]}
        await store.layer.create_step(step)
        await store.layer.writer.drain()
        wal = path.with_name(path.name + "-wal")
        assert marker.encode() in wal.read_bytes()  # where the text was first written
        await store.layer.delete_thread(thread_id)
        await store.layer.writer.drain()
        # Read while the app still has the database open (closing the last connection empties the -wal anyway).
        return [marker.encode() in file.read_bytes() for file in (path, wal)]

    assert run_with_store(DatabaseLocation(f"sqlite+aiosqlite:///{path}", path), body) == [False, False]


def test_each_user_lists_and_searches_only_their_own_chats(location):
    async def body(store):
        alice_id, a1 = await start_chat(store, "alice", "the weather in Paris")
        _, a2 = await start_chat(store, "alice", "量子纠缠是什么")
        await store.layer.create_step(message(a2, "请用三句话解释", "assistant_message"))
        bob_id, b1 = await start_chat(store, "bob", "the weather in Rome")
        page = Pagination(first=20)
        mine = await store.layer.list_threads(page, ThreadFilter(userId=alice_id))
        bobs = await store.layer.list_threads(page, ThreadFilter(userId=bob_id))
        weather = await store.layer.list_threads(page, ThreadFilter(userId=alice_id, search="WEATHER"))
        chinese = await store.layer.list_threads(page, ThreadFilter(userId=alice_id, search="三句话"))
        percent = await store.layer.list_threads(page, ThreadFilter(userId=alice_id, search="%"))
        return ({t["id"] for t in mine.data}, {a1, a2}, [t["id"] for t in bobs.data], b1,
                [t["id"] for t in weather.data], a1, [t["id"] for t in chinese.data], a2, percent.data)

    mine, expected, bobs, b1, weather, a1, chinese, a2, percent = run_with_store(location, body)
    assert mine == expected and bobs == [b1]
    assert weather == [a1]  # found by a word in a message, case-insensitive, Bob's chat not included
    assert chinese == [a2]  # found by Chinese words in the answer, not the title
    assert percent == []  # LIKE wildcards are searched for literally


def test_search_finds_chats_with_every_word_in_any_order_anywhere_in_the_chat(location):
    # Issue 24: every whitespace-separated word must occur in the chat (its title or any of its messages), in
    # any order; a Chinese query without spaces stays one substring; %, _ and a backslash are searched for literally.
    expected = {
        "keeper lighthouse": {"keeper"},  # reverse order
        "KEEPER   Lighthouse": {"keeper"},  # any case, any spaces
        "diary keeper lighthouse the": {"keeper"},
        "pilot harbour": {"harbour"},  # one word in the question, the other in the answer
        "notes keeper": {"keeper"},  # one in the (renamed) title, one in a message
        "lighthouse harbour": set(),  # each word in a different chat: no chat has both
        "keeper xylophone": set(),
        "三句话 量子": {"chinese"},  # Chinese words, reverse order, in two messages
        "量子纠缠": {"chinese"},
        "纠缠量子": set(),  # without spaces: one substring, as typed
        "三句话\u3000量子": {"chinese"},  # the ideographic space separates words too
        "5%f": set(), "o_f": set(),  # a wildcard would match "50% off_sale"; literally, nothing does
        "c:\\": {"sale"}, "off_ 50%": {"sale"}, "f_s": {"sale"},
    }

    async def body(store):
        user_id, keeper = await start_chat(store, "alice", "The lighthouse keeper's diary")
        _, harbour = await start_chat(store, "alice", "where is the harbour?")
        await store.layer.create_step(message(harbour, "the pilot boat waits there", "assistant_message"))
        _, chinese = await start_chat(store, "alice", "量子纠缠是什么")
        await store.layer.create_step(message(chinese, "请用三句话解释", "assistant_message"))
        _, sale = await start_chat(store, "alice", r"50% off_sale in C:\shop")
        await store.layer.update_thread(keeper, name="Holiday notes")  # the title counts as the chat's words
        await store.layer.writer.drain()

        async def search(text):
            page = await store.layer.list_threads(Pagination(first=20), ThreadFilter(userId=user_id, search=text))
            return {t["id"] for t in page.data}

        chats = {"keeper": keeper, "harbour": harbour, "chinese": chinese, "sale": sale}
        return chats, {text: await search(text) for text in expected}

    chats, found = run_with_store(location, body)
    assert found == {text: {chats[name] for name in names} for text, names in expected.items()}


def test_a_search_of_more_than_16_words_is_refused_in_one_line(location):
    from fastapi import HTTPException

    from app.history.data_layer import MAX_SEARCH_WORDS

    async def body(store):
        user_id, thread_id = await start_chat(store, "alice", " ".join(f"w{n}" for n in range(40)))
        at_most = " ".join(f"w{n}" for n in range(MAX_SEARCH_WORDS))
        found = await store.layer.list_threads(Pagination(first=20), ThreadFilter(userId=user_id, search=at_most))
        with pytest.raises(HTTPException) as refused:
            await store.layer.list_threads(Pagination(first=20), ThreadFilter(userId=user_id, search=at_most + " w39"))
        return [t["id"] for t in found.data], thread_id, refused.value

    found, thread_id, refused = run_with_store(location, body)
    assert MAX_SEARCH_WORDS == 16 and found == [thread_id]
    assert refused.status_code == 400 and refused.detail == "search has 17 words; at most 16 are searched"


def test_pages_through_chats_newest_first(location):
    async def body(store):
        user = await logged_in_user(store.layer, "alice")
        ids = []
        for n in range(5):
            thread_id = f"t{n}"
            await store.layer.create_step(message(thread_id, f"chat {n}"))
            await store.layer.update_thread(thread_id, name=f"chat {n}", user_id=user.id)
            ids.append(thread_id)
            await asyncio.sleep(0.002)  # distinct update times
        seen, cursor = [], None
        while True:
            page = await store.layer.list_threads(Pagination(first=2, cursor=cursor), ThreadFilter(userId=user.id))
            seen += [t["id"] for t in page.data]
            if not page.pageInfo.hasNextPage:
                return seen, ids
            cursor = page.pageInfo.endCursor

    seen, ids = run_with_store(location, body)
    assert seen == list(reversed(ids))


def test_nothing_hands_a_chat_or_an_element_to_another_user(location):
    async def body(store):
        _, a_thread = await start_chat(store, "alice", "secret")
        async with store.layer.engine.begin() as conn:
            await conn.execute(elements.insert().values(id="a-element", thread_id=a_thread, data='{"id": "a-element"}'))
        bob_id, b_thread = await start_chat(store, "bob", "mine")
        await store.layer.update_thread(a_thread, user_id=bob_id)  # Chainlit's first-interaction write, as Bob
        init_http_context(user=await store.layer.get_user("bob"))
        await store.layer.create_step(message(a_thread, "injected by bob"))
        return (await store.layer.get_thread_author(a_thread), await store.layer.get_thread(a_thread),
                await store.layer.get_element(b_thread, "a-element"),
                await store.layer.get_element(a_thread, "a-element"))

    author, thread, via_bobs_chat, via_own_chat = run_with_store(location, body)
    assert author == "alice"
    assert [s["output"] for s in thread["steps"]] == ["secret"]
    assert via_bobs_chat is None and via_own_chat == {"id": "a-element"}


def test_feedback_is_kept_with_its_message_and_goes_with_the_chat(location):
    async def body(store):
        _, thread_id = await start_chat(store, "alice", "q")
        answer = message(thread_id, "a", "assistant_message")
        await store.layer.create_step(answer)
        feedback_id = await store.layer.upsert_feedback(Feedback(forId=answer["id"], value=1, comment="good"))
        thread = await store.layer.get_thread(thread_id)
        await store.layer.delete_feedback(feedback_id)
        after = await store.layer.get_thread(thread_id)
        return thread["steps"][1].get("feedback"), after["steps"][1].get("feedback")

    before, after = run_with_store(location, body)
    assert before["value"] == 1 and before["comment"] == "good" and after is None


def test_twelve_chats_writing_at_once_lose_nothing(location):
    # 12 chats answering at once (--max-concurrent-chats default): each stores its question, then its
    # answer in many updates, while the sidebar is read. No write may fail ("database is locked").
    async def chat(store, user, n):
        init_http_context(user=user)
        thread_id = f"chat-{n}"
        await store.layer.store_now(message(thread_id, f"question {n}"), user.id)
        answer = message(thread_id, "", "assistant_message")
        await store.layer.create_step(answer)
        for part in range(20):
            await store.layer.update_step({**answer, "output": f"answer {n} part {part}"})
            await store.layer.list_threads(Pagination(first=20), ThreadFilter(userId=user.id))
        return thread_id

    async def body(store):
        user = await store.layer.create_user(User(identifier="alice"))
        ids = await asyncio.gather(*(chat(store, user, n) for n in range(12)))
        return [await store.layer.get_thread(t) for t in ids], store.write_failing, store.last_error

    chats, failing, error = run_with_store(location, body)
    assert not failing, error
    assert [[s["output"] for s in c["steps"]] for c in chats] == [
        [f"question {n}", f"answer {n} part 19"] for n in range(12)]


def test_a_newer_schema_is_refused_and_left_untouched(location):
    async def bump(store):
        async with store.layer.engine.begin() as conn:
            await conn.execute(meta.update().values(value=str(SCHEMA_VERSION + 1)))

    run_with_store(location, bump)
    newer = rf"schema version {SCHEMA_VERSION + 1}, newer than .* \({SCHEMA_VERSION}\)"
    with pytest.raises(HistoryDatabaseError, match=newer):
        asyncio.run(prepare_database(location))

    async def version():
        store = HistoryStore.open(location)
        async with store.layer.engine.connect() as conn:
            value = (await conn.execute(select(meta.c.value))).scalar()
        await store.close()
        return value

    assert asyncio.run(version()) == str(SCHEMA_VERSION + 1)


@contextlib.asynccontextmanager
async def database_refusing_writes(store: HistoryStore, location: DatabaseLocation):
    """What a read-only file, a full disk or a lock held by another program does to a write, made real without
    root-only tricks: on SQLite PRAGMA query_only (SQLITE_READONLY), on PostgreSQL a read-only default (what an
    administrator does to put a database in read-only mode). Writes are taken again when the block ends."""
    engine = store.layer.engine
    if location.sqlite_file:
        from sqlalchemy import event

        def read_only(dbapi, _record):
            dbapi.cursor().execute("PRAGMA query_only=1")

        event.listen(engine.sync_engine, "connect", read_only)
    else:
        async with engine.begin() as conn:
            name = (await conn.exec_driver_sql("select current_database()")).scalar()
            await conn.exec_driver_sql(f'ALTER DATABASE "{name}" SET default_transaction_read_only = on')
    await engine.dispose()  # new connections get the setting
    try:
        yield
    finally:
        if location.sqlite_file:
            event.remove(engine.sync_engine, "connect", read_only)
        else:
            async with engine.begin() as conn:
                await conn.exec_driver_sql("SET TRANSACTION READ WRITE")
                await conn.exec_driver_sql(f'ALTER DATABASE "{name}" SET default_transaction_read_only = off')
        await engine.dispose()


def test_writes_a_database_refuses_are_counted_retried_and_land_in_order_once_it_takes_them(location):
    # Nothing waits for the refused writes; when the database takes writes again, all of them land, in order.
    errors = []

    async def body(store):
        writer = store.layer.writer
        writer.on_error = lambda: errors.append(1)
        user = await logged_in_user(store.layer, "alice")
        async with database_refusing_writes(store, location):
            started = time.monotonic()
            await store.layer.create_step(message("t1", "first", created="2026-12-03T10:00:00.000Z"))
            await store.layer.store_now(message("t1", "second", created="2026-12-03T10:00:01.000Z"), user.id)
            waited = time.monotonic() - started  # only store_now's bounded wait
            while writer.unsaved_seconds < 0.5:  # the first write is being retried
                await asyncio.sleep(0.05)
            refused = (writer.write_failing, writer.last_error, len(errors))
        await writer.drain()
        return waited, refused, writer.write_failing, await store.layer.get_thread("t1")

    waited, (failing, error, counted), failing_after, thread = run_with_store(location, body)
    assert failing and counted == 1 and "read" in error.lower()
    assert waited < STORE_BEFORE_ANSWER_TIMEOUT_S + 0.5  # never longer than the user's message may wait
    assert not failing_after and [s["output"] for s in thread["steps"]] == ["first", "second"]


def test_one_users_writes_over_their_share_never_cost_another_user_a_write(location, monkeypatch):
    """Issue 36 N1: while the database refuses writes, one user's flood of changes used to fill the whole queue
    (10,000 places), and another user's messages were then dropped for good. Each user now has a share of the
    queue: past it only that user's new changes are refused, and they are told (``over_share``); everyone else's
    land once the database takes writes again. Shrunk here to 20 per user of 60 in all: a flood of 100 would fill
    the queue without the share."""
    import app.history.writer as writer_module

    monkeypatch.setattr(writer_module, "MAX_WAITING_PER_USER", 20)
    monkeypatch.setattr(writer_module, "MAX_WAITING", 60)

    async def as_user(store, name: str, thread_id: str, count: int) -> None:
        from chainlit.context import init_http_context
        from chainlit.user import User

        init_http_context(user=User(identifier=name))  # what Chainlit does for each request and socket event
        for n in range(count):
            await store.layer.create_step(message(thread_id, f"{name} {n}", created=f"2026-12-03T10:{n // 60:02d}:"
                                                                                    f"{n % 60:02d}.000Z"))

    async def body(store):
        writer = store.layer.writer
        async with database_refusing_writes(store, location):
            await asyncio.create_task(as_user(store, "mallory", "t-mallory", 100))  # a task: a context of its own
            told = set(writer.over_share)
            await asyncio.create_task(as_user(store, "alice", "t-alice", 15))
        await writer.drain(60)
        stored = {tid: [s["output"] for s in (await store.layer.get_thread(tid))["steps"]]
                  for tid in ("t-mallory", "t-alice")}
        return told, set(writer.over_share), stored

    told, told_after, stored = run_with_store(location, body)
    assert told == {"mallory"} and told_after == set()  # said while over the share, no longer once they landed
    assert stored["t-alice"] == [f"alice {n}" for n in range(15)]  # every one of alice's, in order
    assert stored["t-mallory"] == [f"mallory {n}" for n in range(20)]  # mallory's share, the first ones


def test_a_corrupt_sqlite_file_is_moved_aside_and_a_fresh_one_started(tmp_path):
    path = tmp_path / "chats.db"
    garbage = b"this is not a database " * 100
    path.write_bytes(garbage)
    location = DatabaseLocation(f"sqlite+aiosqlite:///{path}", path)
    assert asyncio.run(prepare_database(location)) == SCHEMA_VERSION
    kept = list(tmp_path.glob("chats.db.corrupt-*"))
    assert len(kept) == 1 and kept[0].read_bytes() == garbage
    with sqlite3.connect(path) as conn:
        assert conn.execute("select value from ernie_meta").fetchone() == (str(SCHEMA_VERSION),)
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
