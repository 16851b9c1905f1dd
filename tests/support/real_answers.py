"""A chat with the real small model (SmolLM2, greedy) in the browser: the app's arguments, an answer's text once it
has ended, its prompt on the page and on the engine's counter, the chat's id. The versions and branches browser
tests read their chats through these."""
from __future__ import annotations

import re
import time

from tests.support.metrics import prompt_tokens
from tests.support.page import wait_chat_opened

# float32 and greedy as in test_answers_real_model.py; a small context keeps the longest answer (its half) short.
APP_ARGS = ("--temperature", "0", "--dtype", "float32", "--max-model-len", "256", "--max-tokens", "128")
ANSWERS = '[data-step-type="assistant_message"]'
# The n-th answer's text without its stats line, once that line is shown (the answer has ended); else null.
ENDED_ANSWER_JS = r"""n => { const m = document.querySelectorAll('[data-step-type="assistant_message"]')[n];
  if (!m) return null; const s = m.innerText.search(/prompt \d+ tokens|提示 \d+ 个 token/);
  return s < 0 ? null : m.innerText.slice(0, s).replace(/[\s`]+$/, ''); }"""
STATS_PROMPT = re.compile(r"prompt (\d+) tokens")


def kept_chats_args(tmp_path, app_args: tuple[str, ...] = APP_ARGS) -> tuple[str, ...]:
    """For a test that starts the app, stops it and starts it again on the same chats: the folders of both runs
    (``tmp_path``/first and /second) and of the chats (/data), and ``app_args`` with the one that keeps them there."""
    for folder in ("data", "first", "second"):
        (tmp_path / folder).mkdir()
    return ("--data-dir", str(tmp_path / "data"), *app_args)


def open_chat(browser, app, path="/", locale="en-US"):
    context = browser.new_context(locale=locale, viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.goto(app.url + path)
    page.wait_for_selector("#chat-input", timeout=30000)
    if path == "/":
        wait_chat_opened(page, locale)
    return page


def ended_answer(page, n: int = 0, timeout_ms: int = 240000) -> str:
    return page.wait_for_function(ENDED_ANSWER_JS, arg=n, timeout=timeout_ms).json_value()


def answer_prompt_tokens(page, n: int) -> int:
    return int(STATS_PROMPT.findall(page.locator(ANSWERS).nth(n).inner_text())[0])


def engine_counted(app, before: float, expected: int) -> float:
    """The engine's prompt tokens since ``before``, read until they reach ``expected`` (vLLM counts a request when
    it ends, a moment after the page shows the stats line)."""
    deadline = time.monotonic() + 30
    while prompt_tokens(app) - before < expected and time.monotonic() < deadline:
        time.sleep(0.1)
    return prompt_tokens(app) - before


def chat_id(page) -> str:
    page.wait_for_function("() => /\\/thread\\/[0-9a-f-]{36}$/.test(location.pathname)", timeout=30000)
    return page.evaluate("location.pathname").rsplit("/", 1)[-1]
