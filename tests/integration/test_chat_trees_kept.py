"""A chat's tree (answers' versions, questions' branches, nested) kept in the chat database, on SQLite and on a real
PostgreSQL server (tests/postgres.py): it round trips through the data layer, search reads every version and branch,
deleting the chat leaves no row or text search finds, the schema's version 3 makes the search text of chats written
before again (in slices), and our JSON export and import carry the tree whole."""
from __future__ import annotations

import copy
import json
import uuid

from chainlit.types import Pagination, ThreadFilter
from sqlalchemy import func, select, update

from app.history import HistoryStore
from app.history.export import to_json, to_markdown
from app.history.importers import read_chat_file
from app.history.messages import search_text
from app.history.restore import import_chat
from app.history.schema import SCHEMA_VERSION, SEARCH_TEXT_BATCH, meta, steps
from tests.support.fakes import logged_in_user
from tests.support.history_store import run_with_store

STATS = "\n\n`prompt 9 tokens`"
# A question edited once: the hidden branch holds its old answer (with two versions) and a follow-up that was itself
# edited (a branch inside a branch); the shown answer keeps versions of its own.
ANSWER_SHOWN = {"kind": "answer", "footer": STATS, "shown": 1, "versions": [
    {"text": "Marseille has the old port.", "footer": STATS}, {"text": "Lyon sits on two rivers.", "footer": STATS}]}
QUESTION_SHOWN = {"branch": 1, "branches": [
    {"text": "Name a port city.", "after": [
        {"type": "assistant_message", "name": "Assistant", "output": "Le Havre." + STATS, "metadata": {
            "kind": "answer", "footer": STATS, "shown": 0, "versions": [
                {"text": "Le Havre.", "footer": STATS}, {"text": "Brest, a naval harbour.", "footer": STATS}]}},
        {"type": "user_message", "name": "alice", "output": "And in the south?", "metadata": {"branch": 0,
         "branches": [{"text": "And in the south?", "after": None},
                      {"text": "Any lighthouse there?", "after": [
                          {"type": "assistant_message", "name": "Assistant", "output": "Cordouan, the oldest.",
                           "metadata": {"kind": "answer"}}]}]}}]},
    {"text": "Name a city on two rivers.", "after": None}]}
HIDDEN_WORDS = ("brest", "cordouan", "marseille", "lighthouse")





def tree_steps(thread_id: str) -> list[dict]:
    return [{"id": str(uuid.uuid4()), "threadId": thread_id, "type": kind, "name": name, "output": text,
             "metadata": copy.deepcopy(metadata), "createdAt": f"2026-12-03T10:00:0{n}.000Z"}
            for n, (kind, name, text, metadata) in enumerate((
                ("user_message", "alice", "Name a city on two rivers.", QUESTION_SHOWN),
                ("assistant_message", "Assistant", "Lyon sits on two rivers." + STATS, ANSWER_SHOWN)))]




async def write_tree_chat(store: HistoryStore) -> tuple[str, str]:
    user = await logged_in_user(store.layer, "alice")
    thread_id = str(uuid.uuid4())
    for step in tree_steps(thread_id):
        await store.layer.create_step(step)
    await store.layer.update_thread(thread_id, name="Cities", user_id=user.id)
    await store.layer.writer.drain()
    return user.id, thread_id


async def found_by(store: HistoryStore, user_id: str, words: str) -> list[str]:
    found = await store.layer.list_threads(Pagination(first=20), ThreadFilter(userId=user_id, search=words))
    return [chat["id"] for chat in found.data]


def test_the_tree_round_trips_and_search_reads_every_version_and_branch(location):
    async def body(store):
        user_id, thread_id = await write_tree_chat(store)
        thread = await store.layer.get_thread(thread_id)
        searches = {word: await found_by(store, user_id, word) for word in (*HIDDEN_WORDS, "lyon", "nantes")}
        await found_by(store, user_id, "Brest  CORDOUAN")
        # The search is remembered for the chats it listed, for that user: the chat opens on the words.
        searched = store.layer.searched
        remembered = (searched.take("someone else", thread_id), searched.take(user_id, thread_id))
        return thread_id, thread, searches, remembered

    thread_id, thread, searches, remembered = run_with_store(location, body)
    assert remembered == ((), ("cordouan", "brest"))
    assert [s["metadata"] for s in thread["steps"]] == [QUESTION_SHOWN, ANSWER_SHOWN]
    assert searches == {**{word: [thread_id] for word in (*HIDDEN_WORDS, "lyon")}, "nantes": []}


def test_deleting_a_chat_deletes_every_version_and_branch(location):
    async def body(store):
        user_id, thread_id = await write_tree_chat(store)
        await store.layer.delete_thread(thread_id)
        await store.layer.writer.drain()
        async with store.layer.engine.connect() as conn:
            rows = (await conn.execute(select(func.count()).select_from(steps))).scalar_one()
            holding = (await conn.execute(select(func.count()).select_from(steps).where(
                steps.c.data.like("%Cordouan%") | steps.c.search_text.like("%brest%")))).scalar_one()
        return rows, holding, [await found_by(store, user_id, word) for word in HIDDEN_WORDS]

    assert run_with_store(location, body) == (0, 0, [[]] * len(HIDDEN_WORDS))


def test_version_3_makes_the_search_text_of_chats_written_before_again_in_slices(location):
    """A version-2 database, its messages' search text as an older app wrote it (the shown text only): the start
    migrates it, slice by slice, and search finds the hidden versions' and branches' words."""
    async def written_by_version_2(store):
        user_id, thread_id = await write_tree_chat(store)
        many = [{"id": f"filler-{n:05d}", "thread_id": thread_id, "type": "user_message",
                 "created_at": f"2026-12-03T11:{n // 60 % 60:02d}:{n % 60:02d}.000Z", "position": n,
                 "search_text": "", "data": json.dumps({"type": "user_message", "output": f"Filler {n}",
                                                        "metadata": {}})}
                for n in range(2 * SEARCH_TEXT_BATCH + 3)]
        async with store.layer.engine.begin() as conn:
            await conn.execute(steps.insert(), many)
            await conn.execute(update(steps).values(search_text=""))  # as an older rule left it, or none
            await conn.execute(update(meta).where(meta.c.key == "schema_version").values(value="2"))
        return user_id, thread_id

    user_id, thread_id = run_with_store(location, written_by_version_2)

    async def after_the_start(store):
        async with store.layer.engine.connect() as conn:
            version = (await conn.execute(select(meta.c.value).where(meta.c.key == "schema_version"))).scalar()
            rows = (await conn.execute(select(steps.c.data, steps.c.search_text))).all()
        return version, rows, [await found_by(store, user_id, word) for word in (*HIDDEN_WORDS, "filler 1002")]

    version, rows, searches = run_with_store(location, after_the_start)  # run_with_store migrates first
    assert version == str(SCHEMA_VERSION) == "3"
    assert len(rows) == 2 * SEARCH_TEXT_BATCH + 5
    assert all(row.search_text == search_text(json.loads(row.data)) for row in rows)
    assert searches == [[thread_id]] * (len(HIDDEN_WORDS) + 1)


def test_json_export_and_import_carry_the_tree_and_markdown_names_the_hidden_ones(location, tmp_path):
    async def export(store):
        _, thread_id = await write_tree_chat(store)
        return await store.layer.get_thread(thread_id)

    thread = run_with_store(location, export)
    exported = json.loads(to_json(thread))
    assert [m.get("other_branches") for m in exported["messages"]] == [1, None]
    assert [m.get("other_versions") for m in exported["messages"]] == [None, 1]
    markdown = to_markdown(thread)
    assert "Name a city on two rivers.\n\n_(1 other branch(es) from this question" in markdown
    assert "Lyon sits on two rivers.\n\n_(1 other version(s) of this answer" in markdown
    assert "Cordouan" not in markdown and "Marseille" not in markdown  # the shown branch and versions only

    path = tmp_path / "chat.json"
    path.write_text(to_json({**thread, "id": str(uuid.uuid4())}), encoding="utf-8")
    reading = read_chat_file(path, "alice")

    async def imported(store):
        await import_chat(store.layer, reading.chats[0].data)
        user = await store.layer.get_user("alice")
        return (await store.layer.get_thread(reading.chats[0].data["id"]),
                await found_by(store, user.id, "cordouan"))

    again, found = run_with_store(location, imported)
    assert [s["metadata"] for s in again["steps"]] == [QUESTION_SHOWN, ANSWER_SHOWN]
    assert reading.chats[0].data["id"] in found


def test_our_json_with_a_damaged_tree_is_refused_for_that_chat_only(tmp_path):
    good = json.loads(to_json({"id": "good-chat", "name": "fine", "steps": tree_steps("good-chat"),
                               "userIdentifier": "alice"}))
    damaged = copy.deepcopy(good)
    damaged["id"] = "damaged-chat"
    damaged["steps"][0]["metadata"]["branches"][1]["after"] = []  # no branch shown now
    too_many = copy.deepcopy(good)
    too_many["id"] = "versions-chat"
    too_many["steps"][1]["metadata"]["versions"] *= 6  # 12 versions
    lines = []
    for n, data in enumerate((damaged, too_many, good)):
        path = tmp_path / f"{n}.json"
        path.write_text(json.dumps(data), encoding="utf-8")
        chat = read_chat_file(path, "alice").chats[0]
        lines.append(chat.refused if chat.data is None else "read")
    assert lines == [
        "its message 1: its branches are not 2 to 10 branches (nested at most 16 deep), each a question and the "
        "messages after it, exactly one shown",
        "its message 2: its versions are not a list of at most 10 versions, each a text and a footer",
        "read"]
