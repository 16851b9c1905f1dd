"""A real chat model (SmolLM2-135M-Instruct, tests/real_model.py) through `python launch.py`: the app serves
any Llama-family directory, answers correctly, and gives the same greedy tokens as transformers."""
import json
import urllib.request

import pytest

from tests.support.app_process import running_app

pytestmark = pytest.mark.timeout(600)
POEM = "Write a short poem about the sea."
# Multi-byte characters split across byte-level tokens: where a stream would show U+FFFD if cut badly.
CHINESE = "请用中文介绍一下巴黎。"


@pytest.fixture(scope="module")
def real_app(real_model_dir, tmp_path_factory):
    # float32: the converted weights' own dtype, and what transformers runs below, so greedy decoding
    # of both takes the same argmax at every step.
    with running_app(real_model_dir, tmp_path_factory.mktemp("real"), "--dtype", "float32",
                     "--temperature", "0", "--max-model-len", "2048") as app:
        yield app


def ask(app, question, max_tokens, stream=False):
    body = {"messages": [{"role": "user", "content": question}], "temperature": 0, "max_tokens": max_tokens,
            "stream": stream}
    request = urllib.request.Request(app.url + "/v1/chat/completions", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=300) as response:
        if not stream:
            return json.loads(response.read())
        pieces = []
        for line in response.read().decode().splitlines():
            if line.startswith("data: {"):
                delta = json.loads(line[6:])["choices"][0]["delta"]
                pieces.append(delta.get("content", ""))
        return pieces


def test_it_answers_the_question(real_app):
    answer = ask(real_app, "What is the capital of France?", 64)
    assert answer["choices"][0]["message"]["content"] == "The capital of France is Paris."
    assert answer["choices"][0]["finish_reason"] == "stop"


def test_greedy_answer_equals_transformers_generate(real_app, real_model_dir):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(real_model_dir)
    model = AutoModelForCausalLM.from_pretrained(real_model_dir, dtype=torch.float32)
    prompt = tokenizer.apply_chat_template([{"role": "user", "content": POEM}], add_generation_prompt=True,
                                           return_tensors="pt", return_dict=True)
    with torch.no_grad():
        out = model.generate(**prompt, max_new_tokens=32, do_sample=False)
    expected_ids = out[0][prompt["input_ids"].shape[1]:].tolist()
    assert len(expected_ids) == 32, "the prompt must make transformers write at least 32 tokens"
    expected = tokenizer.decode(expected_ids, skip_special_tokens=True)

    answer = ask(real_app, POEM, 32)
    served = answer["choices"][0]["message"]["content"]
    assert answer["usage"]["completion_tokens"] == 32
    assert answer["usage"]["prompt_tokens"] == prompt["input_ids"].shape[1]  # the same chat template
    assert served == expected
    # Text equality could hide two tokenizations of one string; the served text re-encodes to the same ids.
    assert tokenizer.encode(served, add_special_tokens=False) == expected_ids


def test_streamed_text_is_clean_and_equals_the_final_text(real_app):
    final = ask(real_app, CHINESE, 96)["choices"][0]["message"]["content"]
    pieces = ask(real_app, CHINESE, 96, stream=True)
    assert len(pieces) > 5, "the answer did not stream"
    assert "".join(pieces) == final
    assert not any("\ufffd" in piece for piece in pieces), pieces
    assert any(ord(ch) > 0x2e80 for ch in final), f"expected CJK text in the answer: {final!r}"
