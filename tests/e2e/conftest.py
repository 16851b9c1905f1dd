"""Browser fixtures: one launched app (real engine, tiny model) and one Chromium for the e2e tests.

Package scope: Playwright's sync API runs an event loop in this thread while it is open, so it must be
closed before the other test packages (which use asyncio.run and Playwright themselves) start."""
import os
from pathlib import Path

import pytest

from tests.support.app_process import running_app
from tests.support.page import CHROMIUM_ARGS, wait_chat_opened


@pytest.fixture(scope="package")
def served_app(tiny_model_dir, tmp_path_factory):
    with running_app(tiny_model_dir, tmp_path_factory.mktemp("served"), "--max-message-chars", "20000") as app:
        yield app


@pytest.fixture(scope="package")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture(scope="session")
def shots_dir(tmp_path_factory) -> Path:
    """Screenshots go to $ERNIE_CHAT_SCREENSHOTS (docs/screenshots when refreshing the README)."""
    target = os.environ.get("ERNIE_CHAT_SCREENSHOTS")
    path = Path(target) if target else tmp_path_factory.mktemp("screenshots")
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture
def page_for(browser, served_app):
    pages = []

    def open_page(locale="en-US", width=1280, height=800):
        context = browser.new_context(locale=locale, viewport={"width": width, "height": height})
        page = context.new_page()
        page.goto(served_app.url + "/")
        page.wait_for_selector("#chat-input", timeout=30000)
        # The status panel comes from on_chat_start: once it is drawn, the socket is up and messages land.
        wait_chat_opened(page, locale)
        pages.append(context)
        return page

    yield open_page
    for context in pages:
        context.close()
