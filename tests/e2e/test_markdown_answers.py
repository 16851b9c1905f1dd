"""limit_nesting in Chromium: an answer of "- "*1000+"x" or 10,000 '>' keeps Chainlit's page and its input box
usable; the same answer unguarded breaks the page (issue 16 item 6). A tiny Chainlit app stands in for the
model, which cannot be made to write these (Chainlit's own per-feature test apps work the same way)."""
import os
import subprocess
import sys
import time

import pytest

from tests.support.app_process import ROOT, free_port, get

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def echo_app():
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "chainlit", "run", str(ROOT / "tests/e2e/markdown_echo_app.py"),
                             "--headless", "--port", str(port), "--host", "127.0.0.1"], cwd=ROOT,
                            env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 60
        while time.time() < deadline:
            try:
                if get(url + "/", 1)[0] == 200:
                    break
            except OSError:
                time.sleep(0.3)
        else:
            raise TimeoutError("chainlit run did not answer")
        yield url
    finally:
        proc.terminate()
        proc.wait(15)


def ask(browser, url, text):
    context = browser.new_context()
    page = context.new_page()
    page.goto(url + "/")
    page.wait_for_selector("#chat-input", timeout=30000)
    page.fill("#chat-input", text)
    page.click("#chat-submit")
    return context, page


@pytest.mark.parametrize("text", ["- " * 1000 + "x", ">" * 10000])
def test_deep_markdown_answer_keeps_the_page_usable(browser, echo_app, text):
    context, page = ask(browser, echo_app, text)
    page.locator('[data-step-type="assistant_message"]').first.wait_for(timeout=30000)
    page.fill("#chat-input", "still here")
    page.click("#chat-submit")
    page.locator('[data-step-type="assistant_message"]').get_by_text("still here").wait_for(timeout=30000)
    assert "Maximum call stack" not in page.inner_text("body")
    context.close()


def test_the_same_answer_unguarded_breaks_the_page(browser, echo_app):
    """The control: without limit_nesting the page loses its chat view and input box."""
    context, page = ask(browser, echo_app, "raw:" + ">" * 10000)
    page.get_by_text("Maximum call stack size exceeded").wait_for(timeout=30000)
    assert page.locator("#chat-input").count() == 0
    context.close()
