"""A document longer than the room left in the context -> the chunks most relevant to the question.

Chunks are runs of whole lines (about ``CHUNK_CHARS``), ranked by BM25 with SQLite FTS5's ``bm25()`` in an in-memory
database (the stdlib sqlite3 has FTS5; no new dependency). CJK text has no spaces between words, so each CJK
character is indexed as a token of its own and the question's CJK runs are searched as two-character phrases.
The chosen chunks go in in document order, each headed by where it is (page for a PDF, lines otherwise), and the
chat says which pages or lines were used.
"""
from __future__ import annotations

import bisect
import re
import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Optional

JOIN_TOKENS = 4
CHUNK_CHARS = 1500  # ~400 tokens: small enough to pick precisely, large enough to keep a paragraph whole
COUNT_BATCH = 32  # chunks counted at a time while choosing
_CJK = re.compile(r"([\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u3040-\u30ff\uac00-\ud7af])")
_WORD = re.compile(r"[^\W_]+", re.UNICODE)


@dataclass(frozen=True)
class Chunk:
    index: int
    text: str
    first_line: int  # 1-based
    last_line: int
    pages: Optional[tuple[int, int]] = None  # PDFs only: the first and last page (1-based) it is on


def chunk(text: str, page_starts: Optional[Sequence[int]] = None, size: int = CHUNK_CHARS) -> list[Chunk]:
    """The text in runs of whole lines of about ``size`` characters (a longer line is cut into pieces)."""
    pieces: list[tuple[int, int, str]] = []  # (line number, offset in text, text)
    at = 0
    for number, line in enumerate(text.split("\n"), 1):
        for cut in range(0, max(len(line), 1), size):
            pieces.append((number, at + cut, line[cut:cut + size]))
        at += len(line) + 1
    chunks: list[Chunk] = []
    group: list[tuple[int, int, str]] = []

    def flush() -> None:
        body = "\n".join(p[2] for p in group)
        if body.strip():
            pages = None
            if page_starts:
                end = group[-1][1] + len(group[-1][2])
                pages = (bisect.bisect_right(page_starts, group[0][1]), bisect.bisect_right(page_starts, end - 1))
            chunks.append(Chunk(len(chunks), body, group[0][0], group[-1][0], pages))
        group.clear()

    length = 0
    for piece in pieces:
        if group and length + len(piece[2]) > size:
            flush()
            length = 0
        group.append(piece)
        length += len(piece[2]) + 1
    if group:
        flush()
    return chunks


def _spaced(text: str) -> str:
    return _CJK.sub(r" \1 ", text)


def _query(question: str) -> str:
    """An FTS5 query: any word of the question (OR), CJK runs as two-character phrases; '' when none."""
    terms: list[str] = []
    for word in _WORD.findall(question.lower()):
        if _CJK.search(word):
            chars = _CJK.findall(word)
            terms += [f'"{a} {b}"' for a, b in zip(chars, chars[1:], strict=False)] or [f'"{c}"' for c in chars]
            rest = _CJK.sub(" ", word).split()
            terms += [f'"{w}"' for w in rest if len(w) > 1]
        elif len(word) > 1:
            terms.append(f'"{word}"')
    return " OR ".join(dict.fromkeys(terms))


def rank(chunks: Sequence[Chunk], question: str) -> list[int]:
    """Indexes of the chunks that match a word of ``question``, most relevant first (BM25)."""
    query = _query(question)
    ranked: list[int] = []
    if query:
        db = sqlite3.connect(":memory:")
        try:
            db.execute("CREATE VIRTUAL TABLE chunks USING fts5(body, tokenize='unicode61 remove_diacritics 2')")
            db.executemany("INSERT INTO chunks(rowid, body) VALUES (?, ?)",
                           ((c.index, _spaced(c.text)) for c in chunks))
            ranked = [row[0] for row in db.execute(
                "SELECT rowid FROM chunks WHERE chunks MATCH ? ORDER BY bm25(chunks)", (query,))]
        finally:
            db.close()
    return ranked


def select(chunks: Sequence[Chunk], question: str, budget: int,
           count: Callable[[list[str]], list[int]]) -> list[int]:
    """The most relevant chunks whose tokens (``count``, headers included) fit in ``budget``, in document order;
    when no chunk matches the question (or it has no words), the document's beginning.

    Chunks are counted in order of relevance, a batch at a time, until a whole batch adds none: a document of
    millions of characters is not tokenized to its end to fill a room of a few thousand tokens."""
    order = rank(chunks, question) or list(range(len(chunks)))
    chosen, spent = [], 0
    for start in range(0, len(order), COUNT_BATCH):
        batch = order[start:start + COUNT_BATCH]
        added = False
        # + JOIN_TOKENS: the newline before a chunk and the "[...]" mark of a gap, so the joined text keeps to budget
        for index, cost in zip(batch, count([heading(chunks[i]) + chunks[i].text for i in batch]), strict=True):
            if spent + cost + JOIN_TOKENS <= budget:
                chosen.append(index)
                spent += cost + JOIN_TOKENS
                added = True
        if not added:
            break
    return sorted(chosen)


def heading(c: Chunk) -> str:
    if c.pages is not None:
        first, last = c.pages
        return f"[page {first}]\n" if first == last else f"[pages {first}-{last}]\n"
    return f"[lines {c.first_line}-{c.last_line}]\n"


def joined(chunks: Sequence[Chunk], chosen: Sequence[int]) -> str:
    """The chosen chunks, each under its heading, with a gap mark between chunks that are not neighbours."""
    parts = []
    for n, index in enumerate(chosen):
        if n and index != chosen[n - 1] + 1:
            parts.append("[...]")
        parts.append(heading(chunks[index]) + chunks[index].text)
    return "\n".join(parts)


def ranges(numbers: Sequence[int]) -> str:
    """[3, 4, 5, 9] -> '3-5, 9'."""
    spans: list[list[int]] = []
    for n in sorted(set(numbers)):
        if spans and n == spans[-1][1] + 1:
            spans[-1][1] = n
        else:
            spans.append([n, n])
    return ", ".join(f"{a}-{b}" if a != b else str(a) for a, b in spans)


def where(chunks: Sequence[Chunk], chosen: Sequence[int]) -> tuple[str, str]:
    """('pages', '3-5, 9') for a PDF, ('lines', '1-40, 120-160') otherwise."""
    picked = [chunks[i] for i in chosen]
    if picked and picked[0].pages is not None:
        return "pages", ranges([n for c in picked if c.pages for n in range(c.pages[0], c.pages[1] + 1)])
    spans: list[list[int]] = []
    for c in picked:
        if spans and c.first_line <= spans[-1][1] + 1:
            spans[-1][1] = max(spans[-1][1], c.last_line)
        else:
            spans.append([c.first_line, c.last_line])
    return "lines", ", ".join(f"{a}-{b}" if a != b else str(a) for a, b in spans)
