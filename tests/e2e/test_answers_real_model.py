"""Real answers in a real browser: SmolLM2-135M-Instruct (tests/real_model.py) behind `python launch.py`.

Greedy decoding (--temperature 0), so every answer is the same on every run. These tests also take the
README's pictures (ERNIE_CHAT_SCREENSHOTS=docs/screenshots): a real question and answer with a Markdown
list and a code block, math rendered by KaTeX served by the app, the Chinese UI and the phone width.
The file name sorts before test_chat_ui.py on purpose: this module's app stops before that package-wide
tiny-model app starts, so one engine runs at a time.
"""
import re
import time

import pytest

from tests.helpers import running_app, status_panel_text

pytestmark = pytest.mark.timeout(600)
CAPITAL = "What is the capital of France?"
LIST_QUESTION = "What are three benefits of exercise? Answer with a short list."
CODE_QUESTION = "Show me how to reverse a string in Python."
# Your own messages are shown as typed (docs/security.md); answers render LaTeX. Greedy SmolLM2 answers this
# with 'Repeat exactly: $\pi r^2$' (transformers' generate, float32): a formula in the answer.
MATH_QUESTION = r"Repeat exactly: $A = \pi r^2$"
# Answers here come in 4-byte emoji split across byte-level tokens: where a careless stream shows U+FFFD.
EMOJI_PRONE = "你好，请介绍一下你自己。"
STATS = re.compile(r"(prompt|提示) \d+ (tokens|个 token)")

# Every distinct text the newest answer showed, recorded inside the page after each DOM change.
RECORD_ANSWER_JS = """() => { window.__texts = [];
  new MutationObserver(() => { const m = document.querySelectorAll('[data-step-type="assistant_message"]');
    if (!m.length) return; const text = m[m.length - 1].innerText;
    if (window.__texts[window.__texts.length - 1] !== text) window.__texts.push(text); })
  .observe(document.body, {subtree: true, childList: true, characterData: true}); }"""


@pytest.fixture(scope="module")
def real_app(real_model_dir, tmp_path_factory):
    # float32 everywhere: a CPU with bf16 would otherwise pick bf16, and greedy answers would differ.
    with running_app(real_model_dir, tmp_path_factory.mktemp("real-ui"), "--temperature", "0", "--dtype", "float32",
                     "--max-model-len", "2048", "--max-tokens", "200") as app:
        yield app


@pytest.fixture
def open_page(browser, real_app):
    contexts = []

    def open_it(locale="en-US", width=1280, height=900):
        context = browser.new_context(locale=locale, viewport={"width": width, "height": height})
        contexts.append(context)
        page = context.new_page()
        page.outside_requests = []  # the page must load with nothing but the app (offline)

        def only_the_app(route):
            if route.request.url.startswith(real_app.url):
                return route.continue_()
            page.outside_requests.append(route.request.url)
            return route.abort()

        context.route("**/*", only_the_app)
        page.goto(real_app.url + "/")
        page.wait_for_selector("#chat-input", timeout=30000)
        page.locator("#side-view-content").get_by_text("ready").wait_for(timeout=30000)
        return page

    yield open_it
    for context in contexts:
        context.close()


def ask(page, text, count, timeout=240):
    """Send ``text`` and wait for the count-th answer to finish; return that answer's text without stats."""
    page.fill("#chat-input", text)
    page.click("#chat-submit")
    answer = page.locator('[data-step-type="assistant_message"]').nth(count - 1)
    deadline = time.time() + timeout
    while time.time() < deadline:
        if answer.count() and STATS.search(answer.inner_text()):
            return STATS.split(answer.inner_text())[0].rstrip(" `\n")
        time.sleep(0.2)
    raise AssertionError(f"answer #{count} did not finish; page says:\n{page.inner_text('body')[-1500:]}")


def streamed_texts(page):
    """What the page showed while the answer streamed (before its stats line came)."""
    return [text.strip() for text in page.evaluate("window.__texts") if not STATS.search(text)]


def test_capital_of_france_answers_paris_and_streams_cleanly(open_page, shots_dir):
    page = open_page()
    page.evaluate(RECORD_ANSWER_JS)
    final = ask(page, CAPITAL, 1)
    assert final == "The capital of France is Paris."
    seen = streamed_texts(page)
    assert len(seen) >= 2, f"the answer did not stream: {seen}"
    for text in seen:  # every step on the way was the start of the final text
        assert final.startswith(text), (text, final)
    assert not page.outside_requests


def test_streamed_text_has_no_replacement_characters(open_page):
    page = open_page()
    page.evaluate(RECORD_ANSWER_JS)
    final = ask(page, EMOJI_PRONE, 1)
    seen = streamed_texts(page)
    assert len(seen) >= 5, f"the answer did not stream: {seen[:5]}"
    assert not [text for text in seen if "\ufffd" in text]
    assert "\ufffd" not in final
    assert any(ord(ch) > 0xFFFF for ch in final), f"expected the emoji answer, got {final[:80]!r}"
    assert seen[-1] == final or final.startswith(seen[-1])


def test_markdown_list_and_code_block_with_the_status_panel(open_page, shots_dir):
    page = open_page(height=1000)
    ask(page, LIST_QUESTION, 1)
    assert page.locator('[data-step-type="assistant_message"] ol li').count() == 3
    ask(page, CODE_QUESTION, 2)
    code = page.locator('[data-step-type="assistant_message"] pre').first
    assert "def reverse_string" in code.inner_text()
    status_panel_text(page, "Engine:", "ready")
    # The chat scrolled the newest question to the top; scroll back so the picture shows both answers.
    page.evaluate("""() => { for (const el of document.querySelectorAll('*')) {
        const y = getComputedStyle(el).overflowY;
        if ((y === 'auto' || y === 'scroll') && el.scrollHeight > el.clientHeight) el.scrollTop = 0; } }""")
    page.screenshot(path=str(shots_dir / "real-answer.png"))


def test_math_renders_with_katex_from_the_app(open_page, real_app, shots_dir):
    page = open_page()
    katex_files = []
    page.on("response", lambda r: katex_files.append((r.url, r.status)) if "/katex/" in r.url else None)
    ask(page, MATH_QUESTION, 1)
    formula = page.locator('[data-step-type="assistant_message"] .katex')
    assert formula.count() >= 1  # the answer's formula, rendered
    assert page.locator('[data-step-type="user_message"] .katex').count() == 0  # the question as typed
    # KaTeX's CSS is applied (its MathML copy is visually hidden) and its fonts came from the app.
    assert page.evaluate("""() => { const m = document.querySelector('.katex-mathml');
        return getComputedStyle(m).position === 'absolute' && getComputedStyle(m).overflow === 'hidden'; }""")
    page.evaluate("document.fonts.ready")
    loaded = page.evaluate("[...document.fonts].filter(f => f.family.includes('KaTeX') && f.status === 'loaded')"
                           ".map(f => f.family)")
    assert "KaTeX_Main" in loaded and "KaTeX_Math" in loaded, loaded
    assert katex_files and all(url.startswith(real_app.url) and status == 200 for url, status in katex_files)
    assert not page.outside_requests
    page.screenshot(path=str(shots_dir / "real-math.png"))


def test_chinese_ui(open_page, shots_dir):
    page = open_page(locale="zh-CN")
    assert "输入" in (page.get_attribute("#chat-input", "placeholder") or "")
    status_panel_text(page, "引擎", "ready")
    assert "Paris" in ask(page, CAPITAL, 1)
    page.screenshot(path=str(shots_dir / "real-zh.png"))


def test_phone_width(open_page, shots_dir):
    page = open_page(width=390, height=844)
    page.keyboard.press("Escape")  # on a phone the status panel is a sheet over the chat: close it
    page.locator("#side-view-content").wait_for(state="hidden", timeout=5000)
    ask(page, LIST_QUESTION, 1)
    box = page.locator("#chat-input").bounding_box()
    assert box and box["x"] >= 0 and box["x"] + box["width"] <= 390
    page.screenshot(path=str(shots_dir / "real-phone.png"))
