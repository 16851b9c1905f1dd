"""What a reader process runs for a "fit" job (app/documents/worker.py): ``fit_documents`` with the app's tokenizer
loaded from the file app/documents/fitting.py saved, its tokens counted in bounded batches."""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from app.documents.prompt import fit_documents
from app.token_count import count_with, without_word_cache

# The reader process counts in batches of at most this many characters: a 2-million-character document's tokens
# (about 100 bytes each in the tokenizers library) counted at once would take most of its memory cap.
BATCH_CHARS = 256_000


def fit_with_tokenizer_file(documents: list[dict[str, Any]], question: str, room: int,
                            tokenizer_file: Path) -> list[dict[str, Any]]:
    """In the reader process: ``fit_documents`` with the app's tokenizer loaded from ``tokenizer_file``."""
    from tokenizers import Tokenizer

    backend = without_word_cache(Tokenizer.from_file(str(tokenizer_file)))
    return [dataclasses.asdict(fit) for fit in fit_documents(documents, question, room,
                                                              lambda texts: _count_in_batches(backend, texts))]


def _count_in_batches(backend: Any, texts: list[str]) -> list[int]:
    counts: list[int] = []
    batch: list[str] = []
    size = 0
    for text in texts:
        if batch and size + len(text) > BATCH_CHARS:
            counts += count_with(backend, batch)
            batch, size = [], 0
        batch.append(text)
        size += len(text)
    return counts + count_with(backend, batch)
