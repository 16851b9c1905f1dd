"""Exposure rules and the /v1 route on a real launched app (real engine, tiny model)."""
import json
import signal
import urllib.request

import pytest

from tests.support.app_process import LaunchedApp, get, running_app
from tests.support.metrics import metric_value

pytestmark = pytest.mark.timeout(600)
TOKEN = "test-token-1234567890"


def post(url, body, token=None, timeout=60):
    data = json.dumps(body).encode() if not isinstance(body, bytes) else body
    auth = {"Authorization": f"Bearer {token}"} if token else {}
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json", **auth})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read() or b"{}")


@pytest.fixture(scope="module")
def app_with_token(tiny_model_dir, tmp_path_factory):
    with running_app(tiny_model_dir, tmp_path_factory.mktemp("auth"), "--auth-token", TOKEN) as app:
        yield app


def test_token_guards_metrics_and_api_but_not_probes(app_with_token):
    url = app_with_token.url
    assert get(url + "/healthz")[0] == 200 and get(url + "/readyz")[0] == 200
    assert get(url + "/metrics")[0] == 401
    assert get(url + "/metrics", headers={"Authorization": "Bearer wrong"})[0] == 401
    assert get(url + "/metrics", headers={"Authorization": f"Bearer {TOKEN}"})[0] == 200
    assert post(url + "/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}]})[0] == 401


def test_ui_requires_login_with_the_token(app_with_token):
    config = json.loads(get(app_with_token.url + "/auth/config")[1])
    assert config["requireLogin"] is True and config["passwordAuth"] is True
    form = f"username=me&password={TOKEN}".encode()
    ok = urllib.request.Request(app_with_token.url + "/login", data=form,
                                headers={"Content-Type": "application/x-www-form-urlencoded"})
    with urllib.request.urlopen(ok, timeout=10) as r:
        assert r.status == 200
    bad = urllib.request.Request(app_with_token.url + "/login", data=b"username=me&password=nope",
                                 headers={"Content-Type": "application/x-www-form-urlencoded"})
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(bad, timeout=10)
    assert info.value.code == 401


@pytest.mark.parametrize("body, status, words", [
    ({"messages": []}, 400, "messages"),
    ({"messages": [{"role": "user", "content": "   "}]}, 400, "non-empty user message"),
    ({"messages": [{"role": "user", "content": "hi"}], "temperature": 9}, 400, "temperature"),
    ({"messages": [{"role": "user", "content": "hi"}], "top_p": 0}, 400, "top_p"),
    ({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 0}, 400, "max_tokens"),
    ({"messages": [{"role": "user", "content": "x" * (1 << 20)}]}, 400, "characters in all"),
    ({"messages": [{"role": "user", "content": "hi"}] * 10001}, 400, "at most 10000 per request"),
    ({"messages": [{"role": "user", "content": "量子 " * 3000}]}, 400, "context holds"),
    (b"{not json", 400, ""),
    # N16 (issue 36): a seed past vLLM's int64 range was a plain-text 500 with tracebacks
    ({"messages": [{"role": "user", "content": "hi"}], "seed": 2**64}, 400,
     "seed: must be from -9223372036854775808 to 9223372036854775807"),
    ({"messages": [{"role": "user", "content": "hi"}], "seed": 2**64, "stream": True}, 400, "seed: must be from"),
])
def test_bad_api_input_is_a_400_with_one_line(app_with_token, body, status, words):
    code, answer = post(app_with_token.url + "/v1/chat/completions", body, TOKEN)
    assert code == status and words in answer["error"]["message"] and "\n" not in answer["error"]["message"]


def test_one_answer_token_as_openai_clients_may_ask(app_with_token):
    code, answer = post(app_with_token.url + "/v1/chat/completions",
                        {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1}, TOKEN)
    assert code == 200 and answer["usage"]["completion_tokens"] == 1, answer


def engine_counters(app):
    text = get(app.url + "/metrics", headers={"Authorization": f"Bearer {TOKEN}"})[1]
    return metric_value(text, "vllm:prompt_tokens_total"), metric_value(text, "vllm:generation_tokens_total")


def test_api_usage_is_what_the_engine_counted(app_with_token):
    """Control characters are cleaned, the history goes through the template, and the usage block reports
    the tokens the engine itself counted (vLLM's own counters), not a number made up on our side."""
    body = {"messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi\x00\x1b"},
                         {"role": "assistant", "content": "hello"}, {"role": "user", "content": "again \ud800"}],
            "max_tokens": 16}
    prompt_before, generated_before = engine_counters(app_with_token)
    code, answer = post(app_with_token.url + "/v1/chat/completions", body, TOKEN)
    prompt_after, generated_after = engine_counters(app_with_token)
    assert code == 200, answer
    assert answer["usage"]["prompt_tokens"] == prompt_after - prompt_before > 10
    assert answer["usage"]["completion_tokens"] == generated_after - generated_before > 0


def test_the_openai_client_streams_and_gets_usage(app_with_token):
    """The API as the `openai` package speaks it: plain, streamed, and streamed with include_usage."""
    from openai import OpenAI

    client = OpenAI(base_url=app_with_token.url + "/v1", api_key=TOKEN, max_retries=0)
    assert [m.id for m in client.models.list().data] == ["ernie-chat"]
    messages = [{"role": "user", "content": "hello there"}]
    plain = client.chat.completions.create(model="ernie-chat", messages=messages, max_tokens=16, seed=7)
    assert plain.choices[0].message.role == "assistant" and plain.usage.completion_tokens > 0
    assert plain.created > 0 and plain.model == "ernie-chat"
    chunks = list(client.chat.completions.create(model="ernie-chat", messages=messages, max_tokens=16, seed=7,
                                                 stream=True, stream_options={"include_usage": True}))
    assert all(c.created > 0 and c.object == "chat.completion.chunk" for c in chunks)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens > 0
    assert chunks[-1].usage.prompt_tokens == plain.usage.prompt_tokens
    assert any(c.choices and c.choices[0].finish_reason for c in chunks)
    # Same seed, same prompt: the streamed answer is the plain one.
    assert text == plain.choices[0].message.content
    without_usage = list(client.chat.completions.create(model="ernie-chat", messages=messages, max_tokens=16,
                                                        stream=True))
    assert all(c.usage is None for c in without_usage)


def test_n_choices_streamed_and_not_with_the_usage_the_engine_counted(app_with_token):
    """n=3: three choices (index 0-2), each its own engine request with its own seed (seed, seed+1, seed+2), so a
    streamed request gives the plain one's choices again; the usage counts the prompt once (OpenAI's rule) and
    every choice's tokens, which the engine's own counters confirm (three prompts read, the tokens written)."""
    from openai import OpenAI

    client = OpenAI(base_url=app_with_token.url + "/v1", api_key=TOKEN, max_retries=0)
    messages = [{"role": "user", "content": "tell me a story"}]
    prompt_before, generated_before = engine_counters(app_with_token)
    plain = client.chat.completions.create(model="ernie-chat", messages=messages, max_tokens=16, seed=7, n=3,
                                           temperature=1.0)
    prompt_after, generated_after = engine_counters(app_with_token)
    assert [c.index for c in plain.choices] == [0, 1, 2]
    assert all(c.message.role == "assistant" and c.finish_reason for c in plain.choices)
    assert len({c.message.content for c in plain.choices}) > 1  # their own seeds: not one answer three times
    assert plain.usage.prompt_tokens * 3 == prompt_after - prompt_before
    assert plain.usage.completion_tokens == generated_after - generated_before > 0
    assert plain.usage.total_tokens == plain.usage.prompt_tokens + plain.usage.completion_tokens
    chunks = list(client.chat.completions.create(model="ernie-chat", messages=messages, max_tokens=16, seed=7, n=3,
                                                 temperature=1.0, stream=True, stream_options={"include_usage": True}))
    texts = {index: "".join(c.choices[0].delta.content or "" for c in chunks
                            if c.choices and c.choices[0].index == index) for index in range(3)}
    assert texts == {c.index: c.message.content for c in plain.choices}
    assert sum(1 for c in chunks if c.choices and c.choices[0].finish_reason) == 3
    assert chunks[-1].usage.completion_tokens == plain.usage.completion_tokens
    assert chunks[-1].usage.prompt_tokens == plain.usage.prompt_tokens


@pytest.mark.parametrize("stream", [False, True])
def test_n_above_the_cap_is_one_openai_shaped_error_naming_the_limit(app_with_token, stream):
    generated_before = engine_counters(app_with_token)[1]
    code, answer = post(app_with_token.url + "/v1/chat/completions",
                        {"messages": [{"role": "user", "content": "hi"}], "n": 5, "stream": stream}, TOKEN)
    assert code == 400 and answer == {"error": {"message": "n: must be from 1 to 4; got 5",
                                                "type": "invalid_request_error"}}
    assert engine_counters(app_with_token)[1] == generated_before  # nothing was written


def test_exposed_with_explicit_insecure_flag_starts(tiny_model_dir, tmp_path):
    app = LaunchedApp(tiny_model_dir, tmp_path, "--host", "0.0.0.0", "--insecure-no-auth")
    try:
        app.wait_http()
        assert get(app.url + "/metrics")[0] == 200
    finally:
        app.stop(signal.SIGTERM)
        app.kill()
    assert app.proc.returncode == 0
