"""Where an answer ends (app/engine/end_of_turn.py): read off the model's own chat template, with eos beside it."""
import pytest

from app.engine.end_of_turn import answer_end_tokens, describe, template_turn_end
from app.engine.protocol import Sampling
from app.engine.remote import _vllm_fields
from app.model_source import model_answer_end


@pytest.fixture(scope="module")
def built_tokenizer(tmp_path_factory):
    from tests.tiny_model import build_tokenizer

    return build_tokenizer(tmp_path_factory.mktemp("tokenizer"))


@pytest.fixture
def ernie_tokenizer(built_tokenizer):
    """The tiny ERNIE's tokenizer: ERNIE's special tokens and its real chat template (put back after each test)."""
    template = built_tokenizer.chat_template
    yield built_tokenizer
    built_tokenizer.chat_template = template


def test_ernies_template_ends_a_turn_with_end_of_sentence_which_generation_config_does_not_name(ernie_tokenizer):
    ends = answer_end_tokens(ernie_tokenizer, {"eos_token_id": 2})
    assert [(end.token_id, end.text) for end in ends] == [(4, "<|end_of_sentence|>"), (2, "</s>")]
    assert "chat template" in ends[0].why and "eos" in ends[1].why
    assert describe(ends).startswith("<|end_of_sentence|> (id 4: the chat template")


def test_generation_configs_list_of_eos_ids_is_kept_beside_the_template(ernie_tokenizer):
    ends = answer_end_tokens(ernie_tokenizer, {"eos_token_id": [2, 5]})
    assert [end.token_id for end in ends] == [4, 2, 5]


def test_a_turn_closed_by_plain_text_gives_no_token_to_stop_at(ernie_tokenizer):
    """A newline after each answer must not end every answer at its first line break."""
    ernie_tokenizer.chat_template = ("{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n\n"
                                     "{% endfor %}")
    assert template_turn_end(ernie_tokenizer) is None
    assert [end.token_id for end in answer_end_tokens(ernie_tokenizer, {})] == [2]


def test_whitespace_before_the_end_token_is_skipped_as_llama_2_writes_it(ernie_tokenizer):
    ernie_tokenizer.chat_template = "{% for m in messages %}{{ m['content'] + ' ' + eos_token }}{% endfor %}"
    assert template_turn_end(ernie_tokenizer) == 2


def test_a_template_that_cannot_render_a_turn_leaves_eos(ernie_tokenizer):
    ernie_tokenizer.chat_template = "{{ raise_exception('system prompt required') }}"
    assert [end.token_id for end in answer_end_tokens(ernie_tokenizer, {"eos_token_id": 2})] == [2]


def test_print_config_says_when_the_model_is_not_here_yet(tmp_path):
    assert model_answer_end(None) is None and model_answer_end(tmp_path) is None
    assert describe(None) == "read from the model's chat template once its files are here"


def test_a_remote_vllm_server_is_sent_the_end_tokens_unless_eos_is_ignored():
    assert _vllm_fields(Sampling(0.8, 0.8, 16, stop_token_ids=(4, 2))) == {"stop_token_ids": [4, 2]}
    assert _vllm_fields(Sampling(0.8, 0.8, 16, ignore_eos=True, stop_token_ids=(4, 2))) == {"ignore_eos": True}
    assert _vllm_fields(Sampling(0.8, 0.8, 16)) is None
