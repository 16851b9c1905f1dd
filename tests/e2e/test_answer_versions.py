"""Regenerate keeps versions (issue #32 item 1), in a real browser with the real small model (SmolLM2, greedy, as
tests/e2e/test_answers_real_model.py runs it): the old answer stays as a version of the same message, the arrows
flip between them, the shown version is what the next question builds on (the engine's own prompt counter), and a
restart shows the chat with that version and its arrows; search finds a word that only a hidden version holds.

Greedy answers are the same every time, so the versions differ by length: the first is written with the shortest
answer limit (16 tokens, Settings), the others with the app's whole limit. The file name sorts before
test_answers_real_model.py and test_chat_ui.py: its apps stop before theirs start, so one engine runs at a time."""
from __future__ import annotations

import re

import pytest

from app.i18n import t
from tests.support.app_process import LaunchedApp, running_app
from tests.support.metrics import prompt_tokens
from tests.support.page import open_sidebar, send, set_max_answer_tokens
from tests.support.real_answers import (
    ANSWERS,
    ENDED_ANSWER_JS,
    answer_prompt_tokens,
    chat_id,
    ended_answer,
    engine_counted,
    kept_chats_args,
    open_chat,
)

pytestmark = pytest.mark.timeout(600)
QUESTION = "Tell me about the river Seine in Paris."
FOLLOW_UP = "What is its length?"
def place_button(page, shown: int, count: int, locale: str = "en-US"):
    """The place between the arrows, "Version 2/3"."""
    return page.get_by_role("button", name=t(locale, "version_place", shown=shown, count=count), exact=True)


def place(page, shown: int, count: int, locale: str = "en-US"):
    """The place between the arrows, once the page shows it."""
    button = place_button(page, shown, count, locale)
    button.wait_for(timeout=240000)
    return button


def arrow(page, label: str):
    return page.get_by_role("button", name=label, exact=True)


def hidden_word(hidden: str, *shown: str) -> str:
    """A word (5+ letters) of ``hidden`` that none of ``shown`` holds."""
    seen = " ".join(shown).lower()
    words = [w for w in re.findall(r"[A-Za-z]{5,}", hidden) if w.lower() not in seen]
    assert words, f"every word of the longer version is in the chat's other texts: {hidden!r}"
    return words[0]


def test_regenerate_keeps_versions_flips_builds_on_the_shown_one_and_keeps_them(browser, real_model_dir, tmp_path,
                                                                               shots_dir):
    args = kept_chats_args(tmp_path)
    first = LaunchedApp(real_model_dir, tmp_path / "first", *args)
    try:
        first.wait_http()
        first.wait_ready()
        # The chat whose answer was the first version all along: what the follow-up's prompt must come to.
        page = open_chat(browser, first)
        set_max_answer_tokens(page, "Home")
        send(page, QUESTION)
        reference_answer = ended_answer(page, 0)
        send(page, FOLLOW_UP)
        ended_answer(page, 1)
        reference_prompt = answer_prompt_tokens(page, 1)
        page.context.close()

        page = open_chat(browser, first)
        set_max_answer_tokens(page, "Home")
        send(page, QUESTION)
        version_1 = ended_answer(page, 0)
        assert version_1 == reference_answer  # greedy: the same first version
        thread = chat_id(page)
        set_max_answer_tokens(page, "End")
        page.get_by_role("button", name="Regenerate").click()
        place(page, 2, 2)
        page.get_by_role("button", name="Regenerate").click()
        place(page, 3, 3)
        version_3 = ended_answer(page, 0)
        assert page.locator(ANSWERS).count() == 1  # one answer, three versions of it
        assert arrow(page, "◀").count() == 1 and arrow(page, "▶").count() == 0
        assert version_3 != version_1 and version_3.startswith(version_1.rstrip(".")[:20])

        arrow(page, "◀").click()
        place(page, 2, 3)
        page.screenshot(path=str(shots_dir / "real-versions.png"))  # the README's picture of the arrows
        arrow(page, "◀").click()
        place(page, 1, 3)
        page.wait_for_function(f"() => ({ENDED_ANSWER_JS})(0) === {version_1!r}", timeout=30000)
        assert arrow(page, "◀").count() == 0 and arrow(page, "▶").count() == 1

        before = prompt_tokens(first)
        send(page, FOLLOW_UP)
        follow_up = ended_answer(page, 1)
        # The follow-up was built on the version shown: its prompt is the reference chat's, on both sides.
        assert answer_prompt_tokens(page, 1) == reference_prompt
        assert engine_counted(first, before, reference_prompt) == reference_prompt
        place_button(page, 1, 3).wait_for(state="detached", timeout=30000)  # only the newest answer flips
        assert arrow(page, "▶").count() == 0
        # The follow-up gets a shorter second version, and its first is shown again: the chat as it is kept.
        set_max_answer_tokens(page, "Home")
        before = prompt_tokens(first)
        page.get_by_role("button", name="Regenerate").click()
        place(page, 2, 2)
        assert engine_counted(first, before, reference_prompt) == reference_prompt  # still built on version 1
        follow_up_2 = ended_answer(page, 1)
        arrow(page, "◀").click()
        place(page, 1, 2)
        page.close()  # the flip is saved before the page goes: its place shown is the saved one
        page.context.close()
    finally:
        first.stop()
        first.kill()

    with running_app(real_model_dir, tmp_path / "second", *args) as app:
        page = open_chat(browser, app, f"/thread/{thread}")
        place(page, 1, 2)  # the newest answer: its version shown and its arrows, as the chat was left
        page.wait_for_function(f"() => ({ENDED_ANSWER_JS})(1) === {follow_up!r}", timeout=30000)
        assert ended_answer(page, 0) == version_1  # the older answer: the version the follow-up was built on
        assert page.locator(ANSWERS).count() == 2 and arrow(page, "◀").count() == 0
        arrow(page, "▶").click()  # a resumed chat flips too, and the flip is kept
        place(page, 2, 2)
        page.wait_for_function(f"() => ({ENDED_ANSWER_JS})(1) === {follow_up_2!r}", timeout=30000)

        word = hidden_word(version_3, version_1, QUESTION, FOLLOW_UP, follow_up, follow_up_2)
        open_sidebar(page)
        page.locator("#search-chats-button").first.click()
        page.get_by_role("option").first.wait_for(timeout=30000)
        page.get_by_placeholder("Search conversations").fill(word)
        listed = "() => [...document.querySelectorAll('[role=option]')].map(e => (e.dataset.value || '').slice(-36))"
        page.wait_for_function(f"want => JSON.stringify(({listed})()) === JSON.stringify(want)", arg=[thread],
                               timeout=30000)
        page.context.close()

        page = open_chat(browser, app, f"/thread/{thread}", locale="zh-CN")
        place(page, 2, 2, locale="zh-CN")  # "版本 2/2": the place in the page's language, the flip kept
        assert arrow(page, "◀").count() == 1
        page.context.close()
