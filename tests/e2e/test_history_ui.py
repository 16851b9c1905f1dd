"""Chat history in a real browser (issue 12): a chat survives a restart, shows in the sidebar, opens and
continues with its old turns in the prompt; rename, delete (rows gone), search (English and Chinese, every
word in any order), download; --no-history writes nothing."""
from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

import pytest

from tests.support.app_process import LaunchedApp, get, running_app
from tests.support.page import STATS_EN, open_sidebar, send, status_panel_text, wait_stats

pytestmark = pytest.mark.timeout(600)
FAST = ("--max-tokens", "16")  # short answers: these tests are about what is kept, not about answers


def rows(db: Path, sql: str, *args) -> list[tuple]:
    with sqlite3.connect(db) as conn:
        return conn.execute(sql, args).fetchall()


def open_page(browser, app, path="/"):
    context = browser.new_context(locale="en-US", viewport={"width": 1280, "height": 800})
    page = context.new_page()
    navigations = []
    page.on("framenavigated", lambda frame: navigations.append(frame.url))
    page.goto(app.url + path)
    page.wait_for_selector("#chat-input", timeout=30000)
    return page, navigations


def thread_id_of(page, title: str) -> str:
    """The chat's id, from its entry in the history sidebar (element id "thread-<id>"); Chainlit's page
    does not always move its URL to /thread/<id> after the first message."""
    found = page.wait_for_function(
        """title => { for (const e of document.querySelectorAll('[id^="thread-"]')) {
              if (/^thread-[0-9a-f-]{36}$/.test(e.id) && e.textContent.includes(title)) return e.id; }
            return null; }""", arg=title, timeout=15000)
    return found.json_value().removeprefix("thread-")


def new_chat(page):
    page.click("#header #new-chat-button")
    confirm = page.get_by_role("button", name="Confirm")
    if confirm.count():
        confirm.click()
    page.wait_for_selector("#chat-input", timeout=10000)


def thread_menu(page, thread_id, item):
    row = page.locator(f"#thread-{thread_id}")
    row.hover()
    row.locator("#thread-options").click(force=True)
    page.get_by_role("menuitem", name=item).click()


@pytest.fixture(scope="module")
def restarted(browser, tiny_model_dir, tmp_path_factory):
    """Two chats made in a first app, then that app stopped and a second one started on the same data."""
    data = tmp_path_factory.mktemp("chats")
    first = LaunchedApp(tiny_model_dir, tmp_path_factory.mktemp("first"), "--data-dir", str(data), *FAST)
    try:
        first.wait_http()
        first.wait_ready()
        page, navigations = open_page(browser, first)
        send(page, "the weather in Paris")
        paris = wait_stats(page, 1)
        paris_id = thread_id_of(page, "the weather in Paris")
        new_chat(page)
        send(page, "你好")
        wait_stats(page, 1)
        send(page, "请用三句话解释量子纠缠")
        wait_stats(page, 2)
        chinese_id = thread_id_of(page, "你好")
        page.context.close()
    finally:
        first.stop()
        first.kill()
    with running_app(tiny_model_dir, tmp_path_factory.mktemp("second"), "--data-dir", str(data), *FAST) as app:
        yield {"app": app, "db": data / "chats.db", "paris": paris_id, "paris_stats": paris,
               "chinese": chinese_id, "first_navigations": navigations}


def test_no_login_page_for_the_local_user(restarted):
    # Loopback without --auth-token: one local user, logged in by the page itself.
    assert not any("/login" in url for url in restarted["first_navigations"]), restarted["first_navigations"]
    assert rows(restarted["db"], "select identifier from users") == [("local",)]


def test_a_past_chat_is_in_the_sidebar_after_a_restart_opens_and_continues(browser, restarted):
    app, paris = restarted["app"], restarted["paris"]
    page, navigations = open_page(browser, app)
    open_sidebar(page)
    row = page.locator(f"#thread-{paris}")
    assert row.inner_text().strip() == "the weather in Paris"
    row.get_by_text("the weather in Paris").click()
    # The page's own router moves to the chat (no page load to wait for).
    page.wait_for_function(f"() => location.pathname.endsWith('/thread/{paris}')", timeout=10000)
    # Resumed: its question is in the chat (not only in the sidebar) and its status panel is drawn with the chat's
    # download links (on_chat_resume). Typed before that, the page's resume emptied the box (a disabled send button).
    page.locator('[data-step-type="user_message"]', has_text="the weather in Paris").wait_for(timeout=30000)
    status_panel_text(page, "Markdown", timeout_ms=30000)
    send(page, "and tomorrow?")
    prompt1, answer1, _, _ = restarted["paris_stats"]
    prompt2, *_ = wait_stats(page, 2)  # the old answer's stats line is shown again, then the new one
    # The engine got the old turn: the new prompt holds the first question and its answer.
    assert int(prompt2) >= int(prompt1) + int(answer1), (prompt1, answer1, prompt2)
    assert not any("/login" in url for url in navigations)
    # Both turns are stored, in order.
    texts = [json.loads(d)["output"] for (d,) in rows(restarted["db"], "select data from steps where thread_id = ? "
                                                      "and type = 'user_message' order by created_at, position", paris)]
    assert texts == ["the weather in Paris", "and tomorrow?"]
    # The chat downloads as Markdown and JSON from the status panel's links, for its owner (the cookie).
    panel = page.locator("#side-view-content")
    with page.expect_download(timeout=15000) as markdown:
        panel.get_by_role("link", name="Markdown").click()
    assert "**You:**\n\nthe weather in Paris" in open(markdown.value.path(), encoding="utf-8").read()
    with page.expect_download(timeout=15000) as exported_json:
        panel.get_by_role("link", name="JSON").click()
    exported = json.load(open(exported_json.value.path(), encoding="utf-8"))
    assert [m["content"] for m in exported["messages"] if m["role"] == "user"] == ["the weather in Paris",
                                                                                   "and tomorrow?"]
    assert get(f"{app.url}/history/chats/{paris}/export.md")[0] == 401  # no cookie, no chat
    page.context.close()


# The chats the search dialog lists: each option's value is "<query>-<chat id>" (Chainlit's Search.tsx).
LISTED_CHATS = "() => [...document.querySelectorAll('[role=option]')].map(e => (e.dataset.value || '').slice(-36))"


@pytest.mark.parametrize("words, expected", [("tomorrow", "paris"), ("PARIS", "paris"), ("量子纠缠", "chinese"),
                                             ("三句话", "chinese"),
                                             # issue 24: every word, in any order, in any of the chat's messages
                                             ("paris weather", "paris"), ("量子纠缠 你好", "chinese")])
def test_search_finds_chats_by_words_in_their_messages(browser, restarted, words, expected):
    page, _ = open_page(browser, restarted["app"])
    open_sidebar(page)
    page.locator("#search-chats-button").first.click()
    # The dialog lists the recent chats first (a search for ""), and shows whichever answer comes last: typed before
    # that list came, its late answer replaced the search's, and the dialog kept listing both chats.
    page.get_by_role("option").first.wait_for(timeout=30000)
    page.get_by_placeholder("Search conversations").fill(words)
    want = sorted(chats_holding(restarted["db"], words.split()))
    assert restarted[expected] in want
    page.wait_for_function(f"want => JSON.stringify(({LISTED_CHATS})().sort()) === JSON.stringify(want)", arg=want,
                           timeout=30000)
    assert sorted(page.evaluate(LISTED_CHATS)) == want
    page.context.close()


def chats_holding(db: Path, words: list[str]) -> set[str]:
    """The chats whose stored messages hold every word (in any case), read from the stored JSON itself, not from
    the app's search column: the tiny model's random answers can hold a searched word too (its tokenizer was
    trained on these very questions, so "量子纠缠" is one of its tokens, and a Paris answer once ended with it)."""
    text: dict[str, str] = {}
    for thread_id, data in rows(db, "select thread_id, data from steps"):
        text[thread_id] = text.get(thread_id, "") + "\n" + str(json.loads(data).get("output") or "").lower()
    return {thread_id for thread_id, held in text.items() if all(word.lower() in held for word in words)}


def test_rename_from_the_sidebar(browser, restarted):
    page, _ = open_page(browser, restarted["app"])
    open_sidebar(page)
    thread_menu(page, restarted["chinese"], "Rename")
    page.locator("input#name").fill("量子 · quantum")
    page.get_by_role("button", name="Confirm").click()
    page.locator(f"#thread-{restarted['chinese']}").get_by_text("量子 · quantum").wait_for(timeout=10000)
    assert rows(restarted["db"], "select name from threads where id = ?", restarted["chinese"]) == [("量子 · quantum",)]
    page.context.close()


def test_delete_from_the_sidebar_removes_the_rows(browser, restarted):
    chat = restarted["chinese"]
    assert rows(restarted["db"], "select count(*) from steps where thread_id = ?", chat)[0][0] >= 4
    page, _ = open_page(browser, restarted["app"])
    open_sidebar(page)
    thread_menu(page, chat, "Delete")
    page.get_by_role("alertdialog").get_by_role("button", name="Confirm").click()
    page.locator(f"#thread-{chat}").wait_for(state="detached", timeout=10000)
    assert rows(restarted["db"], "select count(*) from threads where id = ?", chat) == [(0,)]
    assert rows(restarted["db"], "select count(*) from steps where thread_id = ?", chat) == [(0,)]
    assert rows(restarted["db"], "select count(*) from threads where id = ?", restarted["paris"]) == [(1,)]
    page.context.close()


def test_no_history_writes_nothing(browser, tiny_model_dir, tmp_path):
    data_home = tmp_path / "xdg"
    data_home.mkdir()
    (tmp_path / "run").mkdir()
    import os

    before = os.environ["XDG_DATA_HOME"]
    os.environ["XDG_DATA_HOME"] = str(data_home)  # LaunchedApp passes the environment on
    try:
        with running_app(tiny_model_dir, tmp_path / "run", "--no-history", *FAST) as app:
            page, navigations = open_page(browser, app)
            send(page, "remember nothing")
            wait_stats(page, 1)
            assert not json.loads(get(app.url + "/auth/config")[1])["requireLogin"]  # no user, no sidebar
            assert page.locator("#thread-history").count() == 0
            page.context.close()
    finally:
        os.environ["XDG_DATA_HOME"] = before
    assert list(data_home.iterdir()) == []  # no ernie-chat folder, no chats.db
    assert not list((tmp_path / "run").glob("*.db"))


def test_a_damaged_history_file_is_told_once_on_the_page_with_where_it_was_kept(browser, tiny_model_dir, tmp_path):
    """It was moved aside with a log line only, and the page showed an empty sidebar with no word of it."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "chats.db").write_bytes(b"not a database at all " * 200)
    (tmp_path / "run").mkdir()
    with running_app(tiny_model_dir, tmp_path / "run", "--data-dir", str(data), *FAST) as app:
        kept = list(data.glob("chats.db.corrupt-*"))
        assert len(kept) == 1
        page, _ = open_page(browser, app)
        notice = page.get_by_text(f"The old file is kept, unchanged, as {kept[0]}.")
        notice.wait_for(timeout=30000)
        assert "The chat history file was damaged" in page.inner_text("body")
        page.context.close()
        again, _ = open_page(browser, app)
        # The status panel is drawn after the place where the notice would be sent: once it shows, a notice
        # would be on the page already.
        status_panel_text(again, "ready")
        assert "The chat history file was damaged" not in again.inner_text("body")
        again.context.close()


def test_an_answer_cut_off_by_a_killed_app_shows_as_interrupted_with_regenerate(browser, real_model_dir, tmp_path):
    """After kill -9 the answer was kept up to its last save and looked finished. The real small model: the tiny
    random one often ends an answer before its first save (2 s)."""
    data = tmp_path / "data"
    for folder in ("data", "first", "second"):
        (tmp_path / folder).mkdir()
    first = LaunchedApp(real_model_dir, tmp_path / "first", "--data-dir", str(data), "--max-tokens", "3000")
    try:
        first.wait_http()
        first.wait_ready()
        page, _ = open_page(browser, first)
        saved_mid_answer = ("select count(*) from steps where thread_id = ? and type = 'assistant_message' "
                            "and data like '%\"partial\": true%'")
        thread_id = None
        for attempt in range(1, 6):  # the random model sometimes ends an answer before its first save: again
            send(page, f"Write a very long story about a lighthouse keeper and the sea, take {attempt}.")
            deadline = time.time() + 60
            while thread_id is None:  # the one chat of this data folder, once its first message is stored
                assert time.time() < deadline, "the chat was never stored"
                found = rows(data / "chats.db", "select id from threads")
                if found:
                    thread_id = found[0][0]
                else:
                    time.sleep(0.1)
            while not rows(data / "chats.db", saved_mid_answer, thread_id)[0][0]:  # a save while it streams
                assert time.time() < deadline, "the growing answer was never saved"
                if len(STATS_EN.findall(page.inner_text("body"))) == attempt:  # it ended first
                    break
                time.sleep(0.1)
            else:
                break
        first.proc.kill()
        first.proc.wait(10)
        page.context.close()
    finally:
        first.kill()
    assert rows(data / "chats.db", saved_mid_answer, thread_id) == [(1,)], "no answer was cut off mid-stream"
    with running_app(real_model_dir, tmp_path / "second", "--data-dir", str(data), *FAST) as app:
        page, _ = open_page(browser, app, f"/thread/{thread_id}")
        page.get_by_text("interrupted: the app stopped before this answer was finished").wait_for(timeout=30000)
        regenerate = page.get_by_role("button", name="Regenerate")
        regenerate.wait_for(timeout=10000)
        assert rows(data / "chats.db", saved_mid_answer, thread_id) == [(0,)]  # marked once, saved as such
        regenerate.click()
        wait_stats(page, 1)  # a whole new answer, with its stats line, in place of the cut-off one
        assert "interrupted: the app stopped" not in page.inner_text("body")
        page.context.close()
