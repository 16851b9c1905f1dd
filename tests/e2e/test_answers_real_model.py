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
from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

from tests import sample_documents as samples
from tests.support.app_process import ROOT, running_app
from tests.support.metrics import prompt_tokens
from tests.support.page import PHONE, attach, covering, open_sidebar, status_panel_text, wait_chat_opened

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
        wait_chat_opened(page, locale)
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
    status_panel_text(page, "Model:", "smollm2-135m-instruct (")  # the model it serves, not ERNIE
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
    status_panel_text(page, "引擎", "就绪")
    assert "Paris" in ask(page, CAPITAL, 1)
    page.screenshot(path=str(shots_dir / "real-zh.png"))


def test_the_page_names_the_model_it_serves_and_shows_the_apps_own_face(open_page, real_app):
    """--model is SmolLM2 here: the title, the welcome text (both languages) and the panel name it, never ERNIE;
    the welcome screen's logo and the favicon are the app's own files (public/), not Chainlit's."""
    page = open_page()
    assert page.title() == "smollm2-135m-instruct · ernie-chat"
    status_panel_text(page, "Model:", "smollm2-135m-instruct (")
    logo = page.locator("#welcome-screen img.logo")
    logo.wait_for()
    for theme in ("light", "dark"):  # the page's own (its theme's) and the other one
        assert page.request.get(f"{real_app.url}/logo?theme={theme}").body() == \
            (ROOT / "public" / f"logo_{theme}.png").read_bytes()
    assert re.fullmatch(r".*/logo\?theme=(light|dark)&?", logo.get_attribute("src"))
    favicon = page.locator("link[rel=icon]").get_attribute("href")
    assert page.request.get(real_app.url + favicon).body() == (ROOT / "public" / "favicon.png").read_bytes()
    assert page.evaluate("e => e.naturalWidth", logo.element_handle()) == 760  # drawn, not a broken image
    for locale, words in (("en-US", "You are chatting with smollm2-135m-instruct"),
                          ("zh-CN", "您正在与 smollm2-135m-instruct 对话")):
        page = open_page(locale=locale)
        page.click("#readme-button")
        welcome = page.get_by_role("dialog")
        welcome.get_by_text(words).wait_for()
        assert "ERNIE" not in welcome.inner_text() and "ERNIE" not in page.title()


def test_phone_width_the_status_panel_never_covers_the_chat(open_page, shots_dir):
    page = open_page(**PHONE)  # waits until the status sheet came and was closed unasked (face.js)
    composer = page.locator("#chat-input")
    assert covering(composer) == ""
    assert page.get_by_role("dialog").count() == 0, page.get_by_role("dialog").first.inner_html()[:300]
    assert ask(page, CAPITAL, 1) == "The capital of France is Paris."
    # The first answer saves the chat, and the panel is drawn again with its download links: closed again. The page
    # moved to the chat's address and Chainlit's page mounted again there, its sheet closed too (face.js).
    page.wait_for_function("() => Number(document.documentElement.dataset.unaskedStatusClosed) >= 2")
    page.wait_for_function("() => document.documentElement.dataset.chatAddress === 'settled'")
    last = page.locator('[data-step-type="assistant_message"]').last
    for element in (composer, last.get_by_text("The capital of France is Paris."), last.locator("code").last):
        assert covering(element) == ""
    box = composer.bounding_box()
    assert box and box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"]
    page.screenshot(path=str(shots_dir / "real-phone.png"))
    # Asked for, the panel opens (in the page's language), and closes like any sheet.
    page.click("#ernie-status-button")
    status_panel_text(page, "Engine:", "ready", "Markdown")
    page.keyboard.press("Escape")
    page.locator("#side-view-content").wait_for(state="detached")
    assert covering(composer) == ""


STATS_FIGURE_BOXES = """() => {
    const answers = document.querySelectorAll('[data-step-type="assistant_message"]');
    return [...answers[answers.length - 1].querySelectorAll('code')]
        .map(code => [...code.getClientRects()].map(rect => rect.toJSON()));
}"""
STATS_FIGURES_ON_ONE_LINE_EACH = """() => {
    const boxes = (""" + STATS_FIGURE_BOXES + """)();
    const sliding = document.getAnimations().some(a => a.playState === 'running'
        && a.effect.getComputedTiming().iterations !== Infinity);
    const sidebar = document.querySelector('#thread-history');
    return !sliding && sidebar && sidebar.getBoundingClientRect().width > 0
        && boxes.length === 4 && boxes.every(rects => rects.length === 1) ? boxes : null;
}"""  # four figures: prompt · answer · first token · tokens/s


def test_the_stats_line_wraps_between_figures_only_with_the_sidebar_open(open_page, shots_dir):
    for width in (1280, 900):  # the history sidebar and the status panel both open beside the chat
        page = open_page(width=width)
        ask(page, CAPITAL, 1)
        open_sidebar(page)
        if width == 1280:  # the answer's avatar is the app's icon (every avatar is: app/ui/branding.py show_model)
            avatar = page.locator('[data-step-type="assistant_message"]').last.locator("img").first
            assert page.request.get(avatar.evaluate("img => img.src")).body() == \
                (ROOT / "public" / "favicon.png").read_bytes()
        # The sidebar slides open and the saved chat's message is drawn again: the figures are measured once
        # that has settled and each of the four is on one line (a figure broken across lines never gets there).
        try:
            boxes = page.wait_for_function(STATS_FIGURES_ON_ONE_LINE_EACH, timeout=15000).json_value()
        except PlaywrightTimeoutError:
            raise AssertionError(page.evaluate(STATS_FIGURE_BOXES)) from None
        column = page.locator('[data-step-type="assistant_message"]').last.bounding_box()
        assert all(rects[0]["right"] <= column["x"] + column["width"] + 1 for rects in boxes)  # none overflows
        tops = {round(rects[0]["top"]) for rects in boxes}
        if width == 1280:
            assert len(tops) == 1, boxes  # one line where it fits
        page.screenshot(path=str(shots_dir / f"stats-sidebar-{width}.png"))


def test_answers_from_an_attached_pdf_only(open_page, real_app, real_model_dir, tmp_path, shots_dir):
    """Issue 23: the access code is printed only in the PDF; the model reads it from there (and without the PDF it
    cannot know it). The engine's prompt counter grows by the stats line's prompt, which holds the PDF's text."""
    pdf = samples.pdf(tmp_path / "visitor-guide.pdf", [
        "Visitor guide for the Harbour Lab.\nOpening hours: 8:00 to 18:00, Monday to Friday.",
        "Parking is behind building C.\nThe access code for the north gate is 7731.\nPlease sign in at reception."])
    from transformers import AutoTokenizer

    from app.conversation import ChatTemplate
    from app.documents.extract import extract
    from app.documents.limits import MAX_DOCUMENT_CHARS, Kind
    from app.documents.prompt import render_turn

    question = "What is the access code for the north gate?"
    assert "7731" not in ask(open_page(), question, 1)  # not a guess: without the PDF the model does not know it
    page = open_page()
    attach(page, pdf)
    before = prompt_tokens(real_app)
    final = ask(page, question, 1)
    assert "7731" in final, final
    prompt = int(re.search(r"prompt (\d+) tokens", page.locator('[data-step-type="assistant_message"]').last
                           .inner_text())[1])
    # The engine counted the prompt the stats line shows: the question after the PDF's text in its delimiter.
    assert prompt_tokens(real_app) - before == prompt
    text = extract(pdf, pdf.name, Kind.PDF, MAX_DOCUMENT_CHARS).text
    turn = render_turn(question, [{"name": pdf.name, "text": text}])
    assert prompt == len(ChatTemplate(AutoTokenizer.from_pretrained(real_model_dir)).encode(
        [{"role": "user", "content": turn}]))
    print(f"answer: {final!r}; prompt {prompt} tokens")
    page.locator('[data-step-type="user_message"]').get_by_text("visitor-guide.pdf").wait_for()
    assert not page.outside_requests  # the PDF shown with the message is drawn by the app's own pdf.js worker
    page.screenshot(path=str(shots_dir / "real-document.png"))
