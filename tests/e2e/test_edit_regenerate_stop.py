"""Edit, regenerate, stop and closing the tab, driven in Chromium and checked on the engine's side.

The prompt the engine got is read two ways: the answer's stats line on the page, and vLLM's own
``vllm:prompt_tokens_total`` counter (the engine counts what it was sent, whatever the page says).
"""
import time
from collections.abc import Callable

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeoutError
from playwright.sync_api import expect

from tests.support.app_process import get
from tests.support.chat_socket import socket_connect
from tests.support.metrics import generated_tokens, metric_value, running_requests
from tests.support.page import STATS_EN, message_id, message_with_id, send, set_max_answer_tokens, wait_stats

pytestmark = pytest.mark.timeout(300)


def engine_prompt_tokens(app) -> float:
    return metric_value(get(app.url + "/metrics")[1], "vllm:prompt_tokens_total")


def user_messages(page):
    return page.locator('[data-step-type="user_message"]')


def edit_message(page, index: int, text: str) -> None:
    message = user_messages(page).nth(index)
    message.hover()
    message.locator(".edit-message").click()
    page.fill("#edit-chat-input", text)
    page.click(".confirm-edit")


def test_editing_a_message_drops_the_turns_after_it_from_the_prompt(page_for, served_app):
    """Two turns, then edit the first: the model must see one turn (it once saw all three: 121 tokens)."""
    page = page_for()
    send(page, "What is the sea?")
    first_prompt = int(wait_stats(page, 1)[0])
    send(page, "And the sky?")
    second_prompt = int(wait_stats(page, 2)[0])
    assert second_prompt > first_prompt
    before = engine_prompt_tokens(served_app)
    edit_message(page, 0, "What is the sea?")
    # The page now holds one question and one answer; the new answer's prompt is the first one again.
    deadline = time.time() + 60
    while time.time() < deadline and (user_messages(page).count() != 1
                                      or not STATS_EN.findall(page.inner_text("body"))):
        time.sleep(0.2)
    edited_prompt = int(wait_stats(page, 1)[0])
    assert user_messages(page).count() == 1
    assert edited_prompt == first_prompt, (first_prompt, second_prompt, edited_prompt)
    deadline = time.time() + 10
    while engine_prompt_tokens(served_app) - before < edited_prompt and time.time() < deadline:
        time.sleep(0.1)
    assert engine_prompt_tokens(served_app) - before == edited_prompt  # what the engine was sent


def test_regenerate_writes_the_last_answer_anew_in_the_chat_and_the_prompt(page_for, served_app):
    page = page_for()
    send(page, "Tell me about rivers.")
    prompt = int(wait_stats(page, 1)[0])
    send(page, "Shorter, please.")
    second_prompt = int(wait_stats(page, 2)[0])
    before = engine_prompt_tokens(served_app)
    regenerate = page.get_by_role("button", name="Regenerate")
    assert regenerate.count() == 1  # only the newest answer offers it
    old_answer = message_id(page.locator('[data-step-type="assistant_message"]').last)
    regenerate.click()
    # The new answer is written into the same message, the old one kept as its first version (issue #32 item 1):
    # the place between its arrows comes when the new answer has ended.
    page.get_by_role("button", name="Version 2/2", exact=True).wait_for(timeout=60000)
    assert message_id(page.locator('[data-step-type="assistant_message"]').last) == old_answer
    again = int(wait_stats(page, 2)[0])
    deadline = time.time() + 10
    while engine_prompt_tokens(served_app) - before < second_prompt and time.time() < deadline:
        time.sleep(0.1)
    # The old second answer is not shown and was not part of the new prompt.
    assert again == second_prompt and engine_prompt_tokens(served_app) - before == second_prompt
    assert len(STATS_EN.findall(page.inner_text("body"))) == 2 and user_messages(page).count() == 2
    assert prompt < second_prompt


def finished_requests(app) -> float:
    return metric_value(get(app.url + "/metrics")[1], "vllm:request_success_total")


def _generating(app, finished_before: float) -> bool:
    """Wait until the engine works on the new answer; False if a request ended by itself first (read on the
    engine's side: the page may still show the answer an edit is removing)."""
    deadline = time.time() + 30
    while time.time() < deadline:
        if running_requests(app) >= 1:
            return True
        if finished_requests(app) > finished_before:
            return False
        time.sleep(0.05)
    return False


def _assert_engine_stopped(app) -> None:
    deadline = time.time() + 10
    while running_requests(app) and time.time() < deadline:
        time.sleep(0.1)
    assert running_requests(app) == 0, "the engine kept generating"
    tokens = generated_tokens(app)
    time.sleep(1.0)
    assert generated_tokens(app) - tokens < 50


def _stop_mid_answer(page, app, ask: Callable[[int], None],
                     while_generating: Callable[[], None] = lambda: None) -> None:
    """``ask(attempt)`` starts an answer, and Stop is pressed while the engine writes it (``while_generating`` runs
    first). The random tiny model sometimes ends early on EOS, and on a quiet machine a whole answer takes ~2 s: an
    answer that ended by itself before Stop reached it counts as finished in the engine (a stopped one does not),
    and then it is asked again."""
    for attempt in range(8):
        finished = finished_requests(app)
        ask(attempt)
        if _generating(app, finished):
            while_generating()
            try:
                page.locator("#stop-button").dispatch_event("click", timeout=5000)
            except PlaywrightTimeoutError:  # the answer ended between the check and the click
                pass
            _assert_engine_stopped(app)
            if finished_requests(app) == finished:  # stopped mid-answer
                return
        page.locator("#chat-submit").wait_for(timeout=30000)  # the answer is over: the composer is back
    pytest.fail("no answer was still running to stop")


def test_stop_after_an_edit_stops_the_engine(page_for, served_app):
    """Chainlit's edit path does not register the task Stop cancels; the app does."""
    page = page_for()
    set_max_answer_tokens(page, "End")
    send(page, "Hello.")
    wait_stats(page, 1)
    _stop_mid_answer(page, served_app, lambda attempt: edit_message(
        page, 0, f"Write a very long story about ships, take {attempt}."))
    # The stopped answer says so itself; Chainlit's separate "Task manually stopped." message is gone.
    page.locator('[data-step-type="assistant_message"]', has_text="stopped by you").wait_for(timeout=15000)
    page.wait_for_function("() => !document.body.innerText.includes('Task manually stopped.')", timeout=15000)
    assert not STATS_EN.findall(page.inner_text("body")), "a stopped answer must not look finished"


def test_a_stopped_answer_takes_the_buttons_and_the_previous_answer_never_offers_them_again(page_for, served_app):
    """A Regenerate left under the previous answer (the new answer streamed, then was stopped) took the later
    question and its answer out of the chat and the database when pressed. Now the previous answer's buttons leave
    when the next question is asked, the stopped answer gets them, and regenerating it keeps both questions."""
    page = page_for()
    send(page, "Hello.")
    wait_stats(page, 1)
    answers = page.locator('[data-step-type="assistant_message"]')
    expect(answers.first.get_by_role("button", name="Regenerate")).to_have_count(1)
    set_max_answer_tokens(page, "End")
    asked_after = {"index": 0}  # the newest message when the question was asked

    def ask(attempt: int) -> None:
        asked_after["index"] = answers.count() - 1
        send(page, f"Write a very long story about ships, take {attempt}.")

    def while_it_streams() -> None:
        # The new answer is on the page, so its first words came: Stop keeps it as a stopped answer (stopped before
        # them, it would be only a line). The answer before it offers no Regenerate now (pressed, it wrote over the
        # new one or took it out of the chat).
        page.wait_for_function("n => document.querySelectorAll('[data-step-type=\"assistant_message\"]').length >= n",
                               arg=asked_after["index"] + 2, timeout=30000)
        expect(answers.nth(asked_after["index"]).get_by_role("button", name="Regenerate")).to_have_count(0)

    _stop_mid_answer(page, served_app, ask, while_it_streams)
    answers.filter(has_text="stopped by you").last.wait_for(timeout=15000)
    # by its id: the regenerated version shown below no longer says "stopped by you"
    stopped = message_with_id(page, message_id(answers.filter(has_text="stopped by you").last))
    expect(stopped.get_by_role("button", name="Regenerate")).to_have_count(1)
    expect(page.get_by_role("button", name="Regenerate")).to_have_count(1)  # the stopped answer's, no other
    asked = user_messages(page).count()
    before = engine_prompt_tokens(served_app)
    stopped.get_by_role("button", name="Regenerate").click()
    expect(stopped.get_by_role("button", name="Version 2/2", exact=True)).to_have_count(1, timeout=120000)
    prompt = int(STATS_EN.findall(stopped.inner_text())[0][0])
    deadline = time.time() + 10
    while engine_prompt_tokens(served_app) - before < prompt and time.time() < deadline:
        time.sleep(0.1)
    assert engine_prompt_tokens(served_app) - before == prompt  # the chat up to the stopped answer's question
    assert user_messages(page).count() == asked
    page.reload()  # the chat as it was kept: every question is still there
    expect(user_messages(page)).to_have_count(asked, timeout=30000)


def test_closing_the_tab_stops_its_answer_in_the_engine(page_for, served_app):
    """Nobody is left to read it: the engine request is aborted (20 such answers once ran to the end)."""
    for attempt in range(8):  # a fresh chat each time: an answer that ended by itself first does not count
        page = page_for()
        set_max_answer_tokens(page, "End")
        finished = finished_requests(served_app)
        send(page, f"Write a very long story about the moon, part {attempt}.")
        generating = _generating(served_app, finished)
        page.context.close()
        _assert_engine_stopped(served_app)
        if generating and finished_requests(served_app) == finished:  # aborted, not finished
            break
    else:
        pytest.fail("no answer was still running when the tab closed")


def test_one_chat_cannot_queue_more_than_three_answers(served_app):
    """A client (not the page: Chainlit's composer sends one at a time) that pushes 8 messages down one
    chat's socket gets 3 answers running or waiting and a notice for the rest; other users keep their
    places (one session once queued 60, and another user saw "48 ahead of you")."""
    import asyncio
    import concurrent.futures
    import uuid

    import httpx

    async def flood() -> tuple[list[str], int]:
        client = httpx.Client(base_url=served_app.url, timeout=30)
        client.get("/")  # the page logs the local user in (a cookie): the socket wants that login
        events: list = []
        thread_id = str(uuid.uuid4())
        sio = await socket_connect(served_app, client, thread_id, events)
        await asyncio.sleep(1)
        for i in range(8):
            await sio.emit("client_message", {"message": {
                "id": str(uuid.uuid4()), "threadId": thread_id, "name": "local", "type": "user_message",
                "output": f"Write a very long story, number {i}.",
                "createdAt": time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime())}, "fileReferences": []})
        await asyncio.sleep(3)
        metrics = get(served_app.url + "/metrics")[1]
        in_flight = int(metric_value(metrics, "ernie_chat_active_requests")
                        + metric_value(metrics, "ernie_chat_queued_requests"))
        await sio.disconnect()  # closing the socket stops this chat's answers (checked below)
        client.close()
        shown = [data.get("output") or "" for name, data in events if name == "new_message" and isinstance(data, dict)]
        return shown, in_flight

    # Playwright's sync API holds an event loop in this thread: the socket client gets a thread of its own.
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        notices, in_flight = pool.submit(asyncio.run, flood()).result(timeout=240)
    refused = [n for n in notices if "already has 3 answers" in n]
    assert len(refused) == 5 and in_flight <= 3, (len(refused), in_flight)
    _assert_engine_stopped(served_app)
