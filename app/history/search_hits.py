"""Which version of an answer, and which branch of a question, holds the words a search found a chat by: the chat
is opened showing them (app/ui/question_branches.py ``open_on_searched_branch``, then app/ui/answer_versions.py
``open_on_searched_version``). Words are matched as search matches them (app/history/data_layer.py: lower-cased
substrings); only words the chat's shown messages miss move what is shown, to the version or branch holding the
most of them."""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Optional

from app.history.messages import (
    branches_search_text,
    shown_branch,
    shown_index,
    stored_branches,
    stored_versions,
    versions_search_text,
)


def words_missing(steps: Iterable[dict[str, Any]], words: Iterable[str]) -> list[str]:
    """The words no shown message of the chat holds."""
    shown = "\n".join(str(step.get("output") or "") for step in steps if "message" in str(step.get("type"))).lower()
    return [word for word in words if word not in shown]


def _most_words(texts: list[str], words: list[str]) -> Optional[int]:
    counts = [sum(word in text.lower() for word in words) for text in texts]
    best = max(counts, default=0)
    return counts.index(best) if best else None


def version_holding(metadata: Optional[dict[str, Any]], words: list[str]) -> Optional[int]:
    """The hidden version of an answer holding the most of ``words`` (the first of equals); None when none holds
    any, or the answer has no versions to show."""
    versions = stored_versions(metadata)
    shown = shown_index(metadata)
    if not words or shown >= len(versions):
        return None
    return _most_words([version["text"] if n != shown else "" for n, version in enumerate(versions)], words)


def branch_holding(metadata: Optional[dict[str, Any]], words: list[str]) -> Optional[int]:
    """The hidden branch of a question holding the most of ``words`` in its question or the messages after it
    (their versions and nested branches included); None when none holds any."""
    if not words or shown_branch(metadata) is None:
        return None
    texts = []
    for branch in stored_branches(metadata):
        after = branch["after"] or []
        texts.append("" if branch["after"] is None else "\n".join(
            [branch["text"], *(text for message in after for text in (
                message["output"], versions_search_text(message["metadata"]),
                branches_search_text(message["metadata"])))]))
    return _most_words(texts, words)


def branch_to_open(steps: list[dict[str, Any]], words: Iterable[str]) -> Optional[tuple[str, int]]:
    """The question (its message id) and its hidden branch to switch to so that the chat shows the searched words
    the shown chat misses; None when no branch holds any. The first such question in the chat is named: switching
    it changes every message after it."""
    missing = words_missing(steps, words)
    for step in steps:
        found = branch_holding(step.get("metadata"), missing)
        if found is not None:
            return str(step.get("id")), found
    return None
