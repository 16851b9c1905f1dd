"""Editing a question makes a branch, and a chat forks from any answer (issue #32 items 2 and 3), in a real browser
with the real small model (SmolLM2, greedy, as tests/e2e/test_answer_versions.py runs it): the edit keeps the old
question and its turns as a branch, "◀ Branch 2/2 ▶" on the question switches between them with each continuation
intact, the branch shown is what the next question builds on (the engine's own prompt counter), a fork from an
answer is a new chat in the sidebar with the turns up to it, its document and its settings, and a restart shows
the branch last shown with its arrows, in English and Chinese.

The file name sorts before test_answers_real_model.py and test_chat_ui.py: its apps stop before theirs start, so
one engine runs at a time."""
from __future__ import annotations

import json
import sqlite3

import pytest

from app.i18n import t
from tests.support.app_process import LaunchedApp, running_app
from tests.support.metrics import prompt_tokens
from tests.support.page import attach, open_sidebar, send, set_max_answer_tokens
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

pytestmark = pytest.mark.timeout(900)
QUESTION = "Tell me about the river Seine in Paris."
EDITED = "Tell me about the river Thames in London."
FOLLOW_UP = "What is its length?"
QUESTIONS = '[data-step-type="user_message"]'
DOCUMENT = "The river Seine flows through Paris and is 777 kilometres long.\n"


def answers_shown(page) -> list[str]:
    """Every answer's text without its stats line, once each has ended."""
    count = page.locator(ANSWERS).count()
    return [ended_answer(page, n) for n in range(count)]


def branch_place(page, shown: int, count: int, locale: str = "en-US"):
    """The question's place among its branches ("Branch 2/2"), once the page shows it."""
    place = page.locator(".branch-place", has_text=t(locale, "branch_place", shown=shown, count=count))
    place.wait_for(timeout=240000)
    return place


def branch_arrow(page, name: str, locale: str = "en-US"):
    return page.get_by_role("button", name=t(locale, name), exact=True)


def picture(page, path) -> None:
    """The README's picture: the chat scrolled so that the first question's arrows are at its top."""
    page.locator(".branch-place").first.evaluate("e => e.scrollIntoView({block: 'start'})")
    page.screenshot(path=str(path))


def wait_answers(page, texts: list[str]) -> None:
    """Until the page shows exactly these answers (each ended, in order)."""
    page.wait_for_function(
        f"""want => {{ const n = document.querySelectorAll('{ANSWERS}').length; if (n !== want.length) return false;
             for (let i = 0; i < n; i++) if (({ENDED_ANSWER_JS})(i) !== want[i]) return false; return true; }}""",
        arg=texts, timeout=60000)


def switch_shown(page, texts: list[str]) -> None:
    """Until a switch is done: these answers shown and the newest one's buttons back (they come last), so the
    next click starts no switch while this one still shows its branch."""
    wait_answers(page, texts)
    page.locator(ANSWERS).last.get_by_role("button", name=t("en-US", "regenerate")).wait_for(timeout=60000)


def edit_question(page, index: int, text: str) -> None:
    # The pencil shows while the bubble's row is hovered (the attached file is drawn above that row).
    row = page.locator(QUESTIONS).nth(index).locator("div.group").first
    row.hover()
    row.locator(".edit-message").click()
    page.fill("#edit-chat-input", text)
    page.click(".confirm-edit")


def ask_with_document(page, document, question: str) -> str:
    attach(page, document)
    send(page, question)
    return ended_answer(page, 0)


def stored_chat(db, thread: str) -> tuple[str, dict, list[dict]]:
    """A chat's name, metadata and messages, as the database holds them."""
    with sqlite3.connect(db) as conn:
        name, metadata = conn.execute("SELECT name, metadata FROM threads WHERE id = ?", (thread,)).fetchone()
        rows = conn.execute("SELECT data FROM steps WHERE thread_id = ? ORDER BY created_at, position",
                            (thread,)).fetchall()
    return name, json.loads(metadata), [json.loads(row[0]) for row in rows]


def test_an_edit_makes_a_branch_switches_back_forks_and_is_kept(browser, real_model_dir, tmp_path, shots_dir):
    data = tmp_path / "data"
    args = kept_chats_args(tmp_path)
    document = tmp_path / "seine.txt"
    document.write_text(DOCUMENT)
    first = LaunchedApp(real_model_dir, tmp_path / "first", *args)
    try:
        first.wait_http()
        first.wait_ready()
        # The chat the edit must come to: the edited question asked first, with the same document and settings.
        page = open_chat(browser, first)
        set_max_answer_tokens(page, "Home")
        reference_answer = ask_with_document(page, document, EDITED)
        send(page, FOLLOW_UP)
        ended_answer(page, 1)
        reference_prompt = answer_prompt_tokens(page, 1)
        page.context.close()

        page = open_chat(browser, first)
        set_max_answer_tokens(page, "Home")
        answer_1 = ask_with_document(page, document, QUESTION)
        thread = chat_id(page)
        send(page, FOLLOW_UP)
        answer_2 = ended_answer(page, 1)
        assert page.locator(".branch-place").count() == 0  # never edited: no arrows

        edit_question(page, 0, EDITED)
        branch_place(page, 2, 2)
        wait_answers(page, [reference_answer])  # the later turn went with the old branch, off the page
        assert branch_arrow(page, "branch_previous").count() == 1 and branch_arrow(page, "branch_next").count() == 0
        before = prompt_tokens(first)
        send(page, FOLLOW_UP)
        edited_follow_up = ended_answer(page, 1)
        # Built on the branch shown: the prompt is the reference chat's, on the page and on the engine's counter.
        assert answer_prompt_tokens(page, 1) == reference_prompt
        assert engine_counted(first, before, reference_prompt) == reference_prompt
        picture(page, shots_dir / "real-branches.png")

        branch_arrow(page, "branch_previous").click()
        branch_place(page, 1, 2)
        switch_shown(page, [answer_1, answer_2])  # the old continuation, intact
        assert page.locator(QUESTIONS).nth(0).inner_text().count(QUESTION) == 1
        assert page.locator(QUESTIONS).nth(1).inner_text().strip() == FOLLOW_UP
        branch_arrow(page, "branch_next").click()
        branch_place(page, 2, 2)
        switch_shown(page, [reference_answer, edited_follow_up])  # and the new one, intact too
        branch_arrow(page, "branch_previous").click()
        branch_place(page, 1, 2)
        switch_shown(page, [answer_1, answer_2])

        # Fork from the first answer: a new chat with the first turn only, its document and its settings.
        page.locator(ANSWERS).nth(0).locator('button[id^="fork-"]').click()
        page.wait_for_function(f"() => /\\/thread\\/[0-9a-f-]{{36}}$/.test(location.pathname) "
                               f"&& !location.pathname.endsWith('{thread}')", timeout=30000)
        fork = chat_id(page)
        wait_answers(page, [answer_1])
        assert page.locator(QUESTIONS).count() == 1 and QUESTION in page.locator(QUESTIONS).nth(0).inner_text()
        open_sidebar(page)
        page.locator(f"#thread-{fork}", has_text=t("en-US", "fork_name", name=QUESTION)).wait_for(timeout=30000)
        name, metadata, steps = stored_chat(data / "chats.db", fork)
        assert name == t("en-US", "fork_name", name=QUESTION)
        assert metadata["chat_settings"]["max_tokens"] == 16
        messages = [s for s in steps if s["type"] in ("user_message", "assistant_message") and s["name"] != "system"]
        assert [m["type"] for m in messages] == ["user_message", "assistant_message"]
        assert messages[0]["metadata"]["documents"][0]["text"].strip() == DOCUMENT.strip()
        assert {m["threadId"] for m in steps} == {fork}
        # The chat it came from keeps both branches.
        _, _, origin = stored_chat(data / "chats.db", thread)
        asked = [s for s in origin if s["type"] == "user_message"]
        assert [q["output"] for q in asked] == [QUESTION, FOLLOW_UP]
        assert [b["text"] for b in asked[0]["metadata"]["branches"]] == [QUESTION, EDITED], asked[0]
        page.context.close()
    finally:
        first.stop()
        first.kill()

    with running_app(real_model_dir, tmp_path / "second", *args) as app:
        page = open_chat(browser, app, f"/thread/{thread}")
        branch_place(page, 1, 2)  # the branch last shown, and its arrows
        wait_answers(page, [answer_1, answer_2])
        branch_arrow(page, "branch_next").click()  # a resumed chat switches too, and the switch is kept
        branch_place(page, 2, 2)
        wait_answers(page, [reference_answer, edited_follow_up])
        page.context.close()

        page = open_chat(browser, app, f"/thread/{thread}", locale="zh-CN")
        branch_place(page, 2, 2, locale="zh-CN")  # "分支 2/2"
        assert branch_arrow(page, "branch_previous", locale="zh-CN").count() == 1
        wait_answers(page, [reference_answer, edited_follow_up])
        picture(page, shots_dir / "real-branches-zh.png")
        page.context.close()
