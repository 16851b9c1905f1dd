"""Another user's chat opened by its address (issue 35 item 7): bob at ``/thread/<alice's chat>`` got "Could not
reach the server" and a disabled send button until a reload (Chainlit refuses the socket). Now the chat stays
refused, one line in the page's language says so, and bob's composer works in a new chat of his own. The engine
confirms his prompt holds nothing of alice's chat (vLLM's prompt token counter)."""
from __future__ import annotations

import re
import sqlite3

import pytest

from tests.support.app_process import get, running_app
from tests.support.metrics import metric_value
from tests.support.page import STATS_EN, send, sign_in, wait_chat_opened, wait_stats

pytestmark = pytest.mark.timeout(600)
QUESTION = "what is the plan"
STATS = {"en-US": STATS_EN, "zh-CN": re.compile(r"提示 (\d+) 个 token")}  # the stats line's prompt figure


@pytest.fixture(scope="module")
def alice_has_a_chat(browser, tiny_model_dir, tmp_path_factory):
    from app.accounts import Accounts

    data = tmp_path_factory.mktemp("two-users")
    accounts = Accounts(data / "users.json")
    accounts.add("alice", "alice-secret-1")
    accounts.add("bob", "bob-secret-22")
    with running_app(tiny_model_dir, tmp_path_factory.mktemp("run"), "--data-dir", str(data),
                     "--max-tokens", "16") as app:
        context = browser.new_context(locale="en-US")
        page = context.new_page()
        page.goto(app.url + "/")
        page.wait_for_selector("#password", timeout=30000)
        sign_in(page, "alice", "alice-secret-1")
        wait_chat_opened(page)
        send(page, QUESTION)
        alice_prompt = int(wait_stats(page, 1)[0])
        context.close()
        with sqlite3.connect(data / "chats.db") as conn:
            (thread,), = conn.execute("select id from threads where user_identifier = 'alice'").fetchall()
        yield app, data / "chats.db", thread, alice_prompt


def steps_of(db, thread: str) -> list[str]:
    with sqlite3.connect(db) as conn:
        return [row[0] for row in conn.execute("select data from steps where thread_id = ?", (thread,))]


@pytest.mark.parametrize(("locale", "line"), [
    ("en-US", "That chat belongs to another account, so it stays closed to you. This is a new chat of your own."),
    ("zh-CN", "该对话属于其他账号，你无法打开。这里是你自己的新对话。"),
])
def test_bob_opening_alices_chat_gets_one_line_and_a_working_composer(browser, alice_has_a_chat, locale, line):
    app, db, thread, alice_prompt = alice_has_a_chat
    alice_steps = steps_of(db, thread)
    context = browser.new_context(locale=locale)
    try:
        page = context.new_page()
        page.goto(app.url + "/")
        page.wait_for_selector("#password", timeout=30000)
        sign_in(page, "bob", "bob-secret-22")
        wait_chat_opened(page, locale)
        page.goto(f"{app.url}/thread/{thread}")
        page.locator(".step").get_by_text(line, exact=True).wait_for(timeout=30000)  # the line, in the chat
        page.wait_for_function(f"() => !location.pathname.includes('{thread}')", timeout=30000)  # left her address
        before = metric_value(get(app.url + "/metrics")[1], "vllm:prompt_tokens_total")
        page.fill("#chat-input", QUESTION)  # the composer works: its send button comes on, and bob is answered
        page.wait_for_selector("#chat-submit:not([disabled])", timeout=30000)
        assert page.locator("#session-error").count() == 0, page.inner_text("body")[-800:]
        page.click("#chat-submit")
        found = wait_stats(page, 1, STATS[locale])
        bob_prompt = int(found if isinstance(found, str) else found[0])
        after = metric_value(get(app.url + "/metrics")[1], "vllm:prompt_tokens_total")
        # The engine got a one-turn prompt, the size of alice's first one: nothing of her chat went into it.
        assert after - before == bob_prompt == alice_prompt
        body = page.inner_text("body")
        assert "Could not reach the server" not in body and "无法连接到服务器" not in body
        assert steps_of(db, thread) == alice_steps  # her chat is as it was: bob wrote nothing into it
    finally:
        context.close()
