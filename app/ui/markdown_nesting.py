"""Keep Markdown nesting within what Chainlit's page can render.

A message of 10,000 ``>`` (or ``"- " * 3000 + "x"``) replaced the chat view with "Maximum call
stack size exceeded" and removed the input box: the page renders nested blocks recursively. In Chromium
(2026-12-03, Chainlit 2.12) 1,000 nested quotes still rendered and 3,000 did not; no real text nests
more than a few levels, so ``MAX_DEPTH`` (32) leaves a wide margin both ways.

``limit_nesting`` is pure and works line by line: a line's block containers are its leading markers
(``>``, ``-``/``*``/``+`` and ``1.``/``1)`` list markers) and its indentation (each nested list needs at
least two more columns). Markers past the limit are escaped with a backslash, so they show as the
characters they are instead of opening another level. Lines inside a top-level fenced code block are
left alone. Text that nests less than the limit comes back unchanged.

``closing_fence`` is the other rule for what follows an answer: a line the app puts under it (the stats, "stopped
by you") must not land inside a code block the answer left open. An answer cut off at its length limit in the middle
of a program did that: the stats line rendered as highlighted Python (issue 35). A blockquote or a list needs no
closing: the blank line before the app's line ends them.
"""
from __future__ import annotations

import re

MAX_DEPTH = 32
_FENCE = re.compile(r"^ {0,3}(```|~~~)")
_ORDERED = re.compile(r"\d{1,9}[.)]")
# A fence line anywhere: its containers (quote '>', list markers, indentation), the fence, and what follows it.
_ANY_FENCE = re.compile(r"^(?P<prefix>(?:[ \t]*(?:>|[-*+](?=[ \t])|\d{1,9}[.)](?=[ \t])))*[ \t]*)"
                        r"(?P<fence>`{3,}|~{3,})(?P<rest>.*)$")
_LIST_MARKER = re.compile(r"[-*+]|\d{1,9}[.)]")


def _marker_at(line: str, i: int) -> int:
    """Length of the container marker starting at ``line[i]`` (0 when there is none)."""
    ch = line[i]
    if ch == ">":
        return 1
    after = line[i + 1:i + 2]
    if ch in "-*+" and after in ("", " ", "\t"):
        return 1
    match = _ORDERED.match(line, i)
    if match and line[match.end():match.end() + 1] in ("", " ", "\t"):
        return match.end() - i
    return 0


def _limit_line(line: str, max_depth: int) -> str:
    out: list[str] = []
    depth = 0.0
    i = 0
    while i < len(line):
        ch = line[i]
        if ch in " \t":
            depth += (4 if ch == "\t" else 1) / 2  # two columns of indentation can open one list level
            out.append(ch)
            i += 1
            continue
        size = _marker_at(line, i)
        if not size:
            break
        depth += 1
        marker = line[i:i + size]
        if depth > max_depth:
            marker = marker[:-1] + "\\" + marker[-1]  # '\>' '\-' '12\.': shown as text, opens nothing
        out.append(marker)
        i += size
        if line[i:i + 1] == " ":  # the space that ends a marker belongs to it, not to the indentation
            out.append(" ")
            i += 1
    if depth <= max_depth:
        return line
    return "".join(out) + line[i:]


def limit_nesting(text: str, max_depth: int = MAX_DEPTH) -> str:
    """``text`` with no line nesting deeper than ``max_depth`` block levels (unchanged when none does)."""
    lines = text.split("\n")
    fenced = None
    for n, line in enumerate(lines):
        fence = _FENCE.match(line)
        if fence and (fenced is None or fence.group(1) == fenced):
            fenced = fence.group(1) if fenced is None else None
            continue
        if fenced is None:
            lines[n] = _limit_line(line, max_depth)
    return "\n".join(lines)


def closing_fence(text: str) -> str:
    """What closes the fenced code block ``text`` leaves open: a newline and the closing fence, or "" when none is
    open. CommonMark's rule: a fence closes with the same character, at least as many, and nothing after it; the
    closer sits in the opener's containers (a quote's '>' repeated, a list marker's width as indentation), else it
    would end the list item and open a new block instead."""
    opened = None  # (prefix, fence) of the open block
    for line in text.split("\n"):
        match = _ANY_FENCE.match(line)
        if not match:
            continue
        fence, rest = match["fence"], match["rest"]
        if opened is None:
            if fence[0] == "`" and "`" in rest:  # ```x``` is inline code, not an opener
                continue
            opened = (match["prefix"], fence)
        elif fence[0] == opened[1][0] and len(fence) >= len(opened[1]) and not rest.strip():
            opened = None
    if opened is None:
        return ""
    prefix = _LIST_MARKER.sub(lambda marker: " " * len(marker.group()), opened[0])
    return ("" if text.endswith("\n") else "\n") + prefix + opened[1]
