"""Chat rules without a browser: input cleaning, context fitting, sampling bounds."""
import pytest

from app.conversation import (
    MIN_ANSWER_TOKENS,
    ChatSampling,
    FittedPrompt,
    answer_sampling,
    clamp_sampling,
    clean_message,
    fit_to_context,
)
from app.engine.protocol import Sampling
from app.errors import PromptTooLongError
from app.settings import API_SAMPLING_BOUNDS


class CharTemplate:
    """A stand-in chat template: one token per character, 8 per message, 10 for the prompt's frame.
    It records how many messages each render carried, to check the work stays linear."""

    def __init__(self):
        self.rendered = []

    def encode(self, messages):
        self.rendered.append(len(messages))
        return list(range(sum(len(m["content"]) + 8 for m in messages) + 10))

    def count(self, texts):
        return [len(t) for t in texts]


encode_chars = CharTemplate()


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
    for _ in range(10):
        history += [{"role": "user", "content": "u" * 50}, {"role": "assistant", "content": "a" * 50}]
    fitted = fit_to_context("sys", history, "question", 400, 100, encode_chars)
    assert fitted.dropped_messages > 0 and fitted.dropped_messages % 2 == 0
    assert len(fitted.token_ids) + fitted.max_tokens <= 400


def test_one_message_alone_too_long_is_refused_not_cut():
    with pytest.raises(PromptTooLongError) as info:
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
    assert getattr(choice.chosen, name) == expected
    assert [c[0] for c in choice.corrections] == [name]


def test_in_range_sampling_is_kept():
    choice = clamp_sampling({"temperature": 0.3, "top_p": 0.9, "max_tokens": 64},
                            {"temperature": 0.8, "top_p": 0.8, "max_tokens": 512}, 2048)
    assert choice.chosen == ChatSampling(temperature=0.3, top_p=0.9, max_tokens=64) and not choice.corrections


def test_defaults_are_filled_in_once_and_v1_keeps_its_own_answer_range():
    """The panel's missing values, a stored chat's None and /v1's unset fields all take the chat's defaults in
    clamp_sampling, the one place; the panel's answer length stops at its cap, /v1's at API_SAMPLING_BOUNDS
    (down to one token, up to the bound: the prompt's fitting then gives what the context leaves)."""
    defaults = {"temperature": 0.6, "top_p": 0.7, "max_tokens": 300}
    panel = clamp_sampling({"max_tokens": 10**6, "top_p": None}, defaults, 1024)
    assert panel.chosen == ChatSampling(temperature=0.6, top_p=0.7, max_tokens=1024)
    assert [c[0] for c in panel.corrections] == ["max_tokens"]  # None is "not set", not a garbled value
    v1 = clamp_sampling({"max_tokens": 1, "seed": None}, defaults, bounds=API_SAMPLING_BOUNDS).chosen
    assert v1 == ChatSampling(temperature=0.6, top_p=0.7, max_tokens=1) and isinstance(v1.max_tokens, int)
    long = clamp_sampling({"max_tokens": 20000}, defaults, bounds=API_SAMPLING_BOUNDS)
    assert long.chosen.max_tokens == 20000 and not long.corrections
    assert clamp_sampling({"seed": True}, defaults).chosen.seed is None  # a bool is no seed


def test_a_small_answer_limit_is_not_mistaken_for_a_full_context():
    fitted = fit_to_context("", [], "hi", 1000, 4, encode_chars)
    assert fitted.max_tokens == 4 and not fitted.shortened


def test_fitting_a_huge_chat_renders_only_what_is_kept():
    """Bounded by the context: of 100,000 turns only the newest are tokenized, and the template renders a
    handful of times, each time only the turns that fit (it once re-rendered everything per dropped pair:
    8.7 s for 1,000 turns, minutes for 100,000)."""
    history = []
    for i in range(50_000):
        history += [{"role": "user", "content": f"question {i}"}, {"role": "assistant", "content": f"answer {i}"}]
    template = CharTemplate()
    counted = []
    template.count = lambda texts: counted.extend(texts) or [len(t) for t in texts]
    fitted = fit_to_context("sys", history, "last question", 4096, 512, template)
    assert len(template.rendered) <= 3, template.rendered
    assert len(counted) < 1000  # only the newest messages are ever tokenized, not all 100,000
    assert max(template.rendered) < 4096 // 8  # never more messages than can fit the context
    assert fitted.dropped_messages % 2 == 0 and len(fitted.token_ids) + 512 <= 4096
    assert len(fitted.token_ids) > 4096 - 512 - 40  # and it keeps as much as fits


def test_an_estimate_that_comes_up_short_still_fits():
    class Undercounting(CharTemplate):
        def count(self, texts):  # says texts are half as long as they render
            return [len(t) // 2 for t in texts]

    history = [{"role": "user", "content": "u" * 50}, {"role": "assistant", "content": "a" * 50}] * 40
    template = Undercounting()
    fitted = fit_to_context("", history, "question", 1000, 200, template)
    assert len(fitted.token_ids) + fitted.max_tokens <= 1000 and not fitted.shortened
    assert len(template.rendered) <= 4


def test_new_chats_take_the_models_sampling_defaults_unless_the_user_set_ours():
    from app.conversation import chat_defaults
    from app.settings import ChatSettings

    generation_config = {"temperature": 0.6, "top_p": 0.7}
    assert chat_defaults(ChatSettings(_env_file=None), generation_config, 4096)["temperature"] == 0.6
    mine = chat_defaults(ChatSettings(_env_file=None, temperature=0.2), generation_config, 4096)
    assert mine["temperature"] == 0.2 and mine["top_p"] == 0.7
    assert chat_defaults(ChatSettings(_env_file=None), {}, 1024)["max_tokens"] == 512  # half the context


def test_the_ui_and_v1_sample_by_one_rule():
    """What was asked for, else the chat's defaults, filled in once (clamp_sampling); the answer budget is what the
    prompt left."""
    defaults = {"temperature": 0.8, "top_p": 0.8, "max_tokens": 512}
    fitted = FittedPrompt([1, 2, 3], dropped_messages=0, max_tokens=100, shortened=True)
    panel = clamp_sampling({}, defaults, 2048)
    assert panel.chosen == ChatSampling(temperature=0.8, top_p=0.8, max_tokens=512) and not panel.corrections
    assert answer_sampling(panel.chosen, fitted) == Sampling(temperature=0.8, top_p=0.8, max_tokens=100)
    asked = {"temperature": 0, "top_p": None, "max_tokens": None, "seed": 7}  # /v1: unset is None; 0 is a value
    v1 = clamp_sampling(asked, defaults, bounds=API_SAMPLING_BOUNDS)
    assert v1.chosen == ChatSampling(temperature=0.0, top_p=0.8, max_tokens=512, seed=7) and not v1.corrections
    assert answer_sampling(v1.chosen, fitted) == Sampling(temperature=0.0, top_p=0.8, max_tokens=100, seed=7)
    # The model's end tokens (app/engine/end_of_turn.py) reach the engine with every answer, and a benchmark's
    # ignore_eos drops them: its answer writes all max_tokens.
    ending = answer_sampling(panel.chosen, fitted, (4, 2))
    assert ending.stop_token_ids == (4, 2) and ending.ends_at == [4, 2]
    assert Sampling(0.8, 0.8, 100, ignore_eos=True, stop_token_ids=(4, 2)).ends_at == []


def test_one_definition_of_the_sampling_bounds():
    """The settings, the sliders (app/ui/settings_panel.py) and the clamping read SAMPLING_BOUNDS; /v1 reads
    API_SAMPLING_BOUNDS, made from it (answers down to one token)."""
    from pydantic import ValidationError

    from app.api import ChatRequest
    from app.settings import API_SAMPLING_BOUNDS, SAMPLING_BOUNDS, ChatSettings

    for name, bound in API_SAMPLING_BOUNDS.items():
        below = bound.low - (1 if bound.integer else 0.01)
        with pytest.raises(ValidationError):
            ChatRequest(messages=[{"role": "user", "content": "hi"}], **{name: below})
        ChatRequest(messages=[{"role": "user", "content": "hi"}], **{name: bound.low})
    for name, bound in SAMPLING_BOUNDS.items():
        below = bound.low - (1 if bound.integer else 0.01)
        with pytest.raises(ValidationError):
            ChatSettings(_env_file=None, **{name: below})
        assert getattr(clamp_sampling({name: below}, {"temperature": 0.8, "top_p": 0.8, "max_tokens": 512},
                                      10**6).chosen, name) == bound.low


def test_an_answer_cut_at_its_limit_is_continued_from_a_prompt_that_ends_with_it(tmp_path):
    """Continue (issue 35): the question, then the answer so far as the prompt's end: ERNIE's template would close
    it with <|end_of_sentence|> and open a new "Assistant: " turn; neither is there."""
    from app.conversation import ChatTemplate
    from tests.tiny_model import build_tokenizer

    tokenizer = build_tokenizer(tmp_path)
    template = ChatTemplate(tokenizer)
    fitted = fit_to_context("", [], "Write a poem.", 4096, 64, template, answer_so_far="The waves roll")
    assert tokenizer.decode(fitted.token_ids) == "<|begin_of_sentence|>User: Write a poem.\nAssistant: The waves roll"
    question = fit_to_context("", [], "Write a poem.", 4096, 64, template)
    assert tokenizer.decode(question.token_ids).endswith("Assistant: ")  # a new answer: the turn is opened


def test_the_answers_at_once_are_one_unless_asked_and_never_past_the_cap():
    """The chat's "Answers at once" and /v1's n share ANSWERS_AT_ONCE (1-4): a forged panel value is brought into
    it and reported, as any setting is (app/ui/answer.py words that report as the cap's own line)."""
    from app.settings import ANSWERS_AT_ONCE

    defaults = {"temperature": 0.8, "top_p": 0.8, "max_tokens": 512, "answers": 1}
    assert clamp_sampling({}, defaults).chosen.answers == 1
    assert clamp_sampling({"answers": 3.0}, defaults).chosen.answers == 3  # the panel's slider keeps floats
    capped = clamp_sampling({"answers": 9}, defaults)
    assert capped.chosen.answers == 4 and [c[:2] + c[3:] for c in capped.corrections] == [("answers", 9, 4)]
    assert str(capped.corrections[0][2]) == str(ANSWERS_AT_ONCE) == "1..4"
    garbled = clamp_sampling({"answers": "many"}, defaults)
    assert garbled.chosen.answers == 1 and [c[0] for c in garbled.corrections] == ["answers"]
    assert clamp_sampling({"answers": 0}, {k: v for k, v in defaults.items() if k != "answers"}).chosen.answers == 1


def test_several_answers_get_their_own_seeds_only_when_one_is_asked_for():
    from app.conversation import several_samplings

    one = Sampling(0.8, 0.8, 64)
    assert several_samplings(one, 3) == [one] * 3
    seeded = several_samplings(Sampling(0.8, 0.8, 64, seed=5), 3)
    assert [s.seed for s in seeded] == [5, 6, 7] and {s.max_tokens for s in seeded} == {64}
