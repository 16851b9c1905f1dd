"""Markdown nesting kept within what the page renders (issue 16 item 6); the browser side is in
tests/e2e/test_page_safety.py."""
import pytest

from app.ui.markdown_nesting import MAX_DEPTH, closing_fence, limit_nesting


@pytest.mark.parametrize("text", [
    "plain text", "# Title\n\n- a\n  - b\n    - c\n\n> quote\n> > inner\n\n1. one\n2) two\n\n```\n>>>>\n```",
    "- " * MAX_DEPTH + "x", ">" * MAX_DEPTH + " x", "2024. was a year", "-not a list", "**bold** - dash",
])
def test_ordinary_markdown_is_unchanged(text):
    assert limit_nesting(text) == text


def depth_markers(line):
    """Unescaped leading block markers of a line."""
    count, i = 0, 0
    while i < len(line) and line[i] in "> -*+\t":
        if line[i] in ">-*+":
            count += 1
        elif line[i] == "\\":
            break
        i += 1
    return count


@pytest.mark.parametrize("text", ["- " * 1000 + "x", ">" * 10000, "> " * 5000 + "x", "1. " * 2000 + "x",
                                  " " * 2000 + "- x", "* + - " * 500])
def test_deep_nesting_is_cut_to_the_limit_and_keeps_the_text(text):
    safe = limit_nesting(text)
    assert depth_markers(safe) <= MAX_DEPTH
    assert safe.replace("\\", "") == text  # only backslashes added: every character still shows


def test_fenced_code_is_left_alone():
    code = "```\n" + ">" * 100 + "\n```"
    assert limit_nesting(code) == code
    assert limit_nesting(code + "\n" + ">" * 100) == code + "\n" + limit_nesting(">" * 100)


@pytest.mark.parametrize("text, closer", [
    ("plain text", ""),
    ("```python\nprint(1)", "\n```"),  # cut off inside the program: closed before the app's lines
    ("```python\nprint(1)\n", "```"),
    ("```python\nprint(1)\n```", ""),
    ("````\n```\nx", "\n````"),  # a longer fence is closed only by as long a one
    ("~~~\n```\nx", "\n~~~"),  # the other character does not close it
    ("- step\n  ```sh\n  ls", "\n  ```"),  # inside a list item: the closer keeps its indentation
    ("- ```sh\n  ls", "\n  ```"),  # the marker's width, not the marker (which would start a new item)
    ("> ```\n> quoted code", "\n> ```"),  # inside a quote: the closer is quoted too
    ("```x``` is inline code", ""),
    ("> a quote\n- a list", ""),  # the blank line before the app's line ends these
])
def test_a_code_block_left_open_is_closed_before_the_apps_lines(text, closer):
    assert closing_fence(text) == closer
