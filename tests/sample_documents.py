"""Documents for the attach tests and the bench, written in the test (fpdf2 for PDFs with a real text layer,
python-docx for DOCX), and the bad ones: an encrypted PDF, a damaged PDF, a zip-bomb DOCX, a binary named .txt,
a PNG."""
from __future__ import annotations

import zipfile
from collections.abc import Sequence
from pathlib import Path


def pdf(path: Path, pages: Sequence[str]) -> Path:
    """A PDF with one page per text (Helvetica: Latin-1 text only)."""
    from fpdf import FPDF

    doc = FPDF()
    doc.set_font("Helvetica", size=11)
    for text in pages:
        doc.add_page()
        doc.multi_cell(0, 6, text)
    doc.output(str(path))
    return path


def encrypted_pdf(path: Path, text: str = "secret plans") -> Path:
    from pypdf import PdfReader, PdfWriter

    plain = pdf(path.with_name("plain-" + path.name), [text])
    writer = PdfWriter(clone_from=PdfReader(plain))
    writer.encrypt(user_password="open sesame", owner_password="owner", algorithm="AES-128")
    writer.write(path)
    return path


def corrupt_pdf(path: Path) -> Path:
    path.write_bytes(b"%PDF-1.7\n1 0 obj\n<< /Type /Catalog /Pages 2 0 R >>\ngarbage \x00\x01 that is no PDF\n")
    return path


def docx(path: Path, paragraphs: Sequence[str], table: Sequence[Sequence[str]] = ()) -> Path:
    import docx as python_docx

    document = python_docx.Document()
    for text in paragraphs:
        document.add_paragraph(text)
    if table:
        grid = document.add_table(rows=len(table), cols=len(table[0]))
        for r, row in enumerate(table):
            for c, cell in enumerate(row):
                grid.cell(r, c).text = cell
    document.save(str(path))
    return path


def zip_bomb_docx(path: Path, unpacked_mb: int = 300) -> Path:
    """A DOCX-shaped zip whose document.xml unpacks to ``unpacked_mb`` MB of zeros (a few hundred KB packed)."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as archive:
        archive.writestr("[Content_Types].xml", "<Types/>")
        with archive.open("word/document.xml", "w", force_zip64=True) as member:
            block = b"0" * 2**20
            for _ in range(unpacked_mb):
                member.write(block)
    return path


def binary_as_txt(path: Path) -> Path:
    path.write_bytes(bytes(range(256)) * 64)  # every byte value, NULs included
    return path


def png(path: Path) -> Path:
    import struct
    import zlib

    def part(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + part(b"IHDR", header) + part(b"IDAT", zlib.compress(b"\x00\xff\x00\x00"))
                     + part(b"IEND", b""))
    return path
