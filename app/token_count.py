"""How the app counts tokens: each text alone, without special tokens, in one batch call (linear in the total
length). One rule for the chat's prompt fitting (app/conversation.py) and the document fitting that runs in a
reader process (app/documents/fitting.py), which has only the tokenizers library's tokenizer, not transformers'."""
from __future__ import annotations

from typing import Any


def count_with(backend: Any, texts: list[str]) -> list[int]:
    """``backend``: a ``tokenizers.Tokenizer`` (a fast transformers tokenizer's ``backend_tokenizer``)."""
    if not texts:
        return []
    return [len(encoding.ids) for encoding in backend.encode_batch(texts, add_special_tokens=False)]
