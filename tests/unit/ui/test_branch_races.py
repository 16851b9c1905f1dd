"""Changes to a question's branches one at a time (issue 32 item 2): each arrow click and each edit arrives as a task
of its own, and every step of a switch awaits the page. The fake page here yields on every call, as a socket emit
does, so two changes interleave as they do on a real page."""
from __future__ import annotations

import asyncio
import sys
from types import SimpleNamespace
from typing import Any

import chainlit as cl
import pytest
from chainlit.context import context, init_http_context

import app.ui.answer_actions as answer_actions
import app.ui.question_branches as question_branches
from app import chainlit_internals
from app.chainlit_internals import answer_tasks
from app.i18n import t


class YieldingPage:
    """An emitter whose every call yields to the loop; it keeps the toasts shown."""

    def __init__(self) -> None:
        self.toasts: list[str] = []

    async def send_toast(self, message: str, type: Any = "info") -> None:
        await asyncio.sleep(0)
        self.toasts.append(message)

    def __getattr__(self, name: str) -> Any:
        async def call(*args: Any, **kwargs: Any) -> None:
            await asyncio.sleep(0)

        return call


def _runtime(limit: int = 1000) -> Any:
    counter = SimpleNamespace(inc=lambda: None)
    return SimpleNamespace(settings=SimpleNamespace(chat=SimpleNamespace(max_message_chars=limit)),
                           metrics=SimpleNamespace(rejected=SimpleNamespace(labels=lambda **_: counter)))


@pytest.fixture
def page(monkeypatch) -> YieldingPage:
    monkeypatch.setattr(answer_actions, "_chats_kept", lambda: False)
    monkeypatch.setattr(question_branches, "current_runtime", lambda: _runtime())
    return YieldingPage()


def _open(page: YieldingPage) -> None:
    """This chat's context, entered in the running loop (as Chainlit's handlers enter it)."""
    init_http_context(thread_id="chat", user=cl.User(identifier="alice"))
    context.emitter = page


def _step(type_: str, text: str) -> dict[str, Any]:
    name, metadata = ("Assistant", {"kind": "answer"}) if type_ == "assistant_message" else ("User", {})
    return {"type": type_, "name": name, "output": text, "metadata": metadata}


async def _shown(*messages: cl.Message) -> None:
    for message in messages:
        await message.send()


def _texts() -> list[str]:
    return [m.content for m in cl.chat_context.get() if (m.metadata or {}).get("kind") != "notice"]


def test_a_second_arrow_click_while_a_switch_shows_its_branch_is_refused_and_no_branch_is_mixed(page):
    async def scenario():
        _open(page)
        hidden = [_step("assistant_message", "A0"), _step("user_message", "Q0b"), _step("assistant_message", "A0b")]
        question = cl.Message(content="Q-one", type="user_message", metadata={
            "branches": [{"text": "Q-zero", "after": hidden}, {"text": "Q-one", "after": None}], "branch": 1})
        answer = cl.Message(content="A1", type="assistant_message", metadata={"kind": "answer"})

        async def both():
            await _shown(question, answer)
            first = cl.Action(name="branch_previous", payload={"index": 0}, forId=question.id)
            back = cl.Action(name="branch_next", payload={"index": 1}, forId=question.id)

            async def click_while_showing():
                for _ in range(6):  # the arrows are redrawn; the branch's messages are still being sent
                    await asyncio.sleep(0)
                await question_branches.show_branch(back)

            await asyncio.gather(question_branches.show_branch(first), click_while_showing())

        await both()
        assert page.toasts == [t("en-US", "branches_busy")]
        assert _texts() == ["Q-zero", "A0", "Q0b", "A0b"]
        branches = question.metadata["branches"]
        assert branches[0] == {"text": "Q-zero", "after": None}
        assert branches[1]["text"] == "Q-one" and [m["output"] for m in branches[1]["after"]] == ["A1"]

    asyncio.run(scenario())


def _edits_through_the_wrap(monkeypatch) -> Any:
    """Chainlit's edit handler, wrapped as the app wraps it, with Chainlit's own removal (a yield per message)."""
    from chainlit.server import sio
    from chainlit.session import WebsocketSession

    monkeypatch.setattr(sio, "handlers", {"/": dict(sio.handlers["/"])})

    async def chainlits_edit(sid, payload):
        messages = cl.chat_context.get()
        place = next(n for n, m in enumerate(messages) if m.id == payload["message"]["id"])
        messages[place].content = payload["message"]["output"]
        await messages[place].update()
        for message in messages[place + 1:]:
            await message.remove()

    sio.handlers["/"]["edit_message"] = chainlits_edit
    monkeypatch.setattr(WebsocketSession, "get", classmethod(lambda cls, sid: object()))
    monkeypatch.setattr(sys.modules["chainlit.context"], "init_ws_context", lambda session: None)
    chainlit_internals.keep_turns_on_edit(question_branches.keep_branch_on_edit)
    return sio.handlers["/"]["edit_message"]


def test_two_edits_of_one_question_at_once_keep_the_first_and_refuse_the_second(page, monkeypatch):
    async def scenario():
        _open(page)
        edit = _edits_through_the_wrap(monkeypatch)
        question = cl.Message(content="original", type="user_message", metadata={})
        answer = cl.Message(content="answer to original", type="assistant_message", metadata={"kind": "answer"})

        async def both():
            await _shown(question, answer)
            await asyncio.gather(*(edit("s", {"message": {"id": question.id, "output": text}})
                                   for text in ("edit one", "edit two")))

        await both()
        assert page.toasts == [t("en-US", "branches_busy")]
        assert question.metadata["branches"] == [
            {"text": "original", "after": [{"type": "assistant_message", "name": answer.author,
                                            "output": "answer to original", "metadata": {"kind": "answer"}}]},
            {"text": "edit one", "after": None}]

    asyncio.run(scenario())


def test_an_edit_while_an_answer_is_written_is_refused_and_keeps_no_half_answer(page):
    async def scenario():
        _open(page)
        question = cl.Message(content="original", type="user_message", metadata={})
        half = cl.Message(content="half an ans", type="assistant_message", metadata={"kind": "answer", "partial": True})

        async def edit_while_answering():
            await _shown(question, half)
            answer_tasks().add(asyncio.ensure_future(asyncio.sleep(1)))
            return await question_branches.keep_branch_on_edit(question, [half], "edited", True)

        assert await edit_while_answering() is False
        assert question.metadata == {} and _texts()[-1] == "half an ans"
        notices = [m.content for m in cl.chat_context.get() if (m.metadata or {}).get("kind") == "notice"]
        assert notices == [t("en-US", "answer_running_edit")]

    asyncio.run(scenario())


def test_an_edit_longer_than_a_message_may_be_is_not_kept_as_a_branch(page, monkeypatch):
    async def scenario():
        _open(page)
        monkeypatch.setattr(question_branches, "current_runtime", lambda: _runtime(limit=100))
        question = cl.Message(content="original", type="user_message", metadata={})

        async def edit():
            await _shown(question)
            return await question_branches.keep_branch_on_edit(question, [], "x" * 101, True)

        assert await edit() is False and question.metadata == {}

    asyncio.run(scenario())


def test_an_arrow_click_for_a_message_not_in_this_chat_changes_nothing_and_says_so(page):
    async def scenario():
        _open(page)
        question = cl.Message(content="Q-one", type="user_message", metadata={
            "branches": [{"text": "Q-zero", "after": []}, {"text": "Q-one", "after": None}], "branch": 1})

        async def forged():
            await _shown(question)
            await question_branches.show_branch(cl.Action(name="branch_previous", payload={"index": 0}, forId="nope"))

        await forged()
        assert page.toasts == [t("en-US", "branch_not_there")] and question.metadata["branch"] == 1

    asyncio.run(scenario())


def test_forking_a_chat_another_user_owns_stores_nothing_and_says_so(page, monkeypatch):
    async def scenario():
        _open(page)
        import app.history.forking as forking
        import app.ui.fork_chat as fork_chat

        read: list[str] = []

        async def get_thread_author(thread_id):
            return "mallory"

        async def thread_for_export(layer, thread_id):
            read.append(thread_id)

        layer = SimpleNamespace(get_thread_author=get_thread_author)
        monkeypatch.setattr(fork_chat, "current_store", lambda: SimpleNamespace(layer=layer))
        monkeypatch.setattr(forking, "thread_for_export", thread_for_export)
        answer = cl.Message(content="An answer.", type="assistant_message", metadata={"kind": "answer"})

        async def fork():
            await _shown(answer)
            await fork_chat.fork_from(cl.Action(name="fork", payload={}, forId=answer.id))

        await fork()
        assert read == [] and page.toasts == [t("en-US", "fork_refused")]


    asyncio.run(scenario())
