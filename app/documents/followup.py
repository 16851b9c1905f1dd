"""A later question about a document that was sent only in part gets the passages for its own question.

A document larger than the room is sent as the passages most relevant to the question it came with (prompt.py).
Later turns render that turn as the model saw it, so a follow-up question about another part of the document
(the 17-page PDF's "magic priority", then "what do indent, range-length and word-size default to") was answered
from the first question's passages, and nothing said so (issue 35 item 5). Now a new question whose most relevant
passage of such a document was not sent has the document fitted again for itself, sent with its own turn; what it
was given is kept with its message as that text (the chosen passages, not the whole document again: a large file
is kept once, with the message it came with). A question the chat's passages already answer adds nothing.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence

from app.documents import passages
from app.documents.prompt import Document, Fit

# A document entry that holds only the passages one question was given of a document an earlier turn carried.
PASSAGES_OF = "passages_of"


def needing_passages(earlier_turns: Iterable[Sequence[Document]], question: str) -> list[Document]:
    """The documents earlier turns sent only in part whose passage most relevant to ``question`` was not sent, each
    once, as entries to fit again for it. A question no passage matches ("thanks!"), or whose best passage the chat
    already carries, adds nothing: its prompt stays as short as before. Entries that are themselves one question's
    passages are not documents of their own. Runs off the event loop (it indexes each document's passages)."""
    sent: dict[tuple[str, str], set[int]] = {}
    found: dict[tuple[str, str], Document] = {}
    for documents in earlier_turns:
        for document in documents:
            if document.get(PASSAGES_OF) or document.get("used") is None:
                continue
            key = (document["name"], document["text"])
            sent.setdefault(key, set()).update(document["used"])
            found.setdefault(key, {**{k: v for k, v in document.items() if k != "used"}, PASSAGES_OF: True})
    needed = []
    for key, document in found.items():
        best = passages.rank(passages.chunk(document["text"], document.get("page_starts")), question)[:1]
        if best and best[0] not in sent[key]:
            needed.append(document)
    return needed


def as_sent(document: Document, fit: Fit) -> Document:
    """What one question was given of an earlier turn's document, as the entry kept with its message: the chosen
    passages as its text (rendered whole from then on), or nothing (``used`` []) when no room was left."""
    if not document.get(PASSAGES_OF) or fit.used is None:
        return document
    kept = {k: v for k, v in document.items() if k not in ("used", "page_starts")}
    if not fit.used:
        return {**kept, "text": "", "used": []}
    chunks = passages.chunk(document.get("text", ""), document.get("page_starts"))
    return {**kept, "text": passages.joined(chunks, fit.used)}
