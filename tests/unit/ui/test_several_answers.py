"""Several answers at once (app/ui/several_answers.py, app/ui/answers_command.py, app/ui/answer.py): how many are
written, and how the answers written side by side fold into the versions of one answer, however they end."""
from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from app.engine.protocol import Sampling
from app.history.messages import FOOTER, KIND, KIND_ANSWER, MAX_VERSIONS, SHOWN, VERSIONS
from app.i18n import t
from app.ui import several_answers
from app.ui.answers_command import ANSWERS_COMMANDS, COMMAND_ANSWERS, answers_asked, answers_command
from app.ui.streamed_answer import STOPPED


class Page(SimpleNamespace):
    """A message on the page, recording what happened to it."""

    async def remove(self) -> None:
        self.removed = True

    async def update(self) -> None:
        self.updated = True


class FakeAnswer:
    """One of the answers written at once: writes what the test says, or fails, or waits to be stopped."""

    script: list = []
    made: list = []

    def __init__(self, rt, language, token_ids, sampling, offers_actions=True):
        assert offers_actions is False  # the kept answer gets the buttons, not each of them
        self.sampling, self.outcome, self.parts = sampling, "done", []
        self.reply = Page(content="", metadata={KIND: KIND_ANSWER}, removed=False, updated=False)
        self.plan = FakeAnswer.script[len(FakeAnswer.made)]
        FakeAnswer.made.append(self)

    async def write(self):
        if self.plan == "stop":
            self.parts = ["so far"]
            try:
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


def write(script, temperature=0.8, regenerating=None, seed=None, stop_after=None):
    FakeAnswer.script, FakeAnswer.made = script, []
    sampling = Sampling(temperature=temperature, top_p=0.8, max_tokens=64, seed=seed)
    answers = several_answers.SeveralAnswers(None, "en-US", [1, 2, 3], sampling, len(script), regenerating)

    async def run():
        task = asyncio.ensure_future(answers.write())
        if stop_after is not None:
            await asyncio.sleep(stop_after)
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
    reply = Page(content="old 1", metadata={KIND: KIND_ANSWER, FOOTER: "", VERSIONS: earlier, SHOWN: 1},
                 removed=False, updated=False)
    made = write(["new a", "new b"], regenerating=reply)
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
        write(["stop", "stop"], stop_after=0.05)
    kept = FakeAnswer.made[0].reply
    assert [v["footer"] for v in kept.metadata[VERSIONS]] == ["\n\n`stopped`"] * 2
    assert page.said == ["marked stopped"]  # each version says it; run_tracked adds no other line


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
