"""An answer ends where the model's chat template ends an assistant turn (issue 35), seen in Chromium and over /v1,
and counted on the engine's side.

The model is the tiny ERNIE made to end its turn as ERNIE does (tests/tiny_model.py ``build_turn_ender``): sampled,
it writes ``<|end_of_sentence|>`` within a few dozen tokens and never ``</s>``, the only end its
generation_config names. An engine stopping at eos alone runs each answer on to max_tokens.
The file name sorts before the other e2e modules on purpose: this module's app stops before the package-wide
tiny-model app starts, so one engine runs at a time.
"""
import json
import time
import urllib.request

import pytest

from tests.support.app_process import running_app
from tests.support.metrics import finished_requests, generated_tokens
from tests.support.page import STATS_EN, send, wait_chat_opened, wait_stats

pytestmark = pytest.mark.timeout(300)
MAX_TOKENS = 300


def finished(app) -> dict[str, float]:
    """The engine's finished requests by reason."""
    return {reason: finished_requests(app, reason) for reason in ("stop", "length")}


def finished_after(app, before: dict[str, float], timeout: float = 10) -> dict[str, float]:
    """The counts once the engine has recorded one more finished request than ``before`` (vLLM counts an answer
    as it hands out its last piece: the page can show the stats line a moment before the counter moves)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        now = finished(app)
        if sum(now.values()) > sum(before.values()):
            return now
        time.sleep(0.05)
    raise AssertionError(f"the engine recorded no finished request: {before}")


@pytest.fixture(scope="module")
def turn_ender_app(tmp_path_factory):
    from tests.tiny_model import build_turn_ender

    model = build_turn_ender(tmp_path_factory.mktemp("turn-ender"))
    with running_app(model, tmp_path_factory.mktemp("turn-ender-app"), "--max-tokens", str(MAX_TOKENS)) as app:
        yield app


@pytest.fixture
def page(browser, turn_ender_app):
    context = browser.new_context(locale="en-US", viewport={"width": 1280, "height": 800})
    page = context.new_page()
    page.goto(turn_ender_app.url + "/")
    wait_chat_opened(page)
    yield page
    context.close()


def test_sampled_answers_end_at_the_templates_end_of_turn(page, turn_ender_app):
    """Three sampled answers: each one stops on an end token (vLLM's finished_reason "stop"), short of max_tokens,
    and the engine generated exactly the tokens the page counts (nothing ran on past the end of the turn)."""
    for n, question in enumerate(["Write a poem about the sea.", "And one about the sky?", "Thanks."], start=1):
        before, tokens_before = finished(turn_ender_app), generated_tokens(turn_ender_app)
        send(page, question)
        answer_tokens = int(wait_stats(page, n, timeout=120)[1])
        after = finished_after(turn_ender_app, before)
        assert answer_tokens < MAX_TOKENS, f"answer {n} ran to max_tokens ({answer_tokens} tokens)"
        assert after == {"stop": before["stop"] + 1, "length": before["length"]}, (before, after)
        assert generated_tokens(turn_ender_app) - tokens_before == answer_tokens
    assert len(STATS_EN.findall(page.inner_text("body"))) == 3


def test_v1_answers_end_at_the_templates_end_of_turn_too(turn_ender_app):
    """/v1 builds its sampling by the same rule: sampled answers stop (finish_reason "stop") short of max_tokens."""
    for seed in (1, 2, 3):
        before = finished(turn_ender_app)
        body = {"messages": [{"role": "user", "content": "Write a poem about the sea."}], "max_tokens": MAX_TOKENS,
                "seed": seed}
        request = urllib.request.Request(turn_ender_app.url + "/v1/chat/completions", data=json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=120) as response:
            answer = json.loads(response.read())
        assert answer["choices"][0]["finish_reason"] == "stop", answer["usage"]
        assert answer["usage"]["completion_tokens"] < MAX_TOKENS
        assert finished_after(turn_ender_app, before) == {"stop": before["stop"] + 1, "length": before["length"]}
