"""Several answers at once (app/ui/several_answers.py, app/ui/answers_command.py, app/ui/answer.py): how many are
written, and how the answers written side by side fold into the versions of one answer, however they end."""
from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from app.engine.protocol import Sampling
from app.history.messages import FOOTER, KIND, KIND_ANSWER, MAX_VERSIONS, PARTIAL, SHOWN, TOGETHER, VERSIONS
from app.i18n import t
from app.ui import several_answers
from app.ui.answers_command import ANSWERS_COMMANDS, COMMAND_ANSWERS, answers_asked, answers_command
from app.ui.streamed_answer import STOPPED


class Page(SimpleNamespace):
    """A message on the page, recording what happened to it. Each change waits a turn of the loop, as a real one
    waits for the socket, so a cancel can come in the middle; ``touched`` is set at the first."""

    touched: asyncio.Event  # one per run (write), made in its loop

    async def remove(self) -> None:
        Page.touched.set()
        await asyncio.sleep(0)
        self.removed = True

    async def update(self) -> None:
        Page.touched.set()
        await asyncio.sleep(0)
        self.updated = True
        self.saved = [*getattr(self, "saved", []), dict(self.metadata)]


class FakeAnswer:
    """One of the answers written at once: writes what the test says, or fails, or waits to be stopped."""

    script: list = []
    made: list = []

    def __init__(self, rt, language, token_ids, sampling, offers_actions=True, marks=None):
        assert offers_actions is False  # the kept answer gets the buttons, not each of them
        self.sampling, self.outcome, self.parts, self.marks = sampling, "done", [], marks
        self.reply = Page(id=f"answer {len(FakeAnswer.made)}", content="", metadata={KIND: KIND_ANSWER},
                          removed=False, updated=False)
        self.plan = FakeAnswer.script[len(FakeAnswer.made)]
        self.waiting = asyncio.Event()  # set once it waits to be stopped
        FakeAnswer.made.append(self)

    async def write(self):
        if self.plan == "stop":
            self.parts = ["so far"]
            try:
                self.waiting.set()
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                self.outcome = STOPPED
                self.reply.content, self.reply.metadata = "so far\n\n`stopped`", {KIND: KIND_ANSWER,
                                                                                   FOOTER: "\n\n`stopped`"}
                raise
        if isinstance(self.plan, Exception):
            raise self.plan
        if self.plan:
            self.parts = [self.plan]
            self.reply.content, self.reply.metadata = self.plan + "\n\nstats", {KIND: KIND_ANSWER,
                                                                                FOOTER: "\n\nstats"}


@pytest.fixture
def page(monkeypatch):
    said, offered = [], []

    async def notice(text):
        said.append(text)

    async def offer_actions(reply, language):
        offered.append(reply)

    async def nothing():
        pass

    FakeAnswer.made = []
    monkeypatch.setattr(several_answers, "StreamedAnswer", FakeAnswer)
    monkeypatch.setattr(several_answers, "notice", notice)
    monkeypatch.setattr(several_answers, "offer_actions", offer_actions)
    monkeypatch.setattr(several_answers, "take_off_answer_actions", nothing)
    monkeypatch.setattr(several_answers, "mark_stopped", lambda: said.append("marked stopped"))
    return SimpleNamespace(said=said, offered=offered)


def write(script, temperature=0.8, regenerating=None, seed=None, stops=0):
    """Write the answers ``script`` says; with ``stops``, Stop once every answer told to wait is waiting, and again
    (``stops`` 2: Stop twice, or Stop then the tab closed) once the fold has begun to change the page."""
    FakeAnswer.script, FakeAnswer.made = script, []
    sampling = Sampling(temperature=temperature, top_p=0.8, max_tokens=64, seed=seed)
    answers = several_answers.SeveralAnswers(None, "en-US", [1, 2, 3], sampling, len(script), regenerating)

    async def run():
        Page.touched = asyncio.Event()
        task = asyncio.ensure_future(answers.write())
        if stops:
            await asyncio.sleep(0)  # the answers are made and begin
            await asyncio.gather(*(made.waiting.wait() for made in FakeAnswer.made if made.plan == "stop"))
            Page.touched.clear()
            task.cancel()
        if stops > 1:
            await Page.touched.wait()
            task.cancel()
        await task

    asyncio.run(run())
    return FakeAnswer.made


def test_three_answers_fold_into_one_answer_with_three_versions_each_with_its_footer(page):
    made = write(["one", "two", "three"])
    kept = made[0].reply
    assert kept.metadata[VERSIONS] == [{"text": f"{w}", "footer": "\n\nstats"} for w in ("one", "two", "three")]
    assert kept.metadata[SHOWN] == 0 and kept.content == "one\n\nstats" and kept.updated
    assert [m.reply.removed for m in made] == [False, True, True]  # the others leave the chat
    assert page.offered == [kept] and page.said == []


def test_each_answer_gets_its_own_seed_when_one_is_asked_for_and_none_otherwise(page):
    assert [m.sampling.seed for m in write(["a", "b", "c"], seed=7)] == [7, 8, 9]
    assert [m.sampling.seed for m in write(["a", "b"], seed=2**63 - 1)] == [2**63 - 1, -2**63]  # vLLM's range
    assert [m.sampling.seed for m in write(["a", "b"])] == [None, None]


def test_regenerating_keeps_the_earlier_versions_and_shows_the_first_new_one(page):
    earlier = [{"text": "old 0", "footer": ""}, {"text": "old 1", "footer": ""}]
    reply = Page(id="old", content="old 1", metadata={KIND: KIND_ANSWER, FOOTER: "", VERSIONS: earlier, SHOWN: 1},
                 removed=False, updated=False)
    made = write(["new a", "new b"], regenerating=reply)
    assert all(m.marks == {TOGETHER: "old"} for m in made)  # a crash meanwhile folds them into it on resume
    assert [v["text"] for v in reply.metadata[VERSIONS]] == ["old 0", "old 1", "new a", "new b"]
    assert reply.metadata[SHOWN] == 2 and reply.content == "new a\n\nstats" and reply.updated
    assert all(m.reply.removed for m in made) and page.offered == [reply]


def test_an_answer_that_wrote_nothing_leaves_no_version_and_one_that_fails_ends_none_of_the_others(page):
    made = write(["", "two", "three"])
    assert made[0].reply.removed and [v["text"] for v in made[1].reply.metadata[VERSIONS]] == ["two", "three"]
    with pytest.raises(RuntimeError):
        write(["one", RuntimeError("engine"), "three"])
    assert [v["text"] for v in FakeAnswer.made[0].reply.metadata[VERSIONS]] == ["one", "three"]


def test_stop_keeps_what_each_wrote_as_versions_and_the_chat_says_stopped_once(page):
    with pytest.raises(asyncio.CancelledError):
        write(["stop", "stop"], stops=1)
    kept = FakeAnswer.made[0].reply
    assert [v["footer"] for v in kept.metadata[VERSIONS]] == ["\n\n`stopped`"] * 2
    assert page.said == ["marked stopped"]  # each version says it; run_tracked adds no other line


@pytest.mark.parametrize("regenerate", [False, True])
def test_a_second_stop_during_the_fold_loses_no_version(page, regenerate):
    """Stop, then Stop again (or the tab closed, or the app stopped) while the answers fold: the fold runs to its
    end, every version kept in the kept answer, the others gone, and the task still ends cancelled."""
    reply = Page(id="old", content="old", metadata={KIND: KIND_ANSWER, FOOTER: ""}, removed=False, updated=False)
    with pytest.raises(asyncio.CancelledError):
        write(["stop", "stop", "stop"], regenerating=reply if regenerate else None, stops=2)
    kept = reply if regenerate else FakeAnswer.made[0].reply
    assert [v["text"] for v in kept.metadata[VERSIONS]] == ["old"] * regenerate + ["so far"] * 3
    assert kept.updated and PARTIAL not in kept.metadata and page.offered == [kept]
    assert all(m.reply.removed for m in FakeAnswer.made if m.reply is not kept)
    assert page.said == ["marked stopped"]


def test_the_regenerated_answer_is_partial_while_they_are_written_and_as_it_was_when_none_wrote(page):
    before = {KIND: KIND_ANSWER, FOOTER: "\n\nstats"}
    reply = Page(id="old", content="old\n\nstats", metadata=dict(before), removed=False, updated=False)
    write(["a", "b"], regenerating=reply)
    assert reply.saved[0] == {**before, PARTIAL: True, TOGETHER: "old"}  # before the answers start
    assert PARTIAL not in reply.saved[-1] and TOGETHER not in reply.saved[-1]
    reply = Page(id="old", content="old\n\nstats", metadata=dict(before), removed=False, updated=False)
    write(["", ""], regenerating=reply)
    assert reply.saved[-1] == before and reply.content == "old\n\nstats"


class Layer:
    """The chat database, as the resumed chat's fold uses it."""

    def __init__(self):
        self.done = []

    async def update_step(self, step):
        self.done.append(("update", step["id"]))

    async def delete_step(self, step_id):
        self.done.append(("delete", step_id))


def resume(monkeypatch, steps):
    import chainlit.data

    layer = Layer()
    monkeypatch.setattr(chainlit.data, "get_data_layer", lambda: layer)
    thread = {"steps": steps}
    asyncio.run(several_answers.fold_interrupted(thread, "en-US"))
    return thread["steps"], layer.done


def step(id, output, **metadata):
    return {"id": id, "type": "assistant_message", "output": output, "metadata": {KIND: KIND_ANSWER, **metadata}}


INTERRUPTED = "\n\n`" + t("en-US", "interrupted") + "`"


def test_a_chat_resumed_after_a_crash_folds_the_answers_written_at_once(monkeypatch):
    """Killed while three answers regenerating one were written (one ended, one cut, one not saved yet): the chat
    comes back with one answer, its versions the old one's and the two new, the cut one saying "interrupted";
    the new messages leave the database, after the answer is saved."""
    question = {"id": "q", "type": "user_message", "output": "?", "metadata": {}}
    old = step("old", "old\n\nstats", **{FOOTER: "\n\nstats", PARTIAL: True, TOGETHER: "old"})
    kept, done = resume(monkeypatch, [question, old, step("a", "half", **{PARTIAL: True, TOGETHER: "old"}),
                                      step("b", "whole\n\nstats", **{FOOTER: "\n\nstats", TOGETHER: "old"})])
    assert kept == [question, old] and done == [("update", "old"), ("delete", "a"), ("delete", "b")]
    assert [(v["text"], v["footer"]) for v in old["metadata"][VERSIONS]] == [
        ("old", "\n\nstats"), ("half", INTERRUPTED), ("whole", "\n\nstats")]
    assert old["output"] == "half" + INTERRUPTED and old["metadata"][SHOWN] == 1
    assert PARTIAL not in old["metadata"] and TOGETHER not in old["metadata"] and old["streaming"] is False


def test_a_resumed_new_question_keeps_the_first_and_a_regenerated_answer_with_nothing_new_is_as_it_was(monkeypatch):
    kept, done = resume(monkeypatch, [step("a", "half", **{PARTIAL: True, TOGETHER: "x"}),
                                      step("b", "more", **{PARTIAL: True, TOGETHER: "x"})])
    assert [s["id"] for s in kept] == ["a"] and done == [("update", "a"), ("delete", "b")]
    assert [v["text"] for v in kept[0]["metadata"][VERSIONS]] == ["half", "more"]
    kept, _ = resume(monkeypatch, [step("a", "half", **{PARTIAL: True, TOGETHER: "x"})])
    assert kept[0]["output"] == "half" + INTERRUPTED and VERSIONS not in kept[0]["metadata"]  # one needs no keys
    kept, done = resume(monkeypatch, [step("old", "old", **{FOOTER: "", PARTIAL: True, TOGETHER: "old"})])
    assert kept[0]["metadata"] == {KIND: KIND_ANSWER, FOOTER: ""} and kept[0]["output"] == "old"
    assert resume(monkeypatch, [step("c", "calm")]) == ([step("c", "calm")], [])  # nothing written at once


def test_temperature_zero_says_the_answers_will_be_the_same(page):
    write(["same", "same", "same"], temperature=0)
    assert page.said == [t("en-US", "answers_same", count=3)]
    assert "Temperature is 0" in page.said[0] and "温度为 0" in t("zh-CN", "answers_same", count=3)


def test_the_setting_or_the_command_says_how_many():
    assert answers_asked(1, None) == 1 and answers_asked(3, None) == 3 and answers_asked(4, "Pirate") == 4
    for command in ANSWERS_COMMANDS:  # each language's name of it
        assert answers_asked(1, command) == COMMAND_ANSWERS and answers_asked(2, command) == 2
    assert answers_command("zh-CN")["id"] == "多个回答" and answers_command("en-US")["id"] == "Several answers"


def asked_on_regenerate(monkeypatch, versions: int, asked: int):
    from app.ui import answer as answer_module

    said = []

    async def notice(text):
        said.append(text)

    monkeypatch.setattr(answer_module, "notice", notice)
    kept = [{"text": f"answer {n}", "footer": ""} for n in range(versions)]
    reply = Page(content="answer 0", metadata={KIND: KIND_ANSWER, FOOTER: "", VERSIONS: kept, SHOWN: 0})
    prompt = answer_module.Prompt([1], Sampling(0.8, 0.8, 64), asked)
    count = asyncio.run(answer_module._answers_to_write(Page(command=None), prompt, None, reply, "en-US"))
    return count, said


def test_regenerate_writes_as_many_as_the_answer_has_room_for_and_says_so(monkeypatch):
    assert asked_on_regenerate(monkeypatch, 2, 3) == (3, [])
    count, said = asked_on_regenerate(monkeypatch, MAX_VERSIONS - 2, 4)
    assert count == 2 and said == [t("en-US", "versions_room", limit=MAX_VERSIONS, room=2, asked=4)]
    assert "at most 10 versions" in said[0]
