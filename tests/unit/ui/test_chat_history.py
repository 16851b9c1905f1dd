"""The Content-Disposition of a download (app/ui/chat_history.py): any stored file or chat name gives a header uvicorn
sends, and the browser gets the real name (N17: a NUL in a file's name dropped its document link's connection)."""
from urllib.parse import unquote

import pytest

from app.ui.chat_history import attachment


@pytest.mark.parametrize("name, ascii_name, real_name", [
    ("notes\x00\x1b\x7f\x85.txt", "notes.txt", "notes.txt"),
    ('say "hi" \\ bye.md', "say _hi_ _ bye.md", 'say "hi" \\ bye.md'),
    ("报告.pdf.txt", "__.pdf.txt", "报告.pdf.txt"),
    ("\x00\r\n", "download", "download"),
])
def test_any_name_gives_a_header_of_printable_ascii_with_the_real_name_encoded(name, ascii_name, real_name):
    header = attachment(name)
    assert all(" " <= c <= "~" for c in header), header
    assert f'filename="{ascii_name}"' in header
    assert unquote(header.split("filename*=UTF-8''", 1)[1]) == real_name
