"""A closed tab's chat leaves the app's memory, and comes back from the database when the tab does (issue 36: the
load run's RSS stayed +17.4% over its start 120 s after, for the closed tabs' chats Chainlit keeps 600 s).

The tab comes back as the page does after a network blip: socket.io connects again with the same ``sessionId``,
and Chainlit gives the new socket the session it kept. The next question's prompt must be the one it would have been
had the tab never closed: the same count of prompt tokens as the same chat in a tab that stayed open (greedy
answers, so both chats answer alike)."""
from __future__ import annotations

import asyncio
import re
import time
import uuid
from pathlib import Path

import httpx
import pytest

from tests.support.app_process import running_app
from tests.support.chat_socket import answer_within, socket_connect, upload

pytestmark = pytest.mark.timeout(600)
# A report that fits the tiny model's context whole, twice over: the next prompt holds all of it or shows it missing,
# and a turn held twice is not hidden by the oldest turns being left out to fit.
REPORT = "\n".join(f"Lighthouse log {n}: the keeper saw {n * 7} ships pass the northern rocks." for n in range(12))
FIRST, SECOND = "What did the keeper see?", "And on the northern rocks?"


def prompt_tokens(answer: str) -> int:
    return int(re.search(r"prompt ([\d,]+) tokens", answer).group(1).replace(",", ""))


def text_of(answer: str) -> str:
    """What the model wrote, without the stats line (its times differ from run to run)."""
    return answer.split("`prompt ")[0]


async def ask(app, client: httpx.Client, sio, session_id: str, events: list, text: str,
              files: tuple[tuple[str, bytes], ...] = ()) -> str:
    """Send ``text`` down the tab's socket (with ``files`` uploaded to its session first); its finished answer."""
    events.clear()
    references = [{"id": upload(client, session_id, name, body)} for name, body in files]
    await sio.emit("client_message", {"message": {
        "id": str(uuid.uuid4()), "threadId": "", "type": "user_message", "name": "local", "output": text,
        "createdAt": time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime())}, "fileReferences": references})
    return await answer_within(events, 120)


async def until(done, within_s: float = 30) -> None:
    deadline = time.monotonic() + within_s
    while not done():
        assert time.monotonic() < deadline, f"not within {within_s} s"
        await asyncio.sleep(0.1)


def freed_line(log_file: Path, since: int) -> str:
    """The log's line that a closed tab's chat left memory, written after byte ``since``; waits for it."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with log_file.open("rb") as log:
            log.seek(since)
            found = [line for line in log.read().decode(errors="replace").splitlines()
                     if "of a closed tab" in line or "kept in memory" in line]
        if found:
            return found[0]
        time.sleep(0.2)
    raise AssertionError("the closed tab's chat was neither freed nor kept: no line in the log")


async def closed(app, sio) -> None:
    """Close the tab, and wait until its chat has left memory."""
    since = app.log_file.stat().st_size
    await sio.disconnect()
    assert "messages left memory" in await asyncio.to_thread(freed_line, app.log_file, since)


async def opened(app, client: httpx.Client, thread_id: str, session_id: str, events: list):
    """The tab's socket, connected as the page connects it: to a new chat (``thread_id`` ""), or on a chat's
    address, which Chainlit resumes and the page shows before anything is typed."""
    events.clear()
    sio = await socket_connect(app, client, thread_id, events, session_id=session_id)
    if thread_id:
        await until(lambda: any(name == "resume_thread" for name, _ in events))
    return sio


async def chat(app, client: httpx.Client, on_its_address: bool, closes: bool) -> tuple[str, str]:
    """Two questions, the first with the report, in a new chat's tab, or (``on_its_address``) the second in a tab
    opened on the chat's address afterwards; with ``closes``, the tab of the second closes before it and comes back
    to its session once its chat has left memory."""
    session_id, events = str(uuid.uuid4()), []
    sio = await opened(app, client, "", session_id, events)
    try:
        first = await ask(app, client, sio, session_id, events, FIRST, files=(("log.txt", REPORT.encode()),))
        thread_id = ""
        if on_its_address:
            thread_id = next(data["thread_id"] for name, data in events if name == "first_interaction")
            await closed(app, sio)
            session_id = str(uuid.uuid4())
            sio = await opened(app, client, thread_id, session_id, events)
        if closes:
            await closed(app, sio)
            sio = await opened(app, client, thread_id, session_id, events)
        return first, await ask(app, client, sio, session_id, events, SECOND)
    finally:
        await sio.disconnect()


@pytest.mark.parametrize("opened_on_its_address", [False, True], ids=["new-chat", "chat-address"])
def test_a_tab_back_after_its_chat_left_memory_asks_with_the_same_history_and_documents(
        tiny_model_dir, tmp_path, opened_on_its_address):
    with running_app(tiny_model_dir, tmp_path, "--max-tokens", "16", "--temperature", "0") as app:
        client = httpx.Client(base_url=app.url, timeout=120)
        client.get("/")  # the page's login cookie for the local user: chats are kept
        stayed = asyncio.run(chat(app, client, opened_on_its_address, closes=False))
        came_back = asyncio.run(chat(app, client, opened_on_its_address, closes=True))
        client.close()
    assert text_of(came_back[0]) == text_of(stayed[0])  # the same first answer: the second prompts start alike
    # The second prompt holds the report and the first turn: far more than the question alone.
    assert prompt_tokens(stayed[1]) > prompt_tokens(stayed[0]) + 10
    assert prompt_tokens(came_back[1]) == prompt_tokens(stayed[1]), (stayed, came_back)
