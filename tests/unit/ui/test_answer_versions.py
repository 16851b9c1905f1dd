"""The versions' buttons under the newest answer and the checks on what the page sends back with an arrow
(app/ui/answer_actions.py, app/ui/answer_versions.py): anything but an index in range for this chat's newest
answer is ignored."""
from __future__ import annotations

from types import SimpleNamespace

from app.history.messages import FOOTER, KIND, KIND_ANSWER, KIND_NOTICE, MAX_VERSIONS, SHOWN, VERSIONS
from app.i18n import t
from app.ui.answer_actions import VERSION_NEXT, VERSION_PLACE, VERSION_PREVIOUS, answer_actions, newest_answer
from app.ui.answer_versions import asked_index
from app.ui.preset_commands import SAVE_COMMANDS

VERSIONS_KEPT = [{"text": f"answer {n}", "footer": ""} for n in range(3)]


def buttons(shown: int, language: str = "en-US") -> list[tuple[str, str, dict]]:
    metadata = {KIND: KIND_ANSWER, FOOTER: "", VERSIONS: VERSIONS_KEPT, SHOWN: shown}
    return [(a.name, a.label, a.payload) for a in answer_actions(metadata, language)]


def test_the_arrows_go_only_where_there_is_a_version_and_the_place_is_in_the_pages_language():
    assert buttons(2) == [("regenerate", "Regenerate", {}), (VERSION_PREVIOUS, "◀", {"index": 1}),
                          (VERSION_PLACE, "Version 3/3", {})]
    assert buttons(1)[1:] == [(VERSION_PREVIOUS, "◀", {"index": 0}), (VERSION_PLACE, "Version 2/3", {}),
                              (VERSION_NEXT, "▶", {"index": 2})]
    assert buttons(0, "zh-CN")[1:] == [(VERSION_PLACE, "版本 1/3", {}), (VERSION_NEXT, "▶", {"index": 1})]
    assert [a.name for a in answer_actions({KIND: KIND_ANSWER}, "en-US")] == ["regenerate"]  # one version
    being_written = {KIND: KIND_ANSWER, VERSIONS: VERSIONS_KEPT, SHOWN: 3}
    assert [a.name for a in answer_actions(being_written, "en-US")] == ["regenerate"]


def test_an_arrows_payload_counts_only_as_a_whole_index_in_range():
    assert asked_index({"index": 2}, 3) == 2 and asked_index({"index": 0}, 3) == 0
    for payload in ({"index": 3}, {"index": -1}, {"index": True}, {"index": "1"}, {"index": 1.0}, {}, None, [1]):
        assert asked_index(payload, 3) is None


def message(kind: str, metadata: dict | None = None, command: str | None = None):
    return SimpleNamespace(type=kind, metadata=metadata, command=command)


def test_only_the_newest_answer_with_no_question_after_it_flips():
    question, answer = message("user_message"), message("assistant_message", {KIND: KIND_ANSWER})
    notice = message("assistant_message", {KIND: KIND_NOTICE})
    assert newest_answer([question, answer, notice]) is answer
    assert newest_answer([question, answer, message("user_message")]) is None
    saved_preset = message("user_message", command=next(iter(SAVE_COMMANDS)))  # the preset's name: not a turn
    assert newest_answer([question, answer, saved_preset, notice]) is answer
    assert newest_answer([question]) is None and newest_answer([]) is None


class Shown(SimpleNamespace):
    """A message the chat shows (cl.chat_context), recording its removal."""

    async def remove(self) -> None:
        self.removed = True


def regenerated(monkeypatch, versions: int, after: tuple = (), running: str = ""):
    """Press Regenerate under an answer that keeps ``versions`` versions, with the messages ``after`` it
    ("question", "preset": a "Save preset" message, "answer") and, with ``running`` "own" or "other", the chat's
    answer tasks holding this one or another: what was said, answered and removed."""
    import asyncio

    import chainlit as cl

    from app.ui import answer as answer_module
    from app.ui import answer_actions

    kept = [{"text": f"answer {n}", "footer": ""} for n in range(versions)]
    question = Shown(id="q", type="user_message", metadata={}, content="question", removed=False, command=None)
    reply = Shown(id="a", type="assistant_message", content="answer 0", removed=False,
                  metadata={KIND: KIND_ANSWER, FOOTER: "", **({VERSIONS: kept, SHOWN: 0} if versions > 1 else {})})
    line = Shown(id="n", type="assistant_message", metadata={KIND: KIND_NOTICE}, content="a notice", removed=False)
    save = next(iter(SAVE_COMMANDS))
    made = {"question": lambda: Shown(type="user_message", metadata={}, content="next", command=None),
            "preset": lambda: Shown(type="user_message", metadata={}, content="mine", command=save),
            "answer": lambda: Shown(type="assistant_message", metadata={KIND: KIND_ANSWER}, content="next answer")}
    later = [made[kind]() for kind in after]
    for n, message in enumerate(later):
        message.id, message.removed = f"later{n}", False
    said, answered = [], []

    async def toast(text):
        said.append(text)

    async def answer(rt, message, continuing=None, regenerating=None):
        answered.append((message, regenerating))

    async def press():
        own = asyncio.current_task()
        tasks = {"": set(), "own": {own}, "other": {own, asyncio.ensure_future(asyncio.sleep(0))}}[running]
        monkeypatch.setattr(answer_actions, "answer_tasks", lambda: tasks)
        await answer_module.regenerate(None, SimpleNamespace(forId="a"))

    monkeypatch.setattr(cl.chat_context, "get", lambda: [question, reply, line, *later])
    monkeypatch.setattr(answer_module, "notice", toast)
    monkeypatch.setattr(answer_module, "toast", toast)
    monkeypatch.setattr(answer_module, "answer", answer)
    asyncio.run(press())
    return said, answered, tuple(m.removed for m in (question, reply, line, *later))


def test_regenerate_writes_into_the_same_answer_until_the_cap_then_says_so_and_changes_nothing(monkeypatch):
    said, answered, removed = regenerated(monkeypatch, 1)
    assert said == [] and [(q.id, r.id) for q, r in answered] == [("q", "a")] and removed == (False, False, True)
    said, answered, removed = regenerated(monkeypatch, MAX_VERSIONS - 1)
    assert said == [] and len(answered) == 1
    said, answered, removed = regenerated(monkeypatch, MAX_VERSIONS)
    assert said == [t("en-US", "versions_full", limit=MAX_VERSIONS)] and "10 versions" in said[0]
    assert answered == [] and removed == (False, False, False)


def test_regenerate_under_an_older_answer_or_while_another_is_written_says_so_and_removes_nothing(monkeypatch):
    """A Regenerate left under the previous answer (after a stop, or pressed while the next answer streamed) took
    the later question and its answer out of the chat and the database."""
    for after, running in ((("question", "answer"), ""), ((), "other")):
        said, answered, removed = regenerated(monkeypatch, 1, after, running)
        assert said == [t("en-US", "not_newest")] and answered == [] and not any(removed), (after, running)


def test_regenerate_counts_its_own_task_and_a_saved_preset_as_nothing_after_the_answer(monkeypatch):
    said, answered, removed = regenerated(monkeypatch, 1, ("preset",), "own")
    assert said == [] and [(q.id, r.id) for q, r in answered] == [("q", "a")]
    assert removed == (False, False, True, False)  # the notice goes, the "Save preset" message stays


def test_a_chat_opened_from_a_search_shows_and_saves_the_version_holding_the_words():
    import asyncio

    from app.ui.answer_versions import open_on_searched_version

    saved = []

    async def update_step(step):
        saved.append(step["id"])

    layer = SimpleNamespace(update_step=update_step)
    versions = [{"text": "Lyon.", "footer": "\n\n`stats`"}, {"text": "Brest, the harbour.", "footer": "\n\n`s2`"}]

    def thread():
        return {"id": "chat", "userId": "u1", "steps": [
            {"id": "q", "type": "user_message", "output": "A city?", "metadata": {}},
            {"id": "a", "type": "assistant_message", "output": "Lyon.\n\n`stats`",
             "metadata": {KIND: KIND_ANSWER, FOOTER: "\n\n`stats`", VERSIONS: versions, SHOWN: 0}}]}

    opened = thread()
    asyncio.run(open_on_searched_version(opened, layer, ()))  # no search: as it was
    assert opened == thread() and saved == []
    asyncio.run(open_on_searched_version(opened, layer, ("harbour",)))
    assert opened["steps"][1]["output"] == "Brest, the harbour.\n\n`s2`" and opened["steps"][1]["metadata"][SHOWN] == 1
    assert saved == ["a"]
    again = thread()
    asyncio.run(open_on_searched_version(again, layer, ("city",)))  # a word the chat shows: nothing moves
    assert again == thread() and saved == ["a"]
