"""Issue 16 on a launched app with --auth-token: the login rules, body limits before reading, deep JSON,
every error in the log file, and a page on another port of the same host that holds the user's cookie."""
import itertools
import json
import math
import select
import socket
import subprocess
import sys
import time
import urllib.request

import psutil
import pytest

from tests.attacker import SOCKET_PROBE_JS, attacker_site
from tests.support.app_process import ROOT, get, running_app
from tests.support.page import CHROMIUM_ARGS

pytestmark = pytest.mark.timeout(600)
TOKEN = "security-test-token-0123456789"
LIFETIME = 600


@pytest.fixture(scope="module")
def app(tiny_model_dir, tmp_path_factory):
    with running_app(tiny_model_dir, tmp_path_factory.mktemp("security"), "--login-lifetime", str(LIFETIME),
                     "--max-body-bytes", str(1 << 20)) as launched:
        yield launched


@pytest.fixture(scope="module", autouse=True)
def token_in_env(monkeypatch_module):
    monkeypatch_module.setenv("ERNIE_CHAT_AUTH_TOKEN", TOKEN)  # as the docs advise: not on the command line


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as patch:
        yield patch


def login(url, password, client_ip=None):
    request = urllib.request.Request(url + "/login", data=f"username=me&password={password}".encode(),
                                     headers={"Content-Type": "application/x-www-form-urlencoded"})
    try:
        with urllib.request.urlopen(request, timeout=10) as r:
            return r.status, r.headers.get_all("set-cookie") or [], {}
    except urllib.error.HTTPError as err:
        return err.code, [], dict(err.headers)


def login_when_allowed(url, password):
    """Log in, waiting out a rate-limit delay another test left behind."""
    status, set_cookies, headers = login(url, password)
    if status == 429:
        time.sleep(int(headers["retry-after"]) + 0.2)
        status, set_cookies, headers = login(url, password)
    return status, set_cookies, headers


def cookie_of(set_cookies):
    return next(c.split(";", 1)[0] for c in set_cookies if c.startswith("access_token="))


def test_failed_logins_slow_down_and_then_the_right_token_works(app):
    started = time.time()
    codes = [login(app.url, "wrong")[0] for _ in range(40)]
    checked = codes.count(401)
    # Issue 16: 2,000 guesses ran in 3.4 s. Now 5 are checked, then one more per doubling wait (1 s, 2 s,
    # 4 s ...) that has passed: on a busy machine a request can take longer than the first waits.
    assert codes[:5] == [401] * 5 and set(codes) == {401, 429}
    assert checked <= 5 + math.log2(time.time() - started + 1) + 1, codes
    # Even the right token waits its turn: sent while the address still has seconds to wait. A refusal is held up to
    # a second before it is answered (app/guards/login.py REFUSAL_HOLD_S), so the 40 tries took that long each, and
    # the wait may have just run out: ask until a refusal leaves at least two seconds after its hold.
    for _ in range(60):
        status, _, headers = login(app.url, "wrong")
        if status == 429 and int(headers["retry-after"]) >= 3:
            break
    assert status == 429 and int(headers["retry-after"]) >= 3, (status, dict(headers))
    status, _, headers = login(app.url, TOKEN)
    assert status == 429 and int(headers["retry-after"]) >= 1
    time.sleep(int(headers["retry-after"]) + 0.2)
    assert login(app.url, TOKEN)[0] == 200


def test_logout_ends_the_session_and_the_login_has_the_set_lifetime(app):
    status, set_cookies, _ = login_when_allowed(app.url, TOKEN)
    assert status == 200
    assert any(f"Max-Age={LIFETIME}" in c for c in set_cookies), set_cookies
    cookie = {"Cookie": cookie_of(set_cookies)}
    assert get(app.url + "/user", headers=cookie)[0] == 200
    request = urllib.request.Request(app.url + "/logout", data=b"", headers=cookie, method="POST")
    with urllib.request.urlopen(request, timeout=10) as r:
        assert r.status == 200
    assert get(app.url + "/user", headers=cookie)[0] == 401  # the old cookie no longer works
    # Two logins at once (two devices) are two sessions: ending one leaves the other.
    first, second = (cookie_of(login_when_allowed(app.url, TOKEN)[1]) for _ in range(2))
    request = urllib.request.Request(app.url + "/logout", data=b"", headers={"Cookie": first}, method="POST")
    urllib.request.urlopen(request, timeout=10).close()
    assert get(app.url + "/user", headers={"Cookie": first})[0] == 401
    assert get(app.url + "/user", headers={"Cookie": second})[0] == 200


def test_short_token_is_refused_at_start(tiny_model_dir):
    result = subprocess.run([sys.executable, "launch.py", "--model", str(tiny_model_dir), "--auth-token", "short1"],
                            cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and "at least 16" in result.stderr and "short1" not in result.stderr


def raw_post(port, path, headers, body_chunks=(), chunked=False):
    """Send a request by hand; stop sending as soon as the server answers. Returns (status line, bytes sent)."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    head = [f"POST {path} HTTP/1.1", f"Host: 127.0.0.1:{port}", *headers,
            *(["Transfer-Encoding: chunked"] if chunked else []), "", ""]
    sock.sendall("\r\n".join(head).encode())
    sent = 0
    try:
        for chunk in body_chunks:
            if select.select([sock], [], [], 0)[0]:
                break  # answered already
            sock.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk) if chunked else chunk)
            sent += len(chunk)
    except (BrokenPipeError, ConnectionResetError):
        pass
    reply = sock.recv(65536).decode(errors="replace")
    sock.close()
    return reply.split("\r\n", 1)[0], sent


def rss(app):
    return psutil.Process(app.proc.pid).memory_info().rss


@pytest.mark.parametrize("path, content_type", [("/v1/chat/completions", "application/json"),
                                                ("/project/file?session_id=x", "multipart/form-data; boundary=b")])
def test_oversize_bodies_are_refused_before_they_are_read(app, path, content_type):
    before = rss(app)
    declared, sent = raw_post(app.port, path, [f"Content-Type: {content_type}", "Content-Length: 300000000",
                                               f"Authorization: Bearer {TOKEN}"])
    assert "413" in declared and sent == 0
    # A well-formed start (a multipart file part for the upload route), then 300 MB if it were all read.
    preamble = (b'--b\r\nContent-Disposition: form-data; name="file"; filename="a.txt"\r\n'
                b"Content-Type: text/plain\r\n\r\n" if "multipart" in content_type else b'{"messages": "')
    chunks = itertools.chain([preamble], (b"x" * 65536 for _ in range(4600)))
    status, sent = raw_post(app.port, path, [f"Content-Type: {content_type}", f"Authorization: Bearer {TOKEN}"],
                            chunks, chunked=True)
    assert "413" in status and sent < 50 * 2**20, (status, sent)
    assert rss(app) - before < 50 * 2**20  # issue 16: 709 -> 1,626 MB for one 300 MB body


def test_deeply_nested_json_is_a_one_line_400(app):
    body = ("[" * 100000 + "]" * 100000).encode()
    request = urllib.request.Request(app.url + "/v1/chat/completions", data=body, headers={
        "Content-Type": "application/json", "Authorization": f"Bearer {TOKEN}"})
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(request, timeout=30)
    message = json.loads(info.value.read())["error"]["message"]
    assert info.value.code == 400 and "recursion" in message and "\n" not in message


def test_chainlit_errors_and_500s_reach_the_log_file(app):
    _, set_cookies, _ = login_when_allowed(app.url, TOKEN)
    cookie = cookie_of(set_cookies)
    request = urllib.request.Request(app.url + "/project/element", method="PUT", data=b'{"sessionId": "nope", '
                                     b'"element": {}}', headers={"Content-Type": "application/json", "Cookie": cookie})
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(request, timeout=10)
    assert info.value.code == 500
    get(app.url + "/project/translations?language=xx-YY", headers={"Cookie": cookie})  # Chainlit logs a warning
    time.sleep(0.5)
    log = app.log_file.read_text()
    assert "unhandled error in http PUT /project/element" in log and "ValueError: Session not found" in log
    assert "WARNING chainlit: Translation file for xx-YY not found" in log


def test_page_on_another_port_cannot_chat_with_the_users_cookie(app):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p, attacker_site() as site:
        chromium = p.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        context = chromium.new_context()
        page = context.new_page()
        page.goto(app.url + "/healthz")
        # The user logs in: the cookie belongs to 127.0.0.1, which every port of the host shares.
        assert page.evaluate("""async ([url, token]) => (await fetch(url + '/login', {method: 'POST',
            body: new URLSearchParams({username: 'me', password: token})})).status""", [app.url, TOKEN]) == 200
        assert page.evaluate(SOCKET_PROBE_JS, app.url) == "connected"  # the app's own page chats
        page.goto(site.url + "/")
        assert page.evaluate(SOCKET_PROBE_JS, app.url) == "handshake failed"
        sent = page.evaluate("""async (url) => { try { await fetch(url + '/logout', {method: 'POST',
            mode: 'no-cors', credentials: 'include'}); } catch (e) {} return 'sent'; }""", app.url)
        assert sent == "sent"
        page.goto(app.url + "/healthz")
        assert page.evaluate(SOCKET_PROBE_JS, app.url) == "connected"  # the cross-site POST did nothing
        chromium.close()
