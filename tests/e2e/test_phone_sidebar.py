"""Issue 35 item 8: on a phone, the first tap on the sidebar button after the first answer did nothing (3 of 3
tries; the second tap opened it). Chainlit's page moved to the chat's address only when its sidebar's thread list
first mounted, and that move mounted the whole page again, the sidebar with it, closed (app/ui/chat_address.py)."""
import re

from tests.support.page import PHONE, send, wait_stats

SIDEBAR_SHOWN = ("() => { const h = document.querySelector('[role=dialog] #thread-history');"
                 " return Boolean(h) && h.getBoundingClientRect().left >= 0; }")


def test_the_first_tap_on_the_sidebar_button_after_an_answer_opens_the_sidebar(page_for):
    page = page_for(**PHONE)
    send(page, "hello from a phone")
    wait_stats(page, 1)
    # The page moved to its chat's address once the first message began the chat, and Chainlit's page, mounted
    # again there, is settled (app/ui/static/ui/face.js), before any tap.
    page.wait_for_function("() => document.documentElement.dataset.chatAddress === 'settled'", timeout=15000)
    assert re.search(r"/thread/[0-9a-f-]{36}$", page.evaluate("location.pathname")), page.evaluate("location.pathname")
    thread = page.evaluate("location.pathname").rsplit("/", 1)[1]
    page.locator("#header #sidebar-trigger-button").click()
    page.wait_for_function(SIDEBAR_SHOWN, timeout=10000)
    # It stayed open: the chat's row in it takes the next tap (a page mounted again would have closed it).
    row = page.locator(f"#thread-{thread}")
    row.get_by_text("hello from a phone").click(timeout=10000)
    page.wait_for_function(f"() => location.pathname.endsWith('/thread/{thread}')", timeout=10000)
