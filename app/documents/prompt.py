"""Documents into the user's turn: each inside ``<document name="...">`` ... ``</document>`` before the question, whole
when the context has room, else the passages most relevant to the question (passages.py).

A document is a dict kept in the user message's metadata (attach.py): ``name``, ``kind``, ``text``, ``page_starts``
(PDFs) and, once only some of it was sent, ``used`` (the chunk indexes), so a later prompt of the same chat
renders that turn as the model saw it.
"""
from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Optional

from app.documents import passages

Document = dict[str, Any]
Counter = Callable[[list[str]], list[int]]
DOCUMENTS = "documents"  # the metadata key of a user message that holds its documents


def _ints(value: Any) -> Optional[list[int]]:
    if isinstance(value, list) and all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in value):
        return value
    return None


def documents_of(metadata: Any) -> list[Document]:
    """The documents kept with a user message, each checked: an imported chat file is as hostile as any input,
    and a malformed entry (a string, no text, page offsets or passage numbers that are not counts) is skipped
    rather than breaking the chat's every later prompt, its resume, export and document links."""
    found = metadata.get(DOCUMENTS) if isinstance(metadata, dict) else None
    kept: list[Document] = []
    for entry in found if isinstance(found, list) else []:
        if not (isinstance(entry, dict) and isinstance(entry.get("name"), str) and isinstance(entry.get("text"), str)):
            continue
        document = {k: v for k, v in entry.items() if k not in ("page_starts", "used")}
        document["page_starts"] = _ints(entry.get("page_starts"))
        if "used" in entry and _ints(entry["used"]) is not None:
            document["used"] = entry["used"]
        kept.append(document)
    return kept
# What would end a document's delimiter early, in any case or spacing (``</document>``, ``< /DOCUMENT >``).
_CLOSING_TAG = re.compile(r"<\s*/\s*document\s*>", re.IGNORECASE)
# Below this many tokens of room a document is left out rather than cut to a sliver.
MIN_DOCUMENT_TOKENS = 32


def _attribute(name: str) -> str:
    return (name.replace("\\", "/").replace('"', "'").replace("\r", " ").replace("\n", " ")
            .replace("<", "(").replace(">", ")"))


def _body(document: Document) -> str:
    text = document.get("text", "")
    used = document.get("used")
    if used is not None:
        chunks = passages.chunk(text, document.get("page_starts"))
        text = passages.joined(chunks, [i for i in used if i < len(chunks)])
    # The document's own text cannot close its delimiter early.
    return _CLOSING_TAG.sub("</ document>", text)


def block(document: Document, body: Optional[str] = None) -> str:
    return f'<document name="{_attribute(document["name"])}">\n{_body(document) if body is None else body}\n</document>'


def render_turn(question: str, documents: Optional[Sequence[Document]]) -> str:
    """The user's turn as the model reads it: the documents, then what the user typed."""
    if not documents:
        return question
    blocks = [block(d) for d in documents if d.get("used") != []]  # [] : no room was left for it
    return "\n\n".join(blocks + ([question] if question.strip() else []))


@dataclass(frozen=True)
class Fit:
    """What one document costs, the room it was given, and what of it goes in (``used`` None: all of it)."""

    name: str
    tokens: int
    room: int
    used: Optional[list[int]] = None
    where: Optional[tuple[str, str]] = None  # ("pages" | "lines", "3-5, 9") when only passages go in
    passages: int = 0  # how many passages the document has, when only some go in

    @property
    def passages_left_out(self) -> int:
        return self.passages - len(self.used or ())

    @property
    def left_out(self) -> bool:
        return self.used == []


def fit_documents(documents: Sequence[Document], question: str, room: int, count: Counter) -> list[Fit]:
    """Share ``room`` tokens among the documents: the smallest first, each whole when it fits in its share of
    what is left, otherwise its passages most relevant to ``question``. Fits come back in the documents' order."""
    whole = count([block(d, d.get("text", "")) for d in documents])
    wrapper = count([block(d, "") for d in documents])
    fits: dict[int, Fit] = {}
    order = sorted(range(len(documents)), key=lambda i: whole[i])
    left = room
    for n, i in enumerate(order):
        share = left // (len(order) - n)
        document = documents[i]
        if whole[i] <= share:
            fits[i] = Fit(document["name"], whole[i], share)
            left -= whole[i]
            continue
        budget = share - wrapper[i]
        if budget < MIN_DOCUMENT_TOKENS:
            fits[i] = Fit(document["name"], whole[i], max(share, 0), used=[])
            continue
        chunks = passages.chunk(document.get("text", ""), document.get("page_starts"))
        chosen = passages.select(chunks, question, budget, count)
        spent = wrapper[i] + sum(count([passages.joined(chunks, chosen)])) if chosen else 0
        fits[i] = Fit(document["name"], whole[i], share, used=chosen,
                      where=passages.where(chunks, chosen) if chosen else None, passages=len(chunks))
        left -= spent
    return [fits[i] for i in range(len(documents))]


def apply(documents: Sequence[Document], fits: Sequence[Fit]) -> list[Document]:
    """The documents as they go into this prompt (and are kept): ``used`` set where only passages went in; a
    document left out entirely is dropped from the prompt but its entry stays (``used`` = [])."""
    kept = []
    for document, fit in zip(documents, fits, strict=True):
        document = {k: v for k, v in document.items() if k != "used"}
        if fit.used is not None:
            document["used"] = fit.used
        kept.append(document)
    return kept
