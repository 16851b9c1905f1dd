"""A file's text, by kind, with well-kept libraries: pypdf (a PDF's text layer), python-docx, BeautifulSoup (HTML with
the stdlib html.parser). Runs inside the worker process (worker.py), never in the app's event loop.

Every refusal is a ``DocumentRefused`` with a reason the chat turns into one line.
"""
from __future__ import annotations

import re
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from app.conversation import clean_message
from app.documents.limits import MAX_UNZIPPED_BYTES, MAX_ZIP_MEMBERS, MAX_ZIP_RATIO, MIB, Kind
from app.errors import DocumentRefused

# Controls other than tab, newline, carriage return and form feed: text has next to none, binaries plenty.
_BINARY_CONTROLS = re.compile(r"[\x00-\x08\x0b\x0e-\x1f]")
BINARY_CONTROL_SHARE = 0.01
_BLANK_RUNS = re.compile(r"\n\s*\n\s*\n+")


@dataclass
class Extracted:
    """The text, and for a PDF where each page starts in it (``page_starts[i]``: page i + 1's first character)."""

    text: str
    page_starts: Optional[list[int]] = None
    truncated: bool = False


def extract(path: Path, name: str, kind: Kind, max_chars: int) -> Extracted:
    readers = {Kind.TEXT: _text, Kind.HTML: _html, Kind.PDF: _pdf, Kind.DOCX: _docx}
    if kind is Kind.IMAGE:
        raise DocumentRefused("image", name)
    if kind is Kind.ARCHIVE:
        raise DocumentRefused("unsupported", name, what="zip")
    if kind is Kind.OLD_OFFICE:
        raise DocumentRefused("unsupported", name, what="Office 97-2003")
    found = readers[kind](path, name)
    # A PDF's pages are cleaned one by one (_pdf), so that page_starts stay true offsets into the text.
    text = (found.text if found.page_starts is not None else clean_message(found.text).text).rstrip()
    if not text.strip():
        raise DocumentRefused("no_text" if kind is Kind.PDF else "empty", name)
    if len(text) > max_chars:
        found.text, found.truncated = text[:max_chars], True
    else:
        found.text = text
    return found


def decode_text(data: bytes, name: str) -> str:
    """Bytes as text (UTF-8, UTF-16 with its BOM, GB18030), or refused as binary."""
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        try:
            return data.decode("utf-16")
        except UnicodeDecodeError:
            raise DocumentRefused("binary", name) from None
    if b"\x00" in data:
        raise DocumentRefused("binary", name)
    for encoding in ("utf-8-sig", "gb18030"):
        try:
            text = data.decode(encoding)
            break
        except UnicodeDecodeError:
            continue
    else:
        raise DocumentRefused("binary", name)
    if len(_BINARY_CONTROLS.findall(text)) > BINARY_CONTROL_SHARE * max(len(text), 1):
        raise DocumentRefused("binary", name)
    return text


def _text(path: Path, name: str) -> Extracted:
    return Extracted(decode_text(path.read_bytes(), name))


def _html(path: Path, name: str) -> Extracted:
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(decode_text(path.read_bytes(), name), "html.parser")
    for hidden in soup(["script", "style", "noscript", "template", "head"]):
        hidden.decompose()
    return Extracted(_BLANK_RUNS.sub("\n\n", soup.get_text("\n")))


def _pdf(path: Path, name: str) -> Extracted:
    from pypdf import PdfReader
    from pypdf.errors import FileNotDecryptedError, PyPdfError

    try:
        reader = PdfReader(path)
        # A PDF encrypted with an empty user password opens in any viewer without asking: read it the same way.
        if reader.is_encrypted and not reader.decrypt(""):
            raise DocumentRefused("encrypted", name)
        parts, starts, at = [], [], 0
        for page in reader.pages:
            starts.append(at)
            text = clean_message(page.extract_text() or "").text.strip() + "\n\n"
            parts.append(text)
            at += len(text)
    except DocumentRefused:
        raise
    except FileNotDecryptedError:
        raise DocumentRefused("encrypted", name) from None
    except (PyPdfError, ValueError, KeyError, TypeError, AttributeError, IndexError, OSError, RecursionError,
            NotImplementedError) as err:  # pypdf's ways of meeting a damaged file (its own bomb guard included)
        raise DocumentRefused("corrupt", name, kind="PDF", detail=type(err).__name__) from None
    return Extracted("".join(parts), page_starts=starts)


def check_zip(path: Path, name: str) -> None:
    """Refuse a zip that would unpack to too much (in all, or one member against its packed size), or has too
    many members, from its directory alone: nothing is unpacked."""
    try:
        with zipfile.ZipFile(path) as archive:
            members = archive.infolist()
    except (zipfile.BadZipFile, OSError, ValueError) as err:
        raise DocumentRefused("corrupt", name, kind="DOCX", detail=type(err).__name__) from None
    total = sum(m.file_size for m in members)
    ratio_bomb = any(m.file_size > MIB and m.file_size > MAX_ZIP_RATIO * max(m.compress_size, 1) for m in members)
    if len(members) > MAX_ZIP_MEMBERS or total > MAX_UNZIPPED_BYTES or ratio_bomb:
        raise DocumentRefused("bomb", name, limit=MAX_UNZIPPED_BYTES // MIB)


def _docx(path: Path, name: str) -> Extracted:
    check_zip(path, name)
    import docx

    try:
        document = docx.Document(str(path))
        parts = [p.text for p in document.paragraphs]
        for table in document.tables:
            for row in table.rows:
                parts.append(" | ".join(cell.text for cell in row.cells))
    except Exception as err:  # python-docx has no error family: PackageNotFoundError, KeyError, lxml's XMLSyntaxError
        raise DocumentRefused("corrupt", name, kind="DOCX", detail=type(err).__name__) from None
    return Extracted("\n".join(parts))
