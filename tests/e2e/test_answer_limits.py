"""Answers at their limits, in Chromium with real answers (SmolLM2-135M-Instruct, greedy; issue 35): an answer cut
off at max_tokens says so and continues in place, on the page and in a chat reopened from the history sidebar; cut
off inside a code block, its stats line stays out of the code; a reopened chat's last answer can be regenerated, and
no answer makes the page ask for an avatar the server refuses.

Checked on the engine's side too: vLLM's ``vllm:prompt_tokens_total`` counts what the continuation sent, which must
be the chat template's render of the question with the answer so far as the prompt's end (no new turn).
The file name sorts before the other e2e modules on purpose: this module's app stops before the package-wide
tiny-model app starts, so one engine runs at a time.
"""
import json
import re
import sqlite3
import time

import pytest

from app.i18n import t
from tests.support.app_process import running_app
from tests.support.metrics import prompt_tokens, running_requests
from tests.support.page import (
    STATS_EN,
    message_id,
    open_sidebar,
    send,
    set_max_answer_tokens,
    wait_chat_opened,
    wait_stats,
)

pytestmark = pytest.mark.timeout(600)
LIMIT = 64  # the answer budget (issue 35's Settings -> max answer tokens 64): every answer here reaches it
POEM = "Write a short poem about the sea."
LENGTH_LINE = t("en-US", "length_limit", tokens=LIMIT)
# The stats line as the page shows it, or as code (inside a code block its backticks show as they are).
STATS_AS_TEXT_OR_CODE = re.compile(r"prompt (\d+) tokens`? · `?answer (\d+) tokens")


@pytest.fixture(scope="module")
def limits_app(real_model_dir, tmp_path_factory):
    data = tmp_path_factory.mktemp("limits-data")
    # float32 and greedy: the same answers on every run (as tests/e2e/test_answers_real_model.py)
    with running_app(real_model_dir, tmp_path_factory.mktemp("limits-app"), "--temperature", "0", "--dtype",
                     "float32", "--max-model-len", "2048", "--max-tokens", str(LIMIT), "--data-dir", str(data)) as app:
        app.db = data / "chats.db"
        yield app


@pytest.fixture(scope="module")
def tokenizer(real_model_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(real_model_dir)


@pytest.fixture
def open_page(browser, limits_app):
    contexts = []

    def open_it(path="/"):
        context = browser.new_context(locale="en-US", viewport={"width": 1280, "height": 900})
        contexts.append(context)
        page = context.new_page()
        page.goto(limits_app.url + path)
        wait_chat_opened(page)
        return page

    yield open_it
    for context in contexts:
        context.close()


def answers(page):
    return page.locator('[data-step-type="assistant_message"]')


def stored_answer(app, question: str) -> tuple[str, str]:
    """The chat's id and its answer as the model wrote it (the saved text less its footer), from the database."""
    with sqlite3.connect(app.db) as db:
        thread_id, = db.execute("select thread_id from steps where type = 'user_message' and data like ?",
                                (f"%{question}%",)).fetchone()
        data, = db.execute("select data from steps where thread_id = ? and type = 'assistant_message'",
                           (thread_id,)).fetchone()
    step = json.loads(data)
    footer = step["metadata"].get("footer", "")
    return thread_id, step["output"][:len(step["output"]) - len(footer)]


def continuation_prompt(tokenizer, question: str, so_far: str) -> int:
    """Tokens of the prompt that continues ``so_far``: the question, then the answer so far as the prompt's end."""
    ids = tokenizer.apply_chat_template([{"role": "user", "content": question},
                                         {"role": "assistant", "content": so_far}],
                                        tokenize=True, continue_final_message=True)
    return len(ids["input_ids"] if hasattr(ids, "keys") else ids)


def wait_continued(page, first_prompt: int, timeout_ms: int = 120000) -> tuple[int, int]:
    """The one answer's new stats line (prompt and answer tokens) once the continuation has finished."""
    page.wait_for_function(
        """first => { const m = document.querySelectorAll('[data-step-type="assistant_message"]');
            if (m.length !== 1) return false;
            const found = /prompt (\\d+) tokens · answer (\\d+) tokens/.exec(m[0].innerText);
            return !!found && Number(found[1]) > first; }""", arg=first_prompt, timeout=timeout_ms)
    prompt, tokens, _, _ = STATS_EN.findall(answers(page).first.inner_text())[0]
    return int(prompt), int(tokens)


def wait_engine_prompts(app, before: float, expected: int, timeout: float = 10) -> float:
    """vLLM's count of prompt tokens since ``before``, once it has counted ``expected`` (or the time is up)."""
    deadline = time.monotonic() + timeout
    while prompt_tokens(app) - before < expected and time.monotonic() < deadline:
        time.sleep(0.05)
    return prompt_tokens(app) - before


def shown_text(page) -> str:
    """The answer as the page shows it, without its stats line and what follows."""
    return " ".join(STATS_EN.split(answers(page).first.inner_text())[0].split())


def continue_and_check(page, app, tokenizer, question: str) -> None:
    """Press Continue under the cut-off answer: the same message grows from a prompt that ends with the answer."""
    thread_id, so_far = stored_answer(app, question)
    first_prompt = int(STATS_EN.findall(answers(page).first.inner_text())[0][0])
    before_text, before = shown_text(page), prompt_tokens(app)
    page.get_by_role("button", name="Continue").click()
    prompt, tokens = wait_continued(page, first_prompt)
    expected = continuation_prompt(tokenizer, question, so_far)
    assert prompt == expected, (prompt, expected, so_far)  # no end of turn, no new assistant turn in it
    assert wait_engine_prompts(app, before, expected) == expected  # what the engine was sent
    assert answers(page).count() == 1 and shown_text(page).startswith(before_text[:60]), shown_text(page)
    _, continued = stored_answer(app, question)
    assert continued.startswith(so_far) and len(continued) > len(so_far)  # saved as one answer
    assert 0 < tokens <= LIMIT


def test_an_answer_cut_at_its_limit_says_so_and_continue_writes_on_in_the_same_answer(open_page, limits_app,
                                                                                       tokenizer):
    page = open_page()
    send(page, POEM)
    prompt, tokens, _, _ = wait_stats(page, 1, timeout=120)
    assert int(tokens) == LIMIT
    page.get_by_text(LENGTH_LINE).wait_for(timeout=10000)  # said under the answer
    assert page.get_by_role("button", name="Regenerate").count() == 1
    continue_and_check(page, limits_app, tokenizer, POEM)


def test_a_chat_reopened_from_the_sidebar_says_its_answer_was_cut_and_continues_it(open_page, limits_app,
                                                                                   tokenizer):
    question = "Write a short story about a lighthouse."
    page = open_page()
    send(page, question)
    wait_stats(page, 1, timeout=120)
    thread_id, _ = stored_answer(limits_app, question)
    page = open_page()  # a new tab: the chat is in the history sidebar
    open_sidebar(page)
    page.locator(f"#thread-{thread_id}").get_by_text(question).click()
    page.wait_for_function(f"() => location.pathname.endsWith('/thread/{thread_id}')", timeout=10000)
    page.get_by_text(LENGTH_LINE).wait_for(timeout=30000)
    page.get_by_role("button", name="Continue").wait_for(timeout=10000)
    assert re.search(rf"answer {LIMIT} tokens", answers(page).first.inner_text())
    continue_and_check(page, limits_app, tokenizer, question)


def test_an_answer_cut_off_inside_a_code_block_keeps_the_apps_lines_out_of_the_code(open_page, limits_app):
    """The stats line once rendered as highlighted Python: the code block the answer left open is closed first."""
    question = "Write a long Python program that manages a library of books, all in one code block."
    page = open_page()
    send(page, question)
    wait_stats(page, 1, pattern=STATS_AS_TEXT_OR_CODE, timeout=120)
    _, so_far = stored_answer(limits_app, question)
    assert so_far.count("```") % 2 == 1, f"the answer was not cut off inside its code block: {so_far!r}"
    answer = answers(page).first
    code = answer.locator("pre")
    assert code.count() == 1 and "books = [" in code.inner_text(), answer.inner_text()  # the program, as code
    assert not STATS_AS_TEXT_OR_CODE.search(code.inner_text()), code.inner_text()
    assert "length limit" not in code.inner_text()
    # The app's lines are its own: the stats figures are inline code spans outside the block, the length line too.
    first_figure = answer.locator("code", has_text=re.compile(r"^prompt \d+ tokens$"))
    assert first_figure.count() == 1 and first_figure.evaluate("e => !e.closest('pre')")
    assert answer.get_by_text(LENGTH_LINE).evaluate("e => !e.closest('pre')")


def refused_requests(page, into: list) -> None:
    """Record every response of ``page`` with an error status (the browser logs each one in its console)."""
    page.on("response", lambda r: into.append(f"{r.status} {r.url}") if r.status >= 400 else None)


def test_a_reopened_chats_last_answer_can_be_regenerated(open_page, limits_app):
    """Regenerate was only on the answers of the tab that wrote them; a chat opened from the sidebar had none."""
    question = "What is the capital of France?"
    page = open_page()
    send(page, question)
    prompt, tokens, _, _ = wait_stats(page, 1, timeout=120)
    assert int(tokens) < LIMIT  # it ended by itself: Regenerate, and no Continue
    thread_id, _ = stored_answer(limits_app, question)
    page = open_page()
    open_sidebar(page)
    page.locator(f"#thread-{thread_id}").get_by_text(question).click()
    page.wait_for_function(f"() => location.pathname.endsWith('/thread/{thread_id}')", timeout=10000)
    regenerate = page.get_by_role("button", name="Regenerate")
    regenerate.wait_for(timeout=30000)
    assert page.get_by_role("button", name="Continue").count() == 0
    old_answer = message_id(answers(page).first)
    before = prompt_tokens(limits_app)
    regenerate.click()
    # Written anew into the same message, the old answer kept as its first version (issue #32 item 1).
    page.get_by_role("button", name="Version 2/2", exact=True).wait_for(timeout=120000)
    assert message_id(answers(page).first) == old_answer
    again, _, _, _ = wait_stats(page, 1, timeout=120)
    # The same question answered again from the reopened chat: the same prompt, as the engine counted it.
    assert again == prompt and wait_engine_prompts(limits_app, before, int(prompt)) == int(prompt)
    assert answers(page).count() == 1


def test_no_answer_asks_for_an_avatar_the_server_refuses(open_page, limits_app):
    """Each message's avatar came from /avatars/<author>; a message with Chainlit's default author (its "Task
    manually stopped." on Stop, which the app then replaces) asked /avatars/<page title>, refused with a 400
    ('·' in "smollm2-135m-instruct · ernie-chat"). Every avatar is now the app's icon."""
    refused: list[str] = []
    page = open_page()
    refused_requests(page, refused)
    send(page, "What is the capital of France?")
    wait_stats(page, 1, timeout=120)
    set_max_answer_tokens(page, "End")  # long enough to be stopped while it is written
    send(page, "Write a very long story about the sea.")
    deadline = time.monotonic() + 60
    while running_requests(limits_app) < 1:
        assert time.monotonic() < deadline, "the engine never started the long answer"
        time.sleep(0.05)
    page.locator("#stop-button").click()
    page.get_by_text(t("en-US", "stopped")).wait_for(timeout=30000)
    # Every avatar drawn so far is the app's icon, loaded.
    avatars = page.locator('[data-step-type="assistant_message"] img, .ai-message img')
    assert avatars.count() >= 2
    for n in range(avatars.count()):
        avatars.nth(n).evaluate("img => img.complete || new Promise(done => { img.onload = img.onerror = done; })")
        assert avatars.nth(n).evaluate("img => img.naturalWidth") > 0
    assert refused == []
