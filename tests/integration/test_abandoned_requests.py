"""A `/v1` request whose client has gone stops costing anything: it is aborted in the engine, streamed or not
(issue 36, N10: 40 non-streamed clients that gave up after 1 s held all 16 slots for ~50 s, and a question from
the page waited 30.5 s behind them)."""
import asyncio
import time
import uuid

import httpx
import pytest

from tests.support.app_process import get, running_app
from tests.support.chat_socket import answer_over_socket
from tests.support.metrics import metric_value

pytestmark = pytest.mark.timeout(300)
SLOTS = 4
# Greedy answers of the random tiny model never reach its end token (tests/integration/test_adversary_passes.py),
# so each request runs its whole 4,000 tokens unless it is aborted: twice the slots of them keep the engine busy
# for well over 10 s on 2 cores.
LONG = {"messages": [{"role": "user", "content": "Tell me a very long story."}], "max_tokens": 4000,
        "temperature": 0}


def metric(app, name: str) -> float:
    return metric_value(get(app.url + "/metrics")[1], name)


async def until(check, what: str, seconds: float) -> float:
    """Seconds until ``check()`` holds (polled off the loop); fails naming ``what`` past ``seconds``."""
    started = time.monotonic()
    while not await asyncio.to_thread(check):
        assert time.monotonic() - started < seconds, f"{what}: not within {seconds} s"
        await asyncio.sleep(0.05)
    return time.monotonic() - started


async def abandoned_requests_then_a_page_question(app, stream: bool) -> tuple[float, float]:
    """2 x SLOTS long requests, from clients that hang up once every slot is taken and the rest wait; then how
    long vLLM takes to have no request running, and how long a question over the page's socket takes."""
    async def ask() -> None:
        async with httpx.AsyncClient(base_url=app.url, timeout=300) as client:
            if stream:
                async with client.stream("POST", "/v1/chat/completions", json={**LONG, "stream": True}) as r:
                    async for _ in r.aiter_lines():
                        pass
            else:
                await client.post("/v1/chat/completions", json=LONG)

    clients = [asyncio.create_task(ask()) for _ in range(2 * SLOTS)]
    try:
        await until(lambda: metric(app, "vllm:num_requests_running") == SLOTS
                    and metric(app, "ernie_chat_queued_requests") == SLOTS, "every slot taken, the rest queued", 60)
        assert not any(c.done() for c in clients), [c.exception() for c in clients if c.done()]
    finally:
        for c in clients:  # the clients give up: their connections close
            c.cancel()
        await asyncio.gather(*clients, return_exceptions=True)
    idle = await until(lambda: metric(app, "vllm:num_requests_running") == 0
                       and metric(app, "ernie_chat_queued_requests") == 0, "the engine idle", 10)
    page = httpx.Client(base_url=app.url, timeout=30)
    page.get("/")  # the page's login cookie for the local user
    try:
        seconds, _ = await answer_over_socket(app, page, str(uuid.uuid4()), "hello", [])
    finally:
        page.close()
    return idle, seconds


@pytest.fixture(scope="module")
def app(tiny_model_dir, tmp_path_factory):
    with running_app(tiny_model_dir, tmp_path_factory.mktemp("abandoned"), "--max-concurrent-chats", str(SLOTS),
                     "--max-tokens", "16") as launched:
        yield launched


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_requests_whose_clients_hung_up_are_aborted_and_the_page_is_answered_at_once(app, stream):
    idle, seconds = asyncio.run(abandoned_requests_then_a_page_question(app, stream))
    print(f"\n{2 * SLOTS} abandoned {'streamed' if stream else 'whole'} requests: engine idle after {idle:.2f} s, "
          f"a page question answered in {seconds:.2f} s")
    assert idle < 3 and seconds < 10  # 30.5 s on f9ee3fd with 16 slots and 40 clients
    assert metric(app, "ernie_chat_active_requests") == 0  # the app's own count agrees
