"""Driving the real page in Chromium (Playwright): sign in, send, wait for what the page shows."""
from __future__ import annotations

import re
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    pass



CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]


def status_panel_text(page, *words: str, timeout_ms: int = 15000) -> str:
    """The status panel's text once it holds every one of `words`.

    The panel is a side element whose text the page fetches anew when it redraws (a new state, the move to
    the chat's own address): read right after one word shows, it can be empty for a moment.
    """
    page.wait_for_function(
        """words => { const el = document.querySelector('#side-view-content');
                     return !!el && words.every(w => el.innerText.includes(w)); }""",
        arg=list(words), timeout=timeout_ms)
    return page.inner_text("#side-view-content")


PHONE = {"width": 390, "height": 844}


NARROW_BELOW = 768  # Chainlit's own breakpoint: below it a side element is a sheet over the chat


def wait_chat_opened(page, locale: str = "en-US", timeout_ms: int = 30000) -> None:
    """The chat's socket is up and its status panel drawn (on_chat_start): on a wide page the panel shows the
    engine's ready word in the page's language; on a phone the sheet nobody asked for came and was closed
    (app/ui/static/ui/face.js counts it on <html>)."""
    from app.i18n import t

    page.wait_for_selector("#chat-input", timeout=timeout_ms)
    if page.viewport_size["width"] < NARROW_BELOW:
        page.wait_for_function("() => Number(document.documentElement.dataset.unaskedStatusClosed || 0) > 0",
                               timeout=timeout_ms)
    else:
        page.locator("#side-view-content").get_by_text(t(locale, "state_ready")).wait_for(timeout=timeout_ms)


def covering(locator) -> str:
    """What a tap at the element's centre reaches instead of it: '' when it reaches the element (in the viewport,
    on top), else what is there (the start of its HTML) or where the element is (outside the viewport)."""
    return locator.evaluate("""e => { const r = e.getBoundingClientRect();
        const x = r.left + r.width / 2, y = r.top + r.height / 2;
        if (r.width === 0 || x < 0 || y < 0 || x > innerWidth || y > innerHeight)
            return 'outside the viewport: ' + JSON.stringify(r);
        const hit = document.elementFromPoint(x, y);
        return hit && (e === hit || e.contains(hit)) ? '' : (hit ? hit.outerHTML.slice(0, 300) : 'nothing'); }""")


# The stats line under a finished answer (app/ui/streamed_answer.py), English UI.
STATS_EN = re.compile(r"prompt (\d+) tokens · answer (\d+) tokens · first token ([\d.]+) s · ([\d.]+) tokens/s")


def wait_stats(page, count, pattern=STATS_EN, timeout=60):
    """Wait for the count-th finished answer (its stats line) and return the numbers."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        found = pattern.findall(page.inner_text("body"))
        if len(found) >= count:
            return found[count - 1]
        time.sleep(0.2)
    raise AssertionError(f"no stats line #{count}; page says:\n{page.inner_text('body')[-1500:]}")


def message_id(message) -> str:
    """The chat message id of a ``[data-step-type]`` element (Chainlit puts it on an element inside: ``step-<id>``)."""
    found = message.locator('[id^="step-"]').first.get_attribute("id")
    assert found, "the message shows no step id"
    return found


def message_with_id(page, step_id: str):
    """The ``[data-step-type]`` element of the message ``message_id`` named, whatever it shows now."""
    return page.locator("[data-step-type]").filter(has=page.locator(f'[id="{step_id}"]'))


def send(page, text):
    page.fill("#chat-input", text)
    page.click("#chat-submit")  # not Enter: on a phone-width page Enter adds a new line


def sign_in(page, name: str, secret: str) -> None:
    """Fill in and send Chainlit's login form."""
    page.fill("#email", name)
    page.fill("#password", secret)
    page.click("button[type=submit]")


def open_sidebar(page):
    """The history sidebar, opened (and waited for) as a user opens it."""
    history = page.locator("#thread-history")
    history.wait_for(state="attached", timeout=10000)
    # A closed sidebar is still in the page, slid out of the viewport (the UI starts with it closed).
    if history.evaluate("e => e.getBoundingClientRect().right <= 0"):
        page.locator("#header #sidebar-trigger-button").click()
    page.wait_for_function("() => document.querySelector('#thread-history').getBoundingClientRect().left >= 0",
                           timeout=10000)


def set_max_answer_tokens(page, key):
    page.click("#chat-settings-open-modal")
    slider = page.get_by_role("slider").last
    slider.wait_for(timeout=10000)
    slider.focus()
    page.keyboard.press(key)  # Home -> 16 tokens, End -> the cap
    page.click("#confirm")


def attach(page, *paths: Path) -> None:
    """Pick files with Chainlit's upload button (the composer's paperclip) and wait until the server has taken
    every one: the page sends a message with only the files already uploaded."""
    done = []
    page.on("response", lambda r: done.append(r.status) if r.request.method == "POST" and "/project/file" in r.url
            else None)
    page.set_input_files("#upload-button-input", [str(p) for p in paths])
    while len(done) < len(paths):
        page.wait_for_event("response", timeout=30000)
    assert done == [200] * len(paths), done
