"""/v1 without a server: the request rules (the message cap is checked before any message is validated), and
the answers' wire format."""
import asyncio
import json
from types import SimpleNamespace

import pytest

from app.api import MODEL_ID, _completion, _stream, parse_request
from app.conversation import FittedPrompt
from app.engine.protocol import Delta, Sampling
from app.errors import BadRequestError, EngineUnavailable


def test_a_request_over_the_message_cap_is_refused_before_validation():
    too_many = {"messages": [{"role": "nobody", "content": 1}] * 1001}  # invalid too: the cap speaks first
    with pytest.raises(BadRequestError, match="at most 1000 per request .--max-request-messages.; got 1001"):
        parse_request(too_many, 1000)


@pytest.mark.parametrize("body, words", [
    ({"messages": []}, "messages"),
    ({"messages": [{"role": "wizard", "content": "hi"}]}, "messages.0.role"),
    ({"messages": [{"role": "user", "content": "hi"}], "top_p": 0.01}, "top_p"),
    ({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 0}, "max_tokens"),
    ([1, 2], "Input should be"),
])
def test_bad_requests_are_one_line_naming_the_field(body, words):
    with pytest.raises(BadRequestError) as info:
        parse_request(body, 1000)
    assert words in str(info.value) and "\n" not in str(info.value)
    assert info.value.http_status == 400


@pytest.mark.parametrize("extra, line", [
    ({"seed": 2**64}, "seed: must be from -9223372036854775808 to 9223372036854775807; got 18446744073709551616"),
    ({"seed": -2**63 - 1}, "seed: must be from -9223372036854775808 to 9223372036854775807; "
                           "got -9223372036854775809"),
    ({"seed": 10**400}, "seed: must be from -9223372036854775808 to 9223372036854775807; "
                        "got 10000000000000000000... (401 characters)"),
    ({"temperature": 9}, "temperature: must be from 0.0 to 2.0; got 9"),
    ({"n": 5}, "n: must be from 1 to 4; got 5"),  # the chat's cap on answers at once
    ({"n": 0}, "n: must be from 1 to 4; got 0"),
])
def test_a_number_out_of_range_names_the_field_and_its_whole_range(extra, line):
    """N16: seed >= 2**64 reached vLLM and came back as a plain-text 500; vLLM's own range is int64's."""
    with pytest.raises(BadRequestError) as info:
        parse_request({"messages": [{"role": "user", "content": "hi"}], **extra}, 1000)
    assert str(info.value) == line


def test_the_ends_of_the_seed_range_are_taken():
    for seed in (-2**63, 2**63 - 1):
        assert parse_request({"messages": [{"role": "user", "content": "hi"}], "seed": seed}, 1000).seed == seed


def test_max_tokens_down_to_one_as_openai_clients_send_it():
    assert parse_request({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1}, 1000).max_tokens == 1


def test_one_answer_token_fits_the_context():
    from app.conversation import fit_to_context

    class Template:  # three tokens a message
        def encode(self, messages):
            return list(range(len(messages) * 3))

    assert fit_to_context("", [], "hi", 4096, 1, Template()).max_tokens == 1


FITTED = FittedPrompt([1, 2, 3], dropped_messages=2, max_tokens=16)


def test_a_plain_answer_has_the_fields_it_always_had():
    body = _completion("chatcmpl-1", FITTED, [("h\u00e9llo", 4, "abort")])  # vLLM's reasons pass as they are
    created = body.pop("created")
    assert isinstance(created, int) and body == {
        "id": "chatcmpl-1", "object": "chat.completion", "model": MODEL_ID,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "h\u00e9llo"}, "finish_reason": "abort"}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7}, "ernie_chat": {"dropped_messages": 2}}


def stream_events(deltas, include_usage, error=None, choices=1):
    async def fake_stream(token_ids, sampling, owner=None):
        assert owner == "/v1"  # every choice in /v1's turn of the queue
        for delta in deltas:
            yield Delta(f"{sampling.seed}:{delta.text}" if sampling.seed is not None and delta.text else delta.text,
                        delta.new_tokens, delta.finished, delta.finish_reason)
            await asyncio.sleep(0)
        if error:
            raise error

    rt = SimpleNamespace(host=SimpleNamespace(stream=fake_stream))
    samplings = [Sampling(0.8, 0.8, 16, seed=i if choices > 1 else None) for i in range(choices)]

    async def collect():
        return [event async for event in _stream(rt, FITTED, samplings, "chatcmpl-2", include_usage)]

    return asyncio.run(collect())


def test_a_streamed_answer_has_the_events_it_always_had():
    events = stream_events([Delta("he", 1), Delta("\u2028", 1), Delta("", 1, True, "length")], include_usage=True)
    assert events[-1] == "data: [DONE]\n\n" and all(e.startswith("data: ") and e.endswith("\n\n") for e in events)
    assert all(e.isascii() for e in events)  # U+2028 inside a token must not split a line in some clients
    chunks = [json.loads(e[6:]) for e in events[:-1]]
    assert {c["id"] for c in chunks} == {"chatcmpl-2"} and {c["object"] for c in chunks} == {"chat.completion.chunk"}
    assert [c["choices"] for c in chunks] == [
        [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}],
        [{"index": 0, "delta": {"content": "he"}, "finish_reason": None}],
        [{"index": 0, "delta": {"content": "\u2028"}, "finish_reason": None}],
        [{"index": 0, "delta": {}, "finish_reason": "length"}],
        [],
    ]
    assert [c.get("usage") for c in chunks] == [None] * 4 + [
        {"prompt_tokens": 3, "completion_tokens": 3, "total_tokens": 6}]
    assert all("usage" not in c for c in chunks[:-1])  # usage only on the last chunk, as OpenAI's include_usage


def test_an_engine_failure_mid_stream_is_an_error_event():
    events = stream_events([Delta("he", 1)], include_usage=False, error=EngineUnavailable("engine restarting"))
    error = json.loads(events[-2][6:])
    assert events[-1] == "data: [DONE]\n\n" and "engine restarting" in error["error"]["message"]


def test_stream_options_are_understood():
    request = parse_request({"messages": [{"role": "user", "content": "hi"}], "stream": True,
                             "stream_options": {"include_usage": True}, "seed": 3}, 1000)
    assert request.stream_options.include_usage and request.seed == 3


def test_n_choices_are_streamed_each_with_its_index_and_the_usage_counts_the_prompt_once():
    events = stream_events([Delta("a", 1), Delta("b", 1, True, "stop")], include_usage=True, choices=3)
    chunks = [json.loads(e[6:]) for e in events[:-1]]
    pieces = [c["choices"][0] for c in chunks if c["choices"]]
    assert [p["index"] for p in pieces[:3]] == [0, 1, 2] and all(p["delta"]["role"] == "assistant" for p in pieces[:3])
    for index in range(3):
        mine = [p for p in pieces[3:] if p["index"] == index]
        assert "".join(p["delta"].get("content", "") for p in mine) == f"{index}:a{index}:b"  # its own seed's
        assert mine[-1]["finish_reason"] == "stop"
    assert chunks[-1]["usage"] == {"prompt_tokens": 3, "completion_tokens": 6, "total_tokens": 9}


def test_n_choices_in_one_answer_and_their_usage():
    body = _completion("chatcmpl-3", FITTED, [("one", 4, "stop"), ("two", 5, "length")])
    assert [(c["index"], c["message"]["content"], c["finish_reason"]) for c in body["choices"]] == [
        (0, "one", "stop"), (1, "two", "length")]
    assert body["usage"] == {"prompt_tokens": 3, "completion_tokens": 9, "total_tokens": 12}


def test_a_failing_choice_ends_the_stream_with_one_error_event():
    events = stream_events([Delta("a", 1)], include_usage=False, error=EngineUnavailable("engine restarting"),
                           choices=2)
    errors = [e for e in events[:-1] if '"error"' in e]
    assert len(errors) == 1 and events[-1] == "data: [DONE]\n\n"
