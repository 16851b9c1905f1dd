"""A long document on the CPU (issue 35 items 11 and 2), with the real small model (SmolLM2-135M: a ~7k-token prompt
takes it seconds to read here, the tiny model reads it at once). The engine reads the prompt before its first token
(prefill); on f9ee3fd the page showed nothing meanwhile, and Stop then left no trace at all. Checked on the engine's
side with vLLM's own counters: the stopped request never made a token, and never finished."""
from __future__ import annotations

import re
import sqlite3
import time

import pytest

from tests.support.app_process import get, running_app
from tests.support.metrics import metric_value
from tests.support.page import attach, wait_chat_opened, wait_stats

pytestmark = pytest.mark.timeout(600)
WORDS = ("harbour", "lantern", "copper", "meadow", "signal", "granite", "orchard", "ferry", "beacon", "willow",
         "quarry", "thistle", "compass", "saddle", "juniper", "anchor", "pepper", "candle", "marble", "falcon")


def long_document(path, sentences: int = 266, first: int = 0):
    """About 7,000 tokens of plain English (SmolLM2's tokenizer), each sentence different; another ``first`` makes
    another document (the engine's prefix cache would read a document it has read before at once)."""
    lines = [f"Note {n}: the {WORDS[n % 20]} near the {WORDS[(n * 7) % 20]} was checked by crew {n % 13} at "
             f"{n % 24:02d}:{(n * 11) % 60:02d}." for n in range(first, first + sentences)]
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="module")
def reading_app(real_model_dir, tmp_path_factory):
    data = tmp_path_factory.mktemp("long-reads")
    with running_app(real_model_dir, tmp_path_factory.mktemp("run"), "--data-dir", str(data), "--dtype", "float32",
                     "--max-model-len", "8192", "--max-tokens", "16") as app:
        yield app, data / "chats.db"


@pytest.fixture
def open_page(browser, reading_app):
    contexts = []

    def open_it(locale="en-US"):
        context = browser.new_context(locale=locale, viewport={"width": 1280, "height": 900})
        contexts.append(context)
        page = context.new_page()
        page.goto(reading_app[0].url + "/")
        wait_chat_opened(page, locale)
        return page

    yield open_it
    for context in contexts:
        context.close()


def wait_stored(db, text: str, timeout: float = 30) -> bool:
    """Whether an answer or notice holding ``text`` reaches the chat database within ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with sqlite3.connect(db) as conn:
            if any(text in data for (data,) in conn.execute("select data from steps where type = 'assistant_message'")):
                return True
        time.sleep(0.2)
    return False


def metric(app, name: str) -> float:
    return metric_value(get(app.url + "/metrics")[1], name)


def test_stop_while_a_document_is_read_leaves_the_stopped_line(open_page, reading_app, tmp_path):
    """Item 11: Stop after sending a question with a long document, before the answer's first token."""
    app, db = reading_app
    page = open_page()
    attach(page, long_document(tmp_path / "logbook.txt"))
    generated, finished = metric(app, "vllm:generation_tokens_total"), metric(app, "vllm:request_success_total")
    page.fill("#chat-input", "Which crew checked the copper near the willow?")
    page.click("#chat-submit")
    # The app has handed the prompt to the engine (its own gauge), which is reading it: Stop now.
    page.wait_for_function(f"""async () => (await (await fetch('{app.url}/metrics')).text())
        .split('\\n').some(l => l.startsWith('ernie_chat_active_requests ') && Number(l.split(' ')[1]) >= 1)""",
                           timeout=60000)
    page.locator("#stop-button").click()
    page.locator('[data-step-type="assistant_message"]', has_text="stopped by you").wait_for(timeout=30000)
    page.wait_for_function(f"""async () => (await (await fetch('{app.url}/metrics')).text()).split('\\n')
        .some(l => l.startsWith('vllm:num_requests_running') && Number(l.split(' ').pop()) === 0)""", timeout=30000)
    # The engine was stopped while it read: it made no token and finished no request.
    assert metric(app, "vllm:generation_tokens_total") == generated
    assert metric(app, "vllm:request_success_total") == finished
    assert "Task manually stopped." not in page.inner_text("body")
    # The line is in the chat's history too (a reopened chat shows it): the app's history writer lands it.
    assert wait_stored(db, "stopped by you")


READING = re.compile(r"Reading your message: ([\d,]+) tokens · (\d+) s · about (\d+) s left \(the engine reads "
                     r"~([\d,]+) tokens/s\)")


def reading_line(page, timeout_ms: int = 60000) -> re.Match:
    """The answer's reading line, once the page shows it."""
    page.wait_for_function("() => document.body.innerText.includes('Reading your message: ')", timeout=timeout_ms)
    found = READING.search(page.inner_text("body"))
    assert found, page.inner_text("body")[-1000:]
    return found


def test_a_long_document_shows_that_it_is_read_until_the_first_token(open_page, reading_app, tmp_path):
    """Item 2: while the engine reads the prompt the answer says so, with the tokens and the time left at the
    engine's measured rate; the answer's first words take its place."""
    app, _ = reading_app
    page = open_page()
    attach(page, long_document(tmp_path / "logbook.txt", first=1000))
    prompts, generated = metric(app, "vllm:prompt_tokens_total"), metric(app, "vllm:generation_tokens_total")
    page.fill("#chat-input", "Which crew checked the copper near the willow?")
    page.click("#chat-submit")
    found = reading_line(page)
    assert metric(app, "vllm:generation_tokens_total") == generated  # shown while no token has come
    tokens, rate = int(found[1].replace(",", "")), int(found[4].replace(",", ""))
    assert int(found[3]) >= 1 and rate > 0
    prompt, *_ = wait_stats(page, 1, timeout=300)
    # The line counted the prompt the engine read, and is gone: the answer took its place.
    assert tokens == int(prompt) == metric(app, "vllm:prompt_tokens_total") - prompts
    assert "Reading your message" not in page.inner_text("body")


def test_stop_during_the_reading_line_leaves_the_stopped_line_in_its_place(open_page, reading_app, tmp_path):
    app, db = reading_app
    page = open_page("zh-CN")
    attach(page, long_document(tmp_path / "logbook.txt", first=2000))
    generated, finished = metric(app, "vllm:generation_tokens_total"), metric(app, "vllm:request_success_total")
    page.fill("#chat-input", "Which crew checked the copper near the willow?")
    page.click("#chat-submit")
    page.wait_for_function("() => document.body.innerText.includes('正在读取你的消息：')", timeout=60000)
    page.locator("#stop-button").click()
    page.locator('[data-step-type="assistant_message"]', has_text="已由你停止").wait_for(timeout=30000)
    page.wait_for_function("() => !document.body.innerText.includes('正在读取你的消息：')", timeout=30000)
    assert metric(app, "vllm:generation_tokens_total") == generated
    assert metric(app, "vllm:request_success_total") == finished
    assert wait_stored(db, "已由你停止")
