"""Control characters: the one rule of which characters are controls, for every text the app takes from outside
(a message, a file's name, an imported chat's title). They are C0 (U+0000-U+001F), DEL (U+007F) and C1
(U+0080-U+009F): they mean nothing in a chat, confuse the tokenizer, and in a header or a one-line name break it (a
NUL in a file's name made its document link a dropped connection: issue 36, N17).
"""
from __future__ import annotations

import re

CONTROL_CODES = (*range(0x00, 0x20), 0x7F, *range(0x80, 0xA0))


def controls_except(keep: str = "") -> re.Pattern[str]:
    """A pattern matching one control character, those in ``keep`` (tab and newline, in a message) left out."""
    return re.compile("[" + "".join(f"\\x{code:02x}" for code in CONTROL_CODES if chr(code) not in keep) + "]")


CONTROLS = controls_except()  # in a name or a title: one line, nothing invisible
CONTROLS_IN_TEXT = controls_except("\t\n")  # in a message: its tabs and lines stay


def without_controls(text: str, instead: str = "") -> str:
    """``text`` with each control character (tab and newline too) taken out, or replaced by ``instead``."""
    return CONTROLS.sub(instead, text)
