"""A message's documents fitted into the context (prompt.py's ``fit_documents``): large ones in a reader process,
not in the app's (issue 36, N9).

Fitting a document longer than the room left tokenizes it whole, then each of its passages. Done in the app, 3 chats
with 5 files each grew it from ~740 MiB to 2,605 MiB, and it still held 1,829 MiB 12 minutes later: the tokenizer's
buffers were allocated on the app's worker threads, and glibc keeps what a thread freed for that thread. Above
``IN_APP_CHARS`` of text the fitting runs in a reader process (app/documents/worker.py: the time limit, memory cap
and users' turns of reading a file), which loads the app's tokenizer from a file written once into the app's private
files folder (ERNIE's tokenizer is built from its SentencePiece model as it loads: there is no tokenizer.json on
disk to point at). Up to it the app fits them itself: a short file's answer waits for no process to start.
"""
from __future__ import annotations

import asyncio
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any, Optional

from app.documents.prompt import Fit, fit_documents
from app.documents.worker import fit_in_worker

# Text a message's documents may have for the app to fit them itself: tokenized on its threads, that stays a few
# MiB at most (a whole document that fits is tokenized for the prompt anyway).
IN_APP_CHARS = 32_000
TOKENIZER_FILE = "tokenizer.json"
_saved: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # tokenizer -> its file, written once


async def fit_in_context(documents: list[dict[str, Any]], question: str, room: int, tokenizer: Any,
                         count: Callable[[list[str]], list[int]], owner: Optional[str] = None) -> list[Fit]:
    """The documents' fits in ``room`` tokens. ``count``: the app's own counter (ChatTemplate.count), used when the
    app fits them itself; ``owner``: the user they are fitted for (their turn for a reader process). Raises
    DocumentRefused when the reader process fails (too slow, too much memory)."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    # A tokenizer without the tokenizers library's backend cannot be handed to another process as a file.
    if backend is None or sum(len(d.get("text", "")) for d in documents) <= IN_APP_CHARS:
        return await asyncio.to_thread(fit_documents, documents, question, room, count)
    fits = await fit_in_worker(documents, question, room, _tokenizer_file(tokenizer, backend), owner=owner)
    return [Fit(**{**fit, "where": tuple(fit["where"]) if fit["where"] else None}) for fit in fits]


def _tokenizer_file(tokenizer: Any, backend: Any) -> Path:
    from app.chainlit_internals import files_directory

    path = _saved.get(tokenizer)
    if path is None or not path.exists():
        path = files_directory() / TOKENIZER_FILE
        backend.save(str(path))
        _saved[tokenizer] = path
    return path
