"""ERNIE's real tokenizer file set (SentencePiece tokenizer.model, tokenizer_config.json naming the hub's
``Ernie4_5_Tokenizer``, special_tokens_map.json, added_tokens.json) loads without remote code and runs
through `python launch.py` (tiny random weights; tests/tiny_model.py build_real_files)."""
import json
import urllib.request

import pytest

from tests.support.app_process import running_app

pytestmark = pytest.mark.timeout(600)
TWO_TURNS = [{"role": "system", "content": "You are a concise assistant."},
             {"role": "user", "content": "Hello, who are you?"},
             {"role": "assistant", "content": "I am ERNIE, 你好。"},
             {"role": "user", "content": "请用三句话解释量子纠缠"}]
# ERNIE's chat template (tokenizer_config.json): the system prompt bare, "User: " and "Assistant: " turns,
# <|end_of_sentence|> after each answer, all after one <|begin_of_sentence|>.
EXPECTED = ("<|begin_of_sentence|>You are a concise assistant.\n"
            "User: Hello, who are you?\n"
            "Assistant: I am ERNIE, 你好。<|end_of_sentence|>"
            "User: 请用三句话解释量子纠缠\n"
            "Assistant: ")


def test_the_real_files_render_the_chat_template_exactly(tiny_real_files_dir):
    from transformers import AutoTokenizer

    from app.conversation import ChatTemplate

    assert not (tiny_real_files_dir / "tokenizer.json").exists()  # only the SentencePiece model
    tokenizer = AutoTokenizer.from_pretrained(tiny_real_files_dir)  # no trust_remote_code
    assert tokenizer.apply_chat_template(TWO_TURNS, tokenize=False, add_generation_prompt=True) == EXPECTED
    ids = ChatTemplate(tokenizer).encode(TWO_TURNS)  # what the app sends the engine
    assert tokenizer.decode(ids) == EXPECTED
    assert ids[0] == tokenizer.convert_tokens_to_ids("<|begin_of_sentence|>")
    assert tokenizer.convert_tokens_to_ids("<|end_of_sentence|>") in ids


def test_the_app_serves_the_real_file_set(tiny_real_files_dir, tmp_path):
    from transformers import AutoTokenizer

    expected_ids = AutoTokenizer.from_pretrained(tiny_real_files_dir)(EXPECTED, add_special_tokens=False)["input_ids"]
    with running_app(tiny_real_files_dir, tmp_path) as app:
        body = {"messages": TWO_TURNS, "max_tokens": 16, "temperature": 0}
        request = urllib.request.Request(app.url + "/v1/chat/completions", data=json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=120) as response:
            answer = json.loads(response.read())
    assert answer["usage"]["prompt_tokens"] == len(expected_ids)
    assert answer["usage"]["completion_tokens"] >= 1
