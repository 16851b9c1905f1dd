"""Search finds a word that only a hidden version of an answer holds, and the chat opens showing that version
(the version's place and arrows, its text), in a real browser: the chat is brought in with `launch.py import` from
our JSON (its answer keeping three versions, the first shown), the app started on that database (tiny model: no
answer is written here), the word searched in the page's search dialog and the chat picked from its list. Opened
again by its address, without a search, the chat shows the version that the search opened it on (saved). A word
only a question's hidden branch holds opens the chat on that branch the same way, with the question's arrows."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.support.app_process import ROOT, running_app
from tests.support.page import open_sidebar
from tests.support.real_answers import open_chat

pytestmark = pytest.mark.timeout(600)
CHAT_ID = "5e3c1d0a-7c1b-4a55-9d7e-2a1f3b4c5d6e"
OTHER_ID = "9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d"
BRANCHED_ID = "2b4d6f80-1a3c-4e5f-8a7b-9c0d1e2f3a4b"
STATS = "\n\n`prompt 9 tokens`"
VERSIONS = [{"text": "Seabirds nest on cliffs.", "footer": STATS},
            {"text": "Gulls and puffins nest there.", "footer": STATS},
            {"text": "A cormorant dries its wings on the rocks.", "footer": STATS}]
ANSWERS = '[data-step-type="assistant_message"]'


def chat_file(chat_id: str, question: str, answer_metadata: dict, answer: str) -> dict:
    steps = [{"id": f"{chat_id[:8]}-q", "threadId": chat_id, "type": "user_message", "name": "local",
              "output": question, "metadata": {}, "createdAt": "2026-12-01T10:00:00.000000Z"},
             {"id": f"{chat_id[:8]}-a", "threadId": chat_id, "type": "assistant_message", "name": "Assistant",
              "output": answer, "metadata": answer_metadata, "createdAt": "2026-12-01T10:00:01.000000Z"}]
    return {"format": "ernie-chat/chat-v1", "id": chat_id, "name": question, "created_at": steps[0]["createdAt"],
            "user": "local", "tags": [], "metadata": {}, "steps": steps, "elements": []}


def branched_chat() -> dict:
    """A chat whose question was edited: the first question asked, with its answer, is a hidden branch; the
    edited question (branch 2/2) is shown with its own answer."""
    chat = chat_file(BRANCHED_ID, "Which fish live in the river?", {"kind": "answer"}, "Trout and pike.")
    answer = {"type": "assistant_message", "name": "Assistant", "output": "A lighthouse keeper rows a barge.",
              "metadata": {"kind": "answer"}}
    hidden = {"text": "Which boats sail on the river?", "after": [answer]}
    chat["steps"][0]["metadata"] = {"branches": [hidden, {"text": "Which fish live in the river?", "after": None}],
                                    "branch": 1}
    return chat


def import_chats(tmp_path, data) -> None:
    files = []
    for chat in (chat_file(CHAT_ID, "Which birds live by the sea?",
                           {"kind": "answer", "footer": STATS, "versions": VERSIONS, "shown": 0},
                           VERSIONS[0]["text"] + STATS),
                 chat_file(OTHER_ID, "Name a river.", {"kind": "answer"}, "The Loire."), branched_chat()):
        path = tmp_path / f"{chat['id']}.json"
        path.write_text(json.dumps(chat), encoding="utf-8")
        files.append(str(path))
    done = subprocess.run([sys.executable, "launch.py", "import", *files, "--data-dir", str(data)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr


def place(page, shown: int, count: int):
    button = page.get_by_role("button", name=f"Version {shown}/{count}", exact=True)
    button.wait_for(timeout=60000)
    return button


def answer_shows(page, text: str) -> None:
    page.wait_for_function("t => { const m = document.querySelector('[data-step-type=\"assistant_message\"]');"
                           " return !!m && m.innerText.includes(t); }", arg=text, timeout=60000)


def search_and_open(page, app, word: str, chat: str) -> None:
    """Search the chats for ``word`` in the page's search dialog; ``chat`` is the one listed, and is opened."""
    page.goto(app.url + "/")
    page.wait_for_selector("#chat-input", timeout=30000)
    open_sidebar(page)
    page.locator("#search-chats-button").first.click()
    page.get_by_role("option").first.wait_for(timeout=30000)  # the recent chats, listed first
    page.get_by_placeholder("Search conversations").fill(word)
    listed = "() => [...document.querySelectorAll('[role=option]')].map(e => (e.dataset.value || '').slice(-36))"
    page.wait_for_function(f"want => JSON.stringify(({listed})()) === JSON.stringify(want)", arg=[chat],
                           timeout=30000)
    page.get_by_role("option").first.click()
    page.wait_for_function(f"() => location.pathname.endsWith('/thread/{chat}')", timeout=30000)


def step_shows(page, step_type: str, text: str) -> None:
    """Until the chat's only message of ``step_type`` shows ``text``."""
    page.wait_for_function("([kind, t]) => { const m = document.querySelectorAll(`[data-step-type=\"${kind}\"]`);"
                           " return m.length === 1 && m[0].innerText.includes(t); }", arg=[step_type, text],
                           timeout=60000)


def branch_place(page, shown: int, count: int):
    """The question's place among its branches ("Branch 1/2"), once the page shows it."""
    place = page.locator(".branch-place", has_text=f"Branch {shown}/{count}")
    place.wait_for(timeout=60000)
    return place


def test_search_for_a_word_of_a_hidden_version_opens_the_chat_on_that_version(browser, tiny_model_dir, tmp_path):
    data = tmp_path / "data"
    for folder in (data, tmp_path / "app"):
        folder.mkdir()
    import_chats(tmp_path, data)
    with running_app(tiny_model_dir, tmp_path / "app", "--data-dir", str(data)) as app:
        page = open_chat(browser, app, f"/thread/{CHAT_ID}")
        place(page, 1, 3)  # as it was kept: the first version shown
        answer_shows(page, "Seabirds nest on cliffs.")

        search_and_open(page, app, "Cormorant", CHAT_ID)
        place(page, 3, 3)  # opened on the version holding the word, with its arrows
        answer_shows(page, "A cormorant dries its wings on the rocks.")
        assert page.get_by_role("button", name="◀", exact=True).count() == 1
        assert page.locator(ANSWERS).count() == 1
        page.context.close()

        # Opened again by its address, no search: the version the search showed is the one kept.
        page = open_chat(browser, app, f"/thread/{CHAT_ID}")
        place(page, 3, 3)
        answer_shows(page, "A cormorant dries its wings")
        page.context.close()


def test_search_for_a_word_of_a_hidden_branch_opens_the_chat_on_that_branch(browser, tiny_model_dir, tmp_path):
    data = tmp_path / "data"
    for folder in (data, tmp_path / "app"):
        folder.mkdir()
    import_chats(tmp_path, data)
    with running_app(tiny_model_dir, tmp_path / "app", "--data-dir", str(data)) as app:
        page = open_chat(browser, app, f"/thread/{BRANCHED_ID}")
        branch_place(page, 2, 2)  # as it was kept: the edited question shown, with its arrows
        step_shows(page, "assistant_message", "Trout and pike.")

        search_and_open(page, app, "Lighthouse", BRANCHED_ID)
        branch_place(page, 1, 2)  # opened on the branch holding the word, with its arrows
        step_shows(page, "user_message", "Which boats sail on the river?")
        step_shows(page, "assistant_message", "A lighthouse keeper rows a barge.")
        assert page.get_by_role("button", name="Next branch", exact=True).count() == 1
        page.context.close()

        # Opened again by its address, no search: the branch the search showed is kept, and switches back.
        page = open_chat(browser, app, f"/thread/{BRANCHED_ID}")
        branch_place(page, 1, 2)
        step_shows(page, "assistant_message", "A lighthouse keeper rows a barge.")
        page.get_by_role("button", name="Next branch", exact=True).click()
        branch_place(page, 2, 2)
        step_shows(page, "user_message", "Which fish live in the river?")
        step_shows(page, "assistant_message", "Trout and pike.")
        page.context.close()
