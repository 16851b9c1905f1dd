"""The Host / Origin / content-type / size rules (issue 16 item 2-3), and the ASGI guard on a bare app."""
import asyncio

import pytest
from starlette.datastructures import Headers

from app.guards.web import CONTENT_SECURITY_POLICY, GuardPolicy, WebGuard, host_name

LOCAL = GuardPolicy(bound_host="127.0.0.1", max_body_bytes=1000)


@pytest.mark.parametrize("header, name", [("Example.COM.:8000", "example.com"), ("[::1]:8000", "::1"),
                                          ("127.0.0.1", "127.0.0.1"), ("::1", "::1")])
def test_host_name(header, name):
    assert host_name(header) == name


@pytest.mark.parametrize("policy, host, allowed", [
    (LOCAL, "127.0.0.1:8000", True),
    (LOCAL, "localhost:8000", True),
    (LOCAL, "[::1]:8000", True),
    (LOCAL, "evil.test:8000", False),  # DNS rebinding: evil.test resolved to 127.0.0.1
    (LOCAL, "", False),
    (GuardPolicy(bound_host="127.0.0.1", allowed_hosts=("chat.example.com",)), "chat.example.com", True),
    (GuardPolicy(bound_host="127.0.0.1", allowed_hosts=("*",)), "anything.test", True),
    (GuardPolicy(bound_host="10.1.2.3"), "10.1.2.3:8000", True),
    (GuardPolicy(bound_host="0.0.0.0", extra_host_names=frozenset({"gpu-box"})), "gpu-box:8000", True),
    (GuardPolicy(bound_host="0.0.0.0", extra_host_names=frozenset({"gpu-box"})), "evil.test", False),
])
def test_hosts(policy, host, allowed):
    assert policy.host_allowed(host) is allowed


@pytest.mark.parametrize("origin, scheme, host, allowed", [
    ("http://127.0.0.1:8000", "http", "127.0.0.1:8000", True),
    ("http://127.0.0.1:18999", "http", "127.0.0.1:8000", False),  # another port of the same host
    ("http://localhost:8000", "http", "127.0.0.1:8000", False),
    ("https://127.0.0.1:8443", "https", "127.0.0.1:8443", True),  # nginx passing $http_host
    ("https://chat.example.com", "https", "chat.example.com", True),  # default port on both sides
    ("http://chat.example.com", "https", "chat.example.com", False),
    ("http://127.0.0.1:8000", "ws", "127.0.0.1:8000", True),  # websocket scope
    ("null", "http", "127.0.0.1:8000", False),
])
def test_same_origin(origin, scheme, host, allowed):
    assert LOCAL.origin_allowed(origin, scheme, host) is allowed


def test_listed_origins_like_ollama_origins():
    policy = GuardPolicy(bound_host="127.0.0.1", allowed_origins=("https://tools.example.com",))
    assert policy.origin_allowed("https://tools.example.com", "http", "127.0.0.1:8000")
    assert not policy.origin_allowed("https://other.example.com", "http", "127.0.0.1:8000")
    assert GuardPolicy(bound_host="x", allowed_origins=("*",)).origin_allowed("http://a", "http", "b")


def refusal(kind="http", method="GET", path="/", **headers):
    headers = {"host": "127.0.0.1:8000", **{k.replace("_", "-"): v for k, v in headers.items()}}
    return LOCAL.refusal(kind, method, path, "http", Headers(headers=headers))


def test_refusals_name_the_setting_in_one_line():
    cases = [
        (refusal(host="evil.test"), 403, "--allowed-hosts"),
        (refusal("websocket", path="/ws/socket.io/", origin="http://127.0.0.1:18999"), 403, "--allowed-origins"),
        (refusal(path="/ws/socket.io/", origin="http://127.0.0.1:18999"), 403, "--allowed-origins"),
        (refusal(method="POST", path="/login", origin="http://127.0.0.1:18999"), 403, "--allowed-origins"),
        (refusal(method="POST", path="/v1/chat/completions", content_type="text/plain"), 415, "application/json"),
        (refusal(method="POST", path="/v1/chat/completions", content_type="application/json",
                 content_length="1001"), 413, "--max-body-bytes"),
    ]
    for found, status, words in cases:
        assert found is not None and found.http_status == status and words in str(found) and "\n" not in str(found)


def test_allowed_requests_pass():
    assert refusal() is None
    assert refusal(origin="http://127.0.0.1:18999") is None  # a GET of a page or image: not state-changing
    assert refusal("websocket", path="/ws/socket.io/", origin="http://127.0.0.1:8000") is None
    assert refusal(method="POST", path="/v1/chat/completions",
                   content_type="application/json; charset=utf-8", content_length="1000") is None
    # no Origin: a script
    assert refusal(method="POST", path="/v1/chat/completions", content_type="application/json") is None


def run_guarded(body_chunks, policy=LOCAL):
    """Drive WebGuard around an app that reads the whole body, as FastAPI does; return what was sent."""
    read = []

    async def app(scope, receive, send):
        while True:
            message = await receive()
            read.append(len(message.get("body", b"")))
            if not message.get("more_body"):
                break
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})

    chunks = list(body_chunks)
    sent = []

    async def receive():
        body = chunks.pop(0)
        return {"type": "http.request", "body": body, "more_body": bool(chunks)}

    async def send(message):
        sent.append(message)

    scope = {"type": "http", "method": "POST", "path": "/v1/chat/completions",
             "headers": [(b"host", b"127.0.0.1:8000"), (b"content-type", b"application/json")]}
    asyncio.run(WebGuard(app, policy)(scope, receive, send))
    return sent, read, chunks


def test_chunked_body_stops_at_the_limit():
    sent, read, left = run_guarded([b"x" * 400] * 100)
    assert sent[0]["status"] == 413 and sum(read) <= 1200 and len(left) >= 96  # the rest was never read


def test_small_body_passes_with_the_content_security_policy():
    sent, _, _ = run_guarded([b"x" * 400, b"y" * 400])
    assert sent[0]["status"] == 200
    assert (b"content-security-policy", CONTENT_SECURITY_POLICY.encode()) in sent[0]["headers"]
    # Images from the app, data: and the page's own blob: URLs (the composer's thumbnails), nothing else; no framing.
    assert CONTENT_SECURITY_POLICY == "img-src 'self' data: blob:; frame-ancestors 'none'"


def test_uploads_have_their_own_limit_from_max_upload_mb():
    from app.documents.limits import upload_body_bytes

    policy = GuardPolicy(bound_host="127.0.0.1", max_body_bytes=1000, max_upload_bytes=upload_body_bytes(2),
                         root_path="/chat")
    headers = Headers(headers={"host": "127.0.0.1:8000", "content-length": str(2 * 2**20 + 1000)})
    assert policy.refusal("http", "POST", "/chat/project/file", "http", headers) is None  # a 2 MiB file passes
    too_big = Headers(headers={"host": "127.0.0.1:8000", "content-length": str(upload_body_bytes(2) + 1)})
    refused = policy.refusal("http", "POST", "/chat/project/file", "http", too_big)
    assert refused.http_status == 413 and "(--max-upload-mb)" in str(refused)
    # every other route keeps --max-body-bytes
    assert "(--max-body-bytes)" in str(policy.refusal("http", "POST", "/chat/login", "http", headers))
