"""What may be attached, decided before a file is read: its size, how many, and what kind it is by its first bytes.

The kind comes from the file's own bytes (magic numbers) first and its name second: a browser's MIME type is
whatever the file's extension says, and a binary renamed ``.txt`` must not pass as text.
"""
from __future__ import annotations

import enum
from pathlib import Path

MIB = 2**20
# A multipart upload carries the file plus its form headers and boundaries; this is room for those.
MULTIPART_OVERHEAD_BYTES = 64 * 2**10
# Text kept from one file: about 500,000 tokens, several times the largest context (131,072 for ERNIE-4.5), so
# passage selection has the whole of any real document to choose from, and a chat row stays a few MB.
MAX_DOCUMENT_CHARS = 2_000_000
# A DOCX is a zip: what its parts may unpack to, and how many there may be, before python-docx opens it.
MAX_UNZIPPED_BYTES = 200 * MIB
MAX_ZIP_MEMBERS = 5000
# A member this much bigger than its compressed size, and large, is a bomb (real DOCX XML packs 5-20x).
MAX_ZIP_RATIO = 200
# The extraction process: killed after this long, and refused memory beyond this (resource.RLIMIT_AS).
EXTRACT_SECONDS = 60
EXTRACT_MEMORY_BYTES = 2 * 2**30


class Kind(str, enum.Enum):
    TEXT = "text"
    HTML = "html"
    PDF = "pdf"
    DOCX = "docx"
    IMAGE = "image"
    ARCHIVE = "archive"  # a zip that is not a DOCX
    OLD_OFFICE = "old_office"  # .doc/.xls/.ppt (OLE2): not read; save as DOCX or PDF


_IMAGE_MAGIC = (b"\x89PNG\r\n\x1a\n", b"\xff\xd8\xff", b"GIF87a", b"GIF89a", b"BM", b"II*\x00", b"MM\x00*")
_HTML_SUFFIXES = (".html", ".htm", ".xhtml")
_IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".gif", ".webp", ".bmp", ".tif", ".tiff", ".heic", ".svg", ".avif")


def upload_body_bytes(max_upload_mb: int) -> int:
    """The largest upload request body (one file and its form wrapping) that --max-upload-mb allows."""
    return max_upload_mb * MIB + MULTIPART_OVERHEAD_BYTES


def too_big(path: Path, max_upload_mb: int) -> bool:
    """Over --max-upload-mb, by its size on disk (nothing is read)."""
    return path.stat().st_size > max_upload_mb * MIB


def sniff(path: Path, name: str, mime: str = "") -> Kind:
    """The file's kind from its first bytes, then its name (HTML, images without a magic number such as SVG)."""
    with open(path, "rb") as f:
        head = f.read(16)
    lower = name.lower()
    if head.startswith(b"%PDF-"):
        return Kind.PDF
    if head.startswith(b"PK\x03\x04"):
        return Kind.DOCX if lower.endswith((".docx", ".docm")) else Kind.ARCHIVE
    if head.startswith(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"):
        return Kind.OLD_OFFICE
    if head.startswith(_IMAGE_MAGIC) or (head[:4] == b"RIFF" and head[8:12] == b"WEBP"):
        return Kind.IMAGE
    if mime.startswith("image/") or lower.endswith(_IMAGE_SUFFIXES):
        return Kind.IMAGE
    if lower.endswith(_HTML_SUFFIXES) or mime == "text/html":
        return Kind.HTML
    return Kind.TEXT  # decided when it is read: refused there unless it decodes as text
