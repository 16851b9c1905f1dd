"""How the app counts tokens: each text alone, without special tokens, in one batch call (linear in the total
length). One rule for the chat's prompt fitting (app/conversation.py) and the document fitting that runs in a
reader process (app/documents/fitting.py), which has only the tokenizers library's tokenizer, not transformers'."""
from __future__ import annotations

from typing import Any, TypeVar

T = TypeVar("T")


def without_word_cache(tokenizer: T) -> T:
    """``tokenizer`` (a ``tokenizers.Tokenizer``, or a fast transformers tokenizer) with its model's word cache off.

    The tokenizers library (0.23) keeps, in every thread that encodes (``encode_batch`` runs on its thread pool:
    one thread per core), up to 10,000 encoded "words" of up to 256 characters, and never empties them. ERNIE's
    tokenizer splits only at special tokens, so each short message is one such word, about 7 KB cached: counting
    30,000 distinct short messages left the app 144 MiB larger on 2 cores, and a workstation has 8 to 32 (the
    cache's cost and speed: docs/benchmarks.md, "Tokenizer word cache"). Chat messages rarely repeat whole, so the
    cache buys almost nothing here. A model without that control is left as it is."""
    backend = getattr(tokenizer, "backend_tokenizer", tokenizer)
    resize = getattr(getattr(backend, "model", None), "_resize_cache", None)
    if resize is not None:
        resize(0)
    return tokenizer


def count_with(backend: Any, texts: list[str]) -> list[int]:
    """``backend``: a ``tokenizers.Tokenizer`` (a fast transformers tokenizer's ``backend_tokenizer``)."""
    if not texts:
        return []
    return [len(encoding.ids) for encoding in backend.encode_batch(texts, add_special_tokens=False)]
