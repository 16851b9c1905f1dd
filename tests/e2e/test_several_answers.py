"""Several answers at once (issue #32 items 4 and 6), in a real browser with the real small model (SmolLM2): three
answers to one question stream side by side, the engine runs them together (its running requests, its prompt
counter: three prompts read), and they fold into one answer with three versions, each with its own stats line;
the arrows flip, a restart keeps them, the place is in the page's language, and Regenerate past the versions' cap
writes what fits with one line saying so, then refuses with the cap's line, nothing lost."""
from __future__ import annotations

import time

import pytest

from app.history.messages import MAX_VERSIONS
from app.i18n import t
from tests.e2e.test_answer_versions import arrow, place
from tests.support.app_process import LaunchedApp, running_app
from tests.support.metrics import prompt_tokens, wait_until_running
from tests.support.page import send, set_max_answer_tokens
from tests.support.real_answers import (
    ANSWERS,
    ENDED_ANSWER_JS,
    answer_prompt_tokens,
    chat_id,
    kept_chats_args,
    open_chat,
)

pytestmark = pytest.mark.timeout(900)
QUESTION = "Name a colour of the sea."
# Sampled (not greedy): the versions differ. A small context and answer keep three answers at once short on a CPU.
APP_ARGS = ("--temperature", "0.9", "--dtype", "float32", "--max-model-len", "256", "--max-tokens", "48")
STATS = "prompt \\d+ tokens"


def set_answers_at_once(page, presses: list[str]) -> None:
    """The settings panel's "Answers at once" slider (the third: temperature, top_p, answers, answer length)."""
    page.click("#chat-settings-open-modal")
    slider = page.get_by_role("slider").nth(2)
    slider.wait_for(timeout=10000)
    slider.focus()
    for key in presses:
        page.keyboard.press(key)
    page.click("#confirm")


def answers_with_stats(page) -> int:
    return page.evaluate(f"() => [...document.querySelectorAll('{ANSWERS}')]"
                         f".filter(m => /{STATS}/.test(m.innerText)).length")


def test_three_answers_at_once_become_three_versions_with_stats_and_are_kept(browser, real_model_dir, tmp_path):
    args = kept_chats_args(tmp_path, APP_ARGS)
    first = LaunchedApp(real_model_dir, tmp_path / "first", *args)
    try:
        first.wait_http()
        first.wait_ready()
        page = open_chat(browser, first)
        set_answers_at_once(page, ["Home", "ArrowRight", "ArrowRight"])  # 1 -> 3
        before = prompt_tokens(first)
        send(page, QUESTION)
        # All three stream at once, each in a message of its own, and the engine runs them together.
        page.wait_for_function(f"() => document.querySelectorAll('{ANSWERS}').length === 3", timeout=240000)
        wait_until_running(first, 3, timeout_s=240)
        folded = (f"() => document.querySelectorAll('{ANSWERS}').length === 1 && "
                  f"/{STATS}/.test(document.querySelector('{ANSWERS}').innerText)")
        page.wait_for_function(folded, timeout=300000)
        place(page, 1, 3)
        assert page.locator(ANSWERS).count() == 1 and arrow(page, "◀").count() == 0
        prompt = answer_prompt_tokens(page, 0)
        deadline = time.monotonic() + 30  # vLLM counts a request when it ends, a moment after the page shows it
        while prompt_tokens(first) - before < 3 * prompt and time.monotonic() < deadline:
            time.sleep(0.1)
        assert prompt_tokens(first) - before == 3 * prompt  # three prompts read: three answers, not one
        versions = [page.wait_for_function(ENDED_ANSWER_JS, arg=0, timeout=30000).json_value()]
        for shown in (2, 3):  # each version shows its own stats line
            arrow(page, "▶").click()
            place(page, shown, 3)
            assert answers_with_stats(page) == 1
            versions.append(page.wait_for_function(ENDED_ANSWER_JS, arg=0, timeout=30000).json_value())
        assert all(versions) and len(set(versions)) > 1  # sampled: not one answer three times
        arrow(page, "◀").click()
        place(page, 2, 3)
        thread = chat_id(page)
        page.close()
        page.context.close()
    finally:
        first.stop()
        first.kill()

    with running_app(real_model_dir, tmp_path / "second", *args) as app:
        page = open_chat(browser, app, f"/thread/{thread}", locale="zh-CN")
        place(page, 2, 3, locale="zh-CN")  # "版本 2/3": the version left shown, its arrows, in the page's language
        assert page.locator(ANSWERS).count() == 1 and arrow(page, "◀").count() == 1 and arrow(page, "▶").count() == 1
        page.context.close()

        # The versions' cap: four more at once (3 + 4 = 7), then only the three that fit, with the line, then none.
        page = open_chat(browser, app, f"/thread/{thread}")
        place(page, 2, 3)
        set_max_answer_tokens(page, "Home")
        set_answers_at_once(page, ["End"])  # 4
        page.get_by_role("button", name="Regenerate").click()
        place(page, 4, 7)  # the first new one shown, after the three kept
        page.get_by_role("button", name="Regenerate").click()
        line = t("en-US", "versions_room", limit=MAX_VERSIONS, room=3, asked=4)
        page.get_by_text(line).wait_for(timeout=240000)
        place(page, 8, MAX_VERSIONS)
        page.get_by_role("button", name="Regenerate").click()
        page.get_by_text(t("en-US", "versions_full", limit=MAX_VERSIONS)).wait_for(timeout=60000)
        assert answers_with_stats(page) == 1 and place(page, 8, MAX_VERSIONS).count() == 1  # one answer, all kept
        page.context.close()
