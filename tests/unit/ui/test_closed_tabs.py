"""A closed tab's chat leaves memory when the database holds it, and comes back from the database with the tab
(app/ui/closed_tabs.py): Chainlit's own session object and chat contexts, our data layer on a SQLite file."""
from __future__ import annotations

import asyncio
import uuid
import weakref

import pytest
from chainlit.chat_context import chat_contexts
from chainlit.session import WebsocketSession

from app.chainlit_internals import held_messages, hold_messages, messages_from_steps
from app.history.database import DatabaseLocation
from app.ui import closed_tabs
from app.ui.closed_tabs import chat_difference, free_when_answers_end, read_back_when_back
from tests.support.history_store import run_with_store

REPORT = "the keeper's log, page after page. " * 20_000  # a document's text: what a closed tab must not keep


def _steps(thread_id: str) -> list[dict]:
    """A question with a document and its answer, as the chat stores them."""
    question = {"id": str(uuid.uuid4()), "threadId": thread_id, "type": "user_message", "name": "alice",
                "output": "What did the keeper see?", "createdAt": "2026-12-06T10:00:00.000Z",
                "metadata": {"documents": [{"name": "log.txt", "kind": "text", "text": REPORT, "page_starts": None}]}}
    answer = {"id": str(uuid.uuid4()), "threadId": thread_id, "type": "assistant_message", "name": "Assistant",
              "output": "Ships.", "createdAt": "2026-12-06T10:00:01.000Z", "metadata": {"kind": "answer"}}
    return [question, answer]


@pytest.fixture
def tab():
    """A chat tab's session, as Chainlit keeps it after its socket went; removed afterwards."""
    session = WebsocketSession(id=str(uuid.uuid4()), socket_id=str(uuid.uuid4()), emit=lambda *a: None,
                               emit_call=lambda *a: None, client_type="webapp", user_env={}, user=None, token=None,
                               thread_id=str(uuid.uuid4()))
    yield session
    chat_contexts.pop(session.id, None)
    asyncio.run(session.delete())


def _location(tmp_path) -> DatabaseLocation:
    path = tmp_path / "chats.db"
    return DatabaseLocation(f"sqlite+aiosqlite:///{path}", path)


async def _stored(store, steps: list[dict]) -> None:
    for step in steps:
        await store.layer.store_now(step, None)
    await store.layer.writer.drain()


def test_a_closed_tabs_chat_leaves_memory_and_comes_back_the_same(tab, tmp_path):
    async def body(store):
        steps = _steps(tab.thread_id)
        await _stored(store, steps)
        hold_messages(tab, messages_from_steps(tab, steps))
        before = held_messages(tab)
        question = weakref.ref(before[0])
        shapes = [(m.id, m.type, m.content, m.metadata) for m in before]
        del before
        assert await free_when_answers_end(store, tab, set()) is True
        assert tab.id not in chat_contexts  # Chainlit holds nothing of the chat
        assert question() is None  # nor does anything else: its document's text is free, no collection needed
        await read_back_when_back(store, tab)
        return shapes, [(m.id, m.type, m.content, m.metadata) for m in held_messages(tab)]

    shapes, read_back = run_with_store(_location(tmp_path), body)
    assert read_back == shapes  # the document's text included


def test_a_chat_comes_back_in_the_order_the_tab_held_it(tab, tmp_path):
    """An answer is stored as it ends: after a question sent while it was being written, which the database then
    lists before it. The tab held them as they came, and gets them back so."""
    async def body(store):
        question, answer = _steps(tab.thread_id)
        answer["createdAt"] = "2026-12-06T10:00:03.000Z"
        later = {**question, "id": str(uuid.uuid4()), "output": "And then?", "metadata": {},
                 "createdAt": "2026-12-06T10:00:02.000Z"}
        await _stored(store, [question, answer, later])
        held = [question, answer, later]
        hold_messages(tab, messages_from_steps(tab, held))
        assert await free_when_answers_end(store, tab, set()) is True
        await read_back_when_back(store, tab)
        return [step["id"] for step in held], [m.id for m in held_messages(tab)]

    held, read_back = run_with_store(_location(tmp_path), body)
    assert read_back == held


def test_a_chat_the_database_holds_otherwise_stays_in_memory(tab, tmp_path):
    async def body(store):
        steps = _steps(tab.thread_id)
        await _stored(store, steps[:1])  # the answer's write never landed
        hold_messages(tab, messages_from_steps(tab, steps))
        freed = await free_when_answers_end(store, tab, set())
        await read_back_when_back(store, tab)
        return freed, len(held_messages(tab))

    assert run_with_store(_location(tmp_path), body) == (False, 2)


def test_a_chat_whose_answer_does_not_end_stays_in_memory(tab, tmp_path, monkeypatch):
    monkeypatch.setattr(closed_tabs, "ANSWERS_END_S", 0.1)

    async def body(store):
        steps = _steps(tab.thread_id)
        await _stored(store, steps)
        hold_messages(tab, messages_from_steps(tab, steps))
        answering = asyncio.get_running_loop().create_future()  # never done
        freed = await free_when_answers_end(store, tab, {answering})
        answering.cancel()
        return freed, len(held_messages(tab))

    assert run_with_store(_location(tmp_path), body) == (False, 2)


def test_a_tab_back_before_its_chat_went_keeps_it(tab, tmp_path):
    async def body(store):
        steps = _steps(tab.thread_id)
        await _stored(store, steps)
        hold_messages(tab, messages_from_steps(tab, steps))
        answering = asyncio.get_running_loop().create_future()
        freeing = free_when_answers_end(store, tab, {answering})
        await asyncio.sleep(0)
        await read_back_when_back(store, tab)  # back while its answer was ending
        answering.set_result(None)
        await asyncio.gather(freeing, return_exceptions=True)
        return freeing.cancelled(), len(held_messages(tab))

    assert run_with_store(_location(tmp_path), body) == (True, 2)


def test_without_a_database_a_tab_back_keeps_what_it_held(tab):
    async def body():
        hold_messages(tab, messages_from_steps(tab, _steps(tab.thread_id)))
        await read_back_when_back(None, tab)
        return len(held_messages(tab))

    assert asyncio.run(body()) == 2


def test_the_same_chat_is_the_same_messages_in_order_with_their_text_and_metadata(tab):
    async def body():  # messages are made in a running loop, as Chainlit's context needs one
        steps = _steps(tab.thread_id)
        held = messages_from_steps(tab, steps)

        def difference(stored: list[dict]):
            return chat_difference(held, messages_from_steps(tab, stored))

        assert difference(steps) is None
        assert difference([{**steps[0], "metadata": None}, {**steps[1], "metadata": {}}]) is not None
        assert difference(steps[::-1]) == "message 1 of 2: its id differs"
        assert difference([steps[0], {**steps[1], "output": "Rocks."}]) == "message 2 of 2: its content differs"
        assert difference([{**steps[0], "metadata": {}}, steps[1]]) == "message 1 of 2: its metadata differs"
        assert difference(steps[:1]) == "2 messages here, 1 in the database"
        assert chat_difference([], []) is None

    asyncio.run(body())
