"""/v1's request rules without a server: the message cap is checked before any message is validated."""
import pytest

from app.api import parse_request
from app.errors import BadRequestError


def test_a_request_over_the_message_cap_is_refused_before_validation():
    too_many = {"messages": [{"role": "nobody", "content": 1}] * 1001}  # invalid too: the cap speaks first
    with pytest.raises(BadRequestError, match="at most 1000 per request .--max-request-messages.; got 1001"):
        parse_request(too_many, 1000)


@pytest.mark.parametrize("body, words", [
    ({"messages": []}, "messages"),
    ({"messages": [{"role": "wizard", "content": "hi"}]}, "messages.0.role"),
    ({"messages": [{"role": "user", "content": "hi"}], "top_p": 0.01}, "top_p"),
    ([1, 2], "Input should be"),
])
def test_bad_requests_are_one_line_naming_the_field(body, words):
    with pytest.raises(BadRequestError) as info:
        parse_request(body, 1000)
    assert words in str(info.value) and "\n" not in str(info.value)
    assert info.value.http_status == 400


def test_stream_options_are_understood():
    request = parse_request({"messages": [{"role": "user", "content": "hi"}], "stream": True,
                             "stream_options": {"include_usage": True}, "seed": 3}, 1000)
    assert request.stream_options.include_usage and request.seed == 3
