"""An answer's versions (Regenerate keeps the earlier texts): the contract in app/history/messages.py, and where a
message's versions go with it: search, the exports, our own import, deleting the chat."""
from __future__ import annotations

import uuid

from chainlit.types import Pagination, ThreadFilter
from sqlalchemy import func, select

from app.history.database import DatabaseLocation
from app.history.export import chat_messages, to_json, to_markdown
from app.history.importers import from_ernie_chat
from app.history.messages import (
    ASSISTANT_MESSAGE,
    FINISH,
    FOOTER,
    KIND,
    KIND_ANSWER,
    LENGTH,
    MAX_VERSIONS,
    PARTIAL,
    SHOWN,
    VERSIONS,
    showing,
    shown_index,
    stored_versions,
    version_of,
    versions_of,
    versions_search_text,
    with_version,
)
from app.history.schema import steps
from tests.support.history_store import run_with_store, start_chat

STATS = "\n\n`prompt 9 tokens`"
LIMIT = "\n\n`length limit`"
FIRST = {"text": "Paris is the capital.", "footer": STATS}
SECOND = {"text": "It is Paris, on the Seine.", "footer": STATS + LIMIT, FINISH: LENGTH}


def answer_metadata(shown: int = 1) -> dict:
    version = [FIRST, SECOND][shown]
    meta = {KIND: KIND_ANSWER, FOOTER: version["footer"], VERSIONS: [FIRST, SECOND], SHOWN: shown}
    return {**meta, FINISH: LENGTH} if shown == 1 else meta


def test_an_answer_never_regenerated_is_its_one_version_and_keeps_no_keys():
    meta = {KIND: KIND_ANSWER, FOOTER: STATS}
    assert version_of("Paris." + STATS, meta) == {"text": "Paris.", "footer": STATS}
    assert versions_of("Paris." + STATS, meta) == [{"text": "Paris.", "footer": STATS}]
    assert stored_versions(meta) == [] and shown_index(meta) == 0
    assert with_version(meta, "Paris." + STATS, [], 0) == meta  # a first answer: no versions stored


def test_a_regenerated_answer_is_added_as_the_newest_version_and_shown():
    first = {KIND: KIND_ANSWER, FOOTER: STATS}
    kept = versions_of(FIRST["text"] + STATS, first)
    meta = with_version({KIND: KIND_ANSWER, FOOTER: STATS + LIMIT, FINISH: LENGTH}, SECOND["text"] + STATS + LIMIT,
                        kept, len(kept))
    assert meta == answer_metadata(1)
    third = with_version({KIND: KIND_ANSWER, FOOTER: STATS}, "Third." + STATS, meta[VERSIONS], 2)
    assert [v["text"] for v in third[VERSIONS]] == [FIRST["text"], SECOND["text"], "Third."] and third[SHOWN] == 2


def test_continue_writes_over_the_shown_version_in_its_place():
    meta = answer_metadata(0)
    grown = with_version({KIND: KIND_ANSWER, FOOTER: STATS}, "Paris is the capital, and more." + STATS,
                         stored_versions(meta), shown_index(meta))
    assert [v["text"] for v in grown[VERSIONS]] == ["Paris is the capital, and more.", SECOND["text"]]
    assert grown[SHOWN] == 0


def test_showing_a_version_gives_its_text_footer_and_finish():
    output, meta = showing(answer_metadata(1), [FIRST, SECOND], 0)
    assert output == FIRST["text"] + STATS and meta == answer_metadata(0)
    output, meta = showing({**answer_metadata(0), PARTIAL: True}, [FIRST, SECOND], 1)
    assert output == SECOND["text"] + STATS + LIMIT and meta == answer_metadata(1)  # finish comes with it
    assert versions_of(output, meta) == [FIRST, SECOND] and version_of(output, meta) == SECOND


def test_versions_from_a_file_that_are_not_versions_count_as_none():
    for versions in ("x", [FIRST, "x"], [FIRST, {"text": 3, "footer": ""}], [FIRST] * (MAX_VERSIONS + 1), None):
        meta = {KIND: KIND_ANSWER, VERSIONS: versions, SHOWN: 0}
        assert stored_versions(meta) == []
        assert versions_of("the answer", meta) == [{"text": "the answer", "footer": ""}]
    for shown in (-1, 5, True, "0", None):  # a shown place out of range: the output is the one version
        meta = {KIND: KIND_ANSWER, VERSIONS: [FIRST, SECOND], SHOWN: shown}
        assert versions_of("the answer", meta) == [{"text": "the answer", "footer": ""}]
    assert stored_versions(None) == [] and shown_index([]) == 0


def test_search_text_holds_every_versions_words():
    from app.history.data_layer import step_values

    step = {"type": ASSISTANT_MESSAGE, "output": SECOND["text"] + STATS, "metadata": answer_metadata(1)}
    assert "capital" in step_values(step, "t")["search_text"]  # only in the hidden first version
    assert versions_search_text({VERSIONS: "not a list"}) == ""


def answered_chat(meta: dict, output: str) -> dict:
    return {"id": "chat-1", "name": "capital", "createdAt": "2026-12-03T10:00:00.000Z", "userIdentifier": "alice",
            "steps": [{"id": "q", "type": "user_message", "name": "alice", "output": "Capital of France?",
                       "createdAt": "2026-12-03T10:00:00.000Z", "metadata": {}},
                      {"id": "a", "type": ASSISTANT_MESSAGE, "name": "ernie-chat", "output": output,
                       "createdAt": "2026-12-03T10:00:01.000Z", "metadata": meta}]}


def test_markdown_export_has_the_shown_version_and_a_line_for_the_others():
    thread = answered_chat(answer_metadata(0), FIRST["text"] + STATS)
    text = to_markdown(thread)
    assert FIRST["text"] in text and SECOND["text"] not in text
    assert "_(1 other version(s) of this answer are kept in the JSON export.)_" in text
    assert [m.get("other_versions") for m in chat_messages(thread)] == [None, 1]
    plain = answered_chat({KIND: KIND_ANSWER, FOOTER: STATS}, "Paris." + STATS)
    assert "other version" not in to_markdown(plain)


def test_our_json_export_read_back_keeps_every_version():
    import json

    thread = answered_chat(answer_metadata(0), FIRST["text"] + STATS)
    back = from_ernie_chat(json.loads(to_json(thread)), "alice")
    assert back["steps"][1]["metadata"] == answer_metadata(0)
    assert back["steps"][1]["output"] == FIRST["text"] + STATS


def test_search_finds_a_hidden_versions_word_and_deleting_the_chat_leaves_no_version(tmp_path):
    location = DatabaseLocation(f"sqlite+aiosqlite:///{tmp_path / 'chats.db'}", tmp_path / "chats.db")

    async def body(store):
        user_id, thread_id = await start_chat(store, "alice", "Capital of France?")
        await store.layer.create_step({"id": str(uuid.uuid4()), "threadId": thread_id, "type": ASSISTANT_MESSAGE,
                                       "name": "ernie-chat", "output": FIRST["text"] + STATS,
                                       "createdAt": "2026-12-03T10:00:01.000Z", "metadata": answer_metadata(0)})
        await store.layer.writer.drain()

        async def found(word):
            page = await store.layer.list_threads(Pagination(first=5), ThreadFilter(userId=user_id, search=word))
            return [chat["id"] for chat in page.data]

        seine = await found("SEINE")  # only in the version not shown
        await store.layer.delete_thread(thread_id)
        async with store.layer.engine.connect() as conn:
            left = (await conn.execute(select(func.count()).select_from(steps))).scalar_one()
        return thread_id, seine, await found("seine"), left

    thread_id, seine, after, left = run_with_store(location, body)
    assert seine == [thread_id] and after == [] and left == 0
