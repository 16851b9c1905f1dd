"""Login rules: growing delays per client, logout ends the token, a strong token."""
import subprocess
import sys

import pytest
from starlette.datastructures import Headers

from app.cli import parse_command
from app.errors import SettingsError
from app.guards.login import FailedLogins, RevokedTokens, _without_login, request_login_token
from tests.conftest import ROOT


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def test_failed_logins_wait_doubles_after_the_free_ones():
    clock = Clock()
    guard = FailedLogins(free=5, max_delay=300, clock=clock)
    for _ in range(5):
        assert guard.wait_left("1.2.3.4") == 0
        guard.failed("1.2.3.4")
    waits = []
    for _ in range(10):
        waits.append(guard.wait_left("1.2.3.4"))
        clock.now += waits[-1]
        guard.failed("1.2.3.4")
    assert waits == [1, 2, 4, 8, 16, 32, 64, 128, 256, 300]
    assert guard.wait_left("5.6.7.8") == 0  # per client
    guard.succeeded("1.2.3.4")
    assert guard.wait_left("1.2.3.4") == 0


def test_two_thousand_guesses_take_days_not_seconds():
    """Issue 16: 2,000 wrong passwords in 3.4 s. Now: the sum of the enforced waits."""
    guard = FailedLogins()
    total = sum(guard.delay_after(n) for n in range(2000))
    assert total > 5 * 86400


def test_failure_table_is_bounded():
    guard = FailedLogins(max_clients=100)
    for n in range(1000):
        guard.failed(f"10.0.{n // 256}.{n % 256}")
    assert len(guard._clients) == 100


def test_revoked_token_until_it_expires():
    clock = Clock()
    revoked = RevokedTokens(lifetime=60, clock=clock)
    revoked.revoke("not-a-jwt")
    assert revoked.is_revoked("not-a-jwt") and not revoked.is_revoked("other")
    clock.now += 61
    assert not revoked.is_revoked("not-a-jwt")


def test_login_cookie_read_and_removed_whole_or_chunked():
    headers = Headers(raw=[(b"host", b"x"), (b"cookie", b"a=1; access_token=TOKEN; b=2"),
                           (b"authorization", b"Bearer t")])
    assert request_login_token(headers) == "TOKEN"
    assert _without_login(headers) == [(b"host", b"x"), (b"cookie", b"a=1; b=2")]
    assert request_login_token(Headers(raw=[(b"cookie", b"access_token_0=AB; access_token_1=CD")])) == "ABCD"


@pytest.mark.parametrize("token", ["short", "x" * 15])
def test_short_token_refused_without_echoing_it(token):
    with pytest.raises(SettingsError) as info:
        parse_command(["--auth-token", token], env_file=None)
    message = str(info.value)
    assert "--auth-token" in message and "at least 16" in message and f"'{token}'" not in message
    assert "\n" not in message


def test_token_file_is_read_and_checked(tmp_path):
    good = tmp_path / "token"
    good.write_text("s3cret-s3cret-s3cret\n")
    assert parse_command(["--auth-token-file", str(good)], env_file=None).settings.server.auth_token \
        .get_secret_value() == "s3cret-s3cret-s3cret"
    good.write_text("abc\n")
    with pytest.raises(SettingsError, match="--auth-token-file .* the token is 3 characters"):
        parse_command(["--auth-token-file", str(good)], env_file=None)
    with pytest.raises(SettingsError, match="cannot read it"):
        parse_command(["--auth-token-file", str(tmp_path / "missing")], env_file=None)


def test_token_flag_warns_that_ps_shows_it(tmp_path):
    code = ("from app.cli import parse_command; "
            "parse_command(['--auth-token', 'a-long-enough-token-123', '--print-config'], env_file=None)")
    flag = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert "warning: --auth-token on the command line is visible" in flag.stderr
    assert "--auth-token-file" in flag.stderr
    env = subprocess.run([sys.executable, "-c", code.replace("'--auth-token', 'a-long-enough-token-123', ", "")],
                         cwd=ROOT, capture_output=True, text=True,
                         env={"ERNIE_CHAT_AUTH_TOKEN": "a-long-enough-token-123", "PATH": "/usr/bin"})
    assert env.returncode == 0 and "warning" not in env.stderr


def test_login_lifetime_setting():
    settings = parse_command(["--login-lifetime", "600"], env_file=None).settings.server
    assert settings.login_lifetime == 600
    with pytest.raises(SettingsError, match="--login-lifetime"):
        parse_command(["--login-lifetime", "5"], env_file=None)


class CheckingApp:
    """Chainlit's /login as the guard sees it: each request is 'hashing' until ``release`` is set, then 401."""

    def __init__(self):
        import asyncio

        self.release = asyncio.Event()
        self.started = 0

    async def __call__(self, scope, receive, send):
        self.started += 1
        await self.release.wait()
        await send({"type": "http.response.start", "status": 401, "headers": []})
        await send({"type": "http.response.body", "body": b""})


def login_guard(app, **options):
    from app.guards.login import LoginGuard

    return LoginGuard(app, policy=None, failures=FailedLogins(), revoked=RevokedTokens(60), **options)


async def post_login(guard, client: str) -> int:
    sent = []

    async def receive():
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message):
        sent.append(message)

    scope = {"type": "http", "method": "POST", "path": "/login", "headers": [], "client": (client, 5000)}
    await guard(scope, receive, send)
    return next(m["status"] for m in sent if m["type"] == "http.response.start")


def test_logins_sent_at_once_from_one_client_are_counted_before_any_is_checked():
    """N3: counted only once they failed, 200 sent at once all passed the count and were hashed."""
    import asyncio

    async def run():
        app = CheckingApp()
        guard = login_guard(app)
        tries = [asyncio.create_task(post_login(guard, "10.0.0.1")) for _ in range(50)]
        await asyncio.sleep(0.05)
        checking = app.started
        app.release.set()
        return checking, sorted(await asyncio.gather(*tries))

    checking, statuses = asyncio.run(run())
    assert checking == 5 and statuses == [401] * 5 + [429] * 45


def test_logins_being_checked_at_once_are_capped_for_all_clients_without_counting_against_them():
    import asyncio

    async def run():
        app = CheckingApp()
        guard = login_guard(app, max_at_once=3)
        tries = [asyncio.create_task(post_login(guard, f"10.0.1.{n}")) for n in range(10)]
        await asyncio.sleep(0.05)
        checking = app.started
        app.release.set()
        statuses = sorted(await asyncio.gather(*tries))
        return checking, statuses, [guard.failures.wait_left(f"10.0.1.{n}") for n in range(10)]

    checking, statuses, waits = asyncio.run(run())
    assert checking == 3 and statuses == [401] * 3 + [429] * 7
    assert waits == [0] * 10  # one failure each at most: the refused ones were never tried


def test_secrets_are_hashed_on_one_thread_at_the_lowest_cpu_priority():
    import os
    import threading

    from app.guards.identity import login_checks

    def nice_and_thread() -> tuple[int, int]:
        return os.getpriority(os.PRIO_PROCESS, threading.get_native_id()), threading.get_native_id()

    before = nice_and_thread()[0]
    checks = login_checks()
    try:
        seen = {checks.submit(nice_and_thread).result() for _ in range(5)}
        assert len(seen) == 1 and next(iter(seen))[0] == 19
        assert nice_and_thread()[0] == before  # the thread that made it keeps its own
    finally:
        checks.shutdown()


@pytest.mark.parametrize("value, kept", [("", ""), (" 127.0.0.1 , 10.0.0.0/8", "127.0.0.1,10.0.0.0/8"), ("*", "*"),
                                         ("::1", "::1")])
def test_forwarded_allow_ips_takes_addresses_and_networks(value, kept):
    from app.settings import ServerSettings

    settings = ServerSettings(forwarded_allow_ips=value)
    assert settings.forwarded_allow_ips == kept and settings.proxies_trusted is bool(kept)


def test_forwarded_allow_ips_refuses_a_name_in_one_line_naming_the_flag():
    with pytest.raises(SettingsError, match=r"--forwarded-allow-ips .* 'localhost' is not an IP address or network"):
        parse_command(["--forwarded-allow-ips", "localhost"])


def test_a_refusal_for_too_many_failures_is_held_before_it_is_answered():
    """A script that asks again on every 429 got ~350 refusals a second out of the app (bench/load_run.py): the
    refusal now comes after up to a second (at most the client's wait), so it asks about once a second."""
    import asyncio
    import time

    async def run():
        app = CheckingApp()
        app.release.set()
        guard = login_guard(app, refusal_hold_s=0.3)
        for _ in range(5):  # the free tries, each checked and failed
            assert await post_login(guard, "10.0.2.1") == 401
        started = time.monotonic()
        status = await post_login(guard, "10.0.2.1")
        return status, time.monotonic() - started

    status, seconds = asyncio.run(run())
    assert status == 429 and 0.3 <= seconds < 1.0
