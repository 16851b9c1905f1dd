"""Chat rules without a browser: input cleaning, context fitting, sampling bounds."""
import pytest

from app.conversation import (MIN_ANSWER_TOKENS, PromptTooLong, clamp_sampling, clean_message, fit_to_context)


def encode_chars(messages):
    """A stand-in tokenizer: one token per character of a simple template."""
    return list(range(sum(len(m["content"]) + 8 for m in messages) + 10))


def test_control_characters_and_lone_surrogates_are_removed():
    cleaned = clean_message("hi\x00 there\x1b[31m\ud800!\tok\r\nnext")
    assert cleaned.changed
    assert "\x00" not in cleaned.text and "\x1b" not in cleaned.text and "\ud800" not in cleaned.text
    assert "\t" in cleaned.text and "\nnext" in cleaned.text
    cleaned.text.encode("utf-8")  # encodable now


def test_ordinary_text_is_untouched():
    text = "请用三句话解释量子纠缠，要求通俗易懂\nline two"
    assert clean_message(text) == type(clean_message(text))(text, False)


def test_history_fits_without_dropping():
    history = [{"role": "user", "content": "a" * 10}, {"role": "assistant", "content": "b" * 10}]
    fitted = fit_to_context("", history, "hello", 1000, 100, encode_chars)
    assert fitted.dropped_messages == 0 and fitted.max_tokens == 100


def test_oldest_turns_are_dropped_in_pairs_when_too_long():
    history = []
    for i in range(10):
        history += [{"role": "user", "content": "u" * 50}, {"role": "assistant", "content": "a" * 50}]
    fitted = fit_to_context("sys", history, "question", 400, 100, encode_chars)
    assert fitted.dropped_messages > 0 and fitted.dropped_messages % 2 == 0
    assert len(fitted.token_ids) + fitted.max_tokens <= 400


def test_one_message_alone_too_long_is_refused_not_cut():
    with pytest.raises(PromptTooLong) as info:
        fit_to_context("", [], "x" * 5000, 1000, 100, encode_chars)
    assert info.value.tokens > 1000 and info.value.limit == 1000 - MIN_ANSWER_TOKENS


def test_answer_budget_shrinks_with_a_notice_when_needed():
    fitted = fit_to_context("", [], "x" * 900, 1000, 500, encode_chars)
    assert fitted.shortened and MIN_ANSWER_TOKENS <= fitted.max_tokens < 500


@pytest.mark.parametrize("raw, name, expected", [
    ({"temperature": 5}, "temperature", 2.0),
    ({"temperature": -1}, "temperature", 0.0),
    ({"top_p": 0}, "top_p", 0.05),
    ({"max_tokens": 10**9}, "max_tokens", 2048),
    ({"max_tokens": "lots"}, "max_tokens", 512),
    ({"temperature": float("nan")}, "temperature", 0.8),
])
def test_out_of_range_sampling_is_corrected_and_reported(raw, name, expected):
    choice = clamp_sampling(raw, {"temperature": 0.8, "top_p": 0.8, "max_tokens": 512}, 2048)
    assert choice.values[name] == expected
    assert [c[0] for c in choice.corrections] == [name]


def test_in_range_sampling_is_kept():
    choice = clamp_sampling({"temperature": 0.3, "top_p": 0.9, "max_tokens": 64},
                            {"temperature": 0.8, "top_p": 0.8, "max_tokens": 512}, 2048)
    assert choice.values == {"temperature": 0.3, "top_p": 0.9, "max_tokens": 64} and not choice.corrections


def test_a_small_answer_limit_is_not_mistaken_for_a_full_context():
    fitted = fit_to_context("", [], "hi", 1000, 4, encode_chars)
    assert fitted.max_tokens == 4 and not fitted.shortened
