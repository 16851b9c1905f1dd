"""Issue 36, N3, on a launched app with a user: login guesses sent at once from one address, addresses claimed in
X-Forwarded-For, and a login flood from many addresses while another user chats. Loopback has a whole /8, so each
attacking address is a real source address (127.0.1.x), as many machines would be."""
from __future__ import annotations

import asyncio
import statistics
import time

import httpx
import pytest

from app.accounts import Accounts
from tests.support.app_process import running_app
from tests.support.chat_socket import answer_over_socket

pytestmark = pytest.mark.timeout(600)
SECRET = "alices-own-secret"
PROXY = "127.0.0.5"  # --forwarded-allow-ips: the one address whose X-Forwarded-For is believed


@pytest.fixture(scope="module")
def app(tiny_model_dir, tmp_path_factory):
    data = tmp_path_factory.mktemp("login-flood-chats")
    Accounts(data / "users.json").add("alice", SECRET)
    with running_app(tiny_model_dir, tmp_path_factory.mktemp("login-flood-run"), "--data-dir", str(data),
                     "--max-tokens", "16", "--forwarded-allow-ips", PROXY) as launched:
        yield launched


def client_from(app, address: str, **extra) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=app.url, timeout=120, limits=httpx.Limits(max_connections=400),
                             transport=httpx.AsyncHTTPTransport(local_address=address), **extra)


async def guesses(app, address: str, count: int, headers=lambda i: {}) -> list[int]:
    """``count`` wrong secrets for alice sent at once from ``address``; the status of each."""
    async with client_from(app, address) as client:
        answers = await asyncio.gather(*(client.post("/login", data={"username": "alice", "password": f"guess-{i}!"},
                                                     headers=headers(i)) for i in range(count)))
    return [answer.status_code for answer in answers]


def test_guesses_sent_at_once_from_one_address_are_counted_before_any_is_hashed(app):
    """200 wrong secrets at once from one address were all hashed (24 s): each was counted only once it failed."""
    started = time.monotonic()
    statuses = asyncio.run(guesses(app, "127.0.1.1", 200))
    seconds = time.monotonic() - started
    checked = statuses.count(401)
    # 5 free tries; a sixth may come in after the address's 1-s wait, as the 200 refusals are held up to a second
    # each and the client opens a connection for every one (on f9ee3fd 104 of 200 were checked).
    assert checked <= 6 and statuses.count(429) == 200 - checked, sorted(set(statuses))
    print(f"200 guesses at once from one address: {checked} checked, {statuses.count(429)} refused, {seconds:.1f} s")
    # Alice, from her own address, logs in at once.
    with httpx.Client(base_url=app.url, timeout=30) as alice:
        assert alice.post("/login", data={"username": "alice", "password": SECRET}).status_code == 200


def test_x_forwarded_for_is_believed_only_from_the_allowed_proxy(app):
    """From loopback, X-Forwarded-For was believed: 30 of 30 tries with made-up addresses were checked."""
    spoofed = asyncio.run(guesses(app, "127.0.1.2", 30, lambda i: {"X-Forwarded-For": f"10.9.0.{i}"}))
    assert spoofed.count(401) <= 5 and spoofed.count(429) == 30 - spoofed.count(401), spoofed
    # The proxy of --forwarded-allow-ips names its clients: each of them gets its own free tries.
    relayed = asyncio.run(guesses(app, PROXY, 5, lambda i: {"X-Forwarded-For": f"10.8.0.{i}"}))
    assert relayed == [401] * 5


def test_x_forwarded_proto_is_believed_only_from_the_allowed_proxy(app):
    """Behind nginx with HTTPS the page's origin is https://...: the socket's Origin check matches it only when the
    app believes the proxy's X-Forwarded-Proto (docs/deploy.md: --forwarded-allow-ips 127.0.0.1)."""
    host = app.url.removeprefix("http://")
    headers = {"Origin": f"https://{host}", "X-Forwarded-Proto": "https"}

    async def handshake(address: str) -> int:  # engine.io's first request, as the page opens the chat socket
        async with client_from(app, address) as client:
            return (await client.get("/ws/socket.io/", params={"EIO": "4", "transport": "polling"},
                                     headers=headers)).status_code

    assert asyncio.run(handshake(PROXY)) == 200
    assert asyncio.run(handshake("127.0.1.3")) == 403  # anyone else claiming https is not believed


async def flood(app, addresses: list[str], stop: asyncio.Event) -> int:
    """Wrong secrets from each address, four at a time each, until ``stop`` is set; how many were sent."""
    sent = 0

    async def one_address(address: str) -> None:
        nonlocal sent
        async with client_from(app, address) as client:
            async def worker() -> None:
                nonlocal sent
                while not stop.is_set():
                    await client.post("/login", data={"username": "alice", "password": "not-her-secret"})
                    sent += 1
            await asyncio.gather(*(worker() for _ in range(4)))

    await asyncio.gather(*(one_address(a) for a in addresses))
    return sent


def test_a_login_flood_from_many_addresses_does_not_slow_the_answers(app):
    """A 60-s login flood made every answer take 12.8-20.6 s instead of under 1.7 s: the hashes filled the thread
    pool the chat builds its prompts in and took the CPU from the engine. The flood lasts until the last answer."""
    with httpx.Client(base_url=app.url, timeout=30) as alice:
        assert alice.post("/login", data={"username": "alice", "password": SECRET}).status_code == 200

        async def answers(count: int) -> list[float]:
            return [(await answer_over_socket(app, alice, f"flood-{time.monotonic()}", "hello", []))[0]
                    for _ in range(count)]

        async def during_flood() -> tuple[list[float], int]:
            stop = asyncio.Event()
            flooding = asyncio.create_task(flood(app, [f"127.0.2.{i}" for i in range(1, 21)], stop))
            await asyncio.sleep(3)  # the flood is under way, and lasts until the last answer is in
            timed = await answers(5)
            stop.set()
            return timed, await flooding

        calm = asyncio.run(answers(5))
        flooded, sent = asyncio.run(during_flood())
    print(f"answer seconds without a flood {[round(s, 2) for s in calm]}, during a flood of {sent} logins from "
          f"20 addresses {[round(s, 2) for s in flooded]}")
    # f9ee3fd here: 5.1 to 8.9 s each (median 6.6 s) against 0.1 s; now 0.5-1.9 s over three runs on this shared 2-core
    # machine, the flood's own HTTP load included (the attack pass saw 12.8-20.6 s against under 1.7 s).
    assert statistics.median(flooded) <= max(3.0, 5 * statistics.median(calm)), (calm, flooded)
