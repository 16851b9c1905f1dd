"""Build a tiny random ERNIE-shaped model and tokenizer in seconds: ``python tests/tiny_model.py OUT_DIR``.

``--real-files`` builds it with ERNIE's real tokenizer file set instead (see build_real_files); ``--turn-ender``
one that ends its turns with ``<|end_of_sentence|>`` (see build_turn_ender).

Same architecture class as ERNIE-4.5-0.3B-PT (``Ernie4_5ForCausalLM``) with 2 layers, hidden 128 and
head_dim 64 (the smallest the CPU attention kernels take), a small byte-level BPE tokenizer carrying
ERNIE's special tokens, and the real chat template and generation defaults (tests/data/ernie-4.5-0.3b,
copied from the real model files). About 2 MB; random weights, so answers are gibberish, but every code
path (templating, streaming, stop, context limits) is the real one.
"""
from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, Optional

REAL_FILES = Path(__file__).parent / "data" / "ernie-4.5-0.3b"
# ERNIE's ids for these are fixed (pad/unk 0, bos 1, eos 2); the rest follow.
SPECIAL_TOKENS = ["<unk>", "<s>", "</s>", "<|begin_of_sentence|>", "<|end_of_sentence|>", "<mask:1>",
                  "<mask:4>", "<mask:5>", "<mask:6>", "<mask:7>", "<|IMAGE_PLACEHOLDER|>", "<|AUDIO_PLACEHOLDER|>"]
CORPUS = [
    "User: Hello, who are you?\nAssistant: I am ERNIE, a helpful assistant.",
    "Explain quantum entanglement in three sentences, in plain words.",
    "请用三句话解释量子纠缠，要求通俗易懂。量子纠缠是两个粒子之间的一种特殊联系。",
    "你好，我是文心一言。今天天气很好，我们去公园散步吧。",
    "The quick brown fox jumps over the lazy dog. 0123456789 !?.,;:()[]{}<>/\\|@#$%^&*-_+=~`'\"",
    "Write a short poem about the sea. The waves roll in and out, the gulls cry.",
]


def build_tokenizer(out: Path, vocab_size: int = 1024):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(CORPUS * 20, trainer=trainer)
    real = json.loads((REAL_FILES / "tokenizer_config.json").read_text())
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>", pad_token="<unk>",
        cls_token="<|begin_of_sentence|>", sep_token="<|end_of_sentence|>", mask_token="<mask:1>",
        additional_special_tokens=SPECIAL_TOKENS[6:])
    fast.chat_template = real["chat_template"]
    fast.save_pretrained(out)
    return fast


def build(out_dir: str | Path, hidden_size: int = 128, layers: int = 2, max_positions: int = 4096,
          adjust: Optional[Callable[[Any, Any], None]] = None) -> Path:
    """Write the tiny model to out_dir and return it; ``adjust(model, tokenizer)`` changes weights before saving."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = build_tokenizer(out)
    real = json.loads((REAL_FILES / "config.json").read_text())
    vocab = ((len(tokenizer) + 63) // 64) * 64
    config = AutoConfig.for_model(**{
        **real, "hidden_size": hidden_size, "intermediate_size": hidden_size * 2, "num_hidden_layers": layers,
        "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64,
        "vocab_size": vocab, "max_position_embeddings": max_positions})
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config)
    if adjust is not None:
        with torch.no_grad():
            adjust(model, tokenizer)
    model.to(torch.bfloat16).save_pretrained(out)
    shutil.copy(REAL_FILES / "generation_config.json", out / "generation_config.json")
    return out


def build_turn_ender(out_dir: str | Path, lean: float = 0.4) -> Path:
    """The tiny ERNIE made to end its turn as ERNIE does: sampled, it writes ``<|end_of_sentence|>`` (the token
    ERNIE's template closes an assistant turn with) after a few to a few dozen tokens, and never ``</s>``.

    How: dimension 0 of every token's embedding is set to 1, a constant in the residual stream that the final
    norm turns into ~11 (the random weights elsewhere are ~0.02). The embeddings are tied, so each token's logit
    gains 11 x its own dimension 0: equal for all, +``lean`` x 11 for the end of a turn (about 1 in 14 at 0.4,
    measured with transformers), and -11 for eos (0 instead of 1), which is then never sampled. An engine that
    does not stop at the end of a turn runs on to max_tokens.
    """

    def lean_to_turn_end(model: Any, tokenizer: Any) -> None:
        weight = model.get_input_embeddings().weight
        weight[:, 0] = 1.0
        weight[tokenizer.convert_tokens_to_ids("<|end_of_sentence|>"), 0] = 1.0 + lean
        weight[tokenizer.eos_token_id, 0] = 0.0

    return build(out_dir, adjust=lean_to_turn_end)


# ERNIE's tokens that its SentencePiece model itself holds (the rest come from added_tokens.json).
SENTENCEPIECE_SPECIALS = ["<|begin_of_sentence|>", "<|end_of_sentence|>", "<mask:1>", "<mask:4>", "<mask:5>",
                          "<mask:6>", "<mask:7>"]


def build_sentencepiece(out: Path, vocab_size: int = 600) -> None:
    """ERNIE's real tokenizer file set around a SentencePiece model trained here in a fraction of a second.

    The real repo ships tokenizer.model plus tokenizer_config.json (naming the hub class
    ``Ernie4_5_Tokenizer``, with the chat template), special_tokens_map.json and added_tokens.json; those
    three are the real files. transformers 5 loads the set without remote code (it builds a fast tokenizer
    from the SentencePiece model). Identity normalization, no dummy prefix and byte fallback keep "\n"
    and Chinese text byte-exact through encode/decode, as the chat template needs.
    """
    import io

    import sentencepiece as spm

    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(CORPUS * 20), model_writer=model, vocab_size=vocab_size, model_type="bpe",
        unk_id=0, bos_id=1, eos_id=2, pad_id=-1, user_defined_symbols=SENTENCEPIECE_SPECIALS,
        byte_fallback=True, character_coverage=1.0, normalization_rule_name="identity",
        remove_extra_whitespaces=False, add_dummy_prefix=False, allow_whitespace_only_pieces=True, minloglevel=2)
    (out / "tokenizer.model").write_bytes(model.getvalue())
    for name in ("tokenizer_config.json", "special_tokens_map.json", "added_tokens.json"):
        shutil.copy(REAL_FILES / name, out / name)


def build_real_files(out_dir: str | Path, hidden_size: int = 128, layers: int = 2) -> Path:
    """The tiny random ERNIE with ERNIE's real tokenizer file set (no tokenizer.json): what a download of
    baidu/ERNIE-4.5-0.3B-PT puts on disk, in miniature."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    build_sentencepiece(out)
    tokenizer = AutoTokenizer.from_pretrained(out)
    real = json.loads((REAL_FILES / "config.json").read_text())
    config = AutoConfig.for_model(**{
        **real, "hidden_size": hidden_size, "intermediate_size": hidden_size * 2, "num_hidden_layers": layers,
        "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64,
        "vocab_size": ((len(tokenizer) + 63) // 64) * 64, "max_position_embeddings": 4096})
    torch.manual_seed(0)
    AutoModelForCausalLM.from_config(config).to(torch.bfloat16).save_pretrained(out)
    shutil.copy(REAL_FILES / "generation_config.json", out / "generation_config.json")
    return out


def build_full_size(out_dir: str | Path) -> Path:
    """ERNIE-4.5-0.3B-PT's real shape (18 layers, hidden 1024, vocab 103424) with random weights.

    For GPU runs without a model hub: memory and speed per token equal the real model's. The small
    tokenizer is padded with filler tokens up to the real vocabulary, so every id the model can sample
    decodes (to text like " w52311").
    """
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    build_tokenizer(out)
    real = json.loads((REAL_FILES / "config.json").read_text())
    tokenizer_file = out / "tokenizer.json"
    spec = json.loads(tokenizer_file.read_text())
    vocab = spec["model"]["vocab"]
    taken = len(vocab) + sum(1 for t in spec["added_tokens"] if t["content"] not in vocab)
    for new_id in range(taken, real["vocab_size"]):
        vocab[f"\u0120w{new_id}"] = new_id  # "Ġ" is the byte-level space
    tokenizer_file.write_text(json.dumps(spec, ensure_ascii=False))
    config = AutoConfig.for_model(**real)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config).to(torch.bfloat16)
    model.save_pretrained(out)
    shutil.copy(REAL_FILES / "generation_config.json", out / "generation_config.json")
    return out


if __name__ == "__main__":
    variants = {"--full-size": build_full_size, "--real-files": build_real_files, "--turn-ender": build_turn_ender}
    if len(sys.argv) not in (2, 3) or (len(sys.argv) == 3 and sys.argv[2] not in variants):
        sys.exit("usage: python tests/tiny_model.py OUT_DIR [--full-size | --real-files | --turn-ender]")
    print(variants[sys.argv[2]](sys.argv[1]) if len(sys.argv) == 3 else build(sys.argv[1]))
