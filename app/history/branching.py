"""What an edit and a switch do to a question's branches (the stored shape is app/history/messages.py's).

An edit keeps the question as it was asked and every message after it as a branch, and shows the new question;
a switch keeps the shown branch's messages in its place and hands back another branch's to show. Both return the
question's new metadata, or why it is not made (``Refused``) when it would not be kept whole (the question holds
MAX_BRANCHES already, or the branches would nest deeper than MAX_BRANCH_DEPTH): nothing is ever dropped to make room.
"""
from __future__ import annotations

import enum
from typing import Any, Optional, Union

from app.history.messages import (
    BRANCH_MESSAGE_KEYS,
    BRANCH_SHOWN,
    BRANCHES,
    MAX_BRANCHES,
    shown_branch,
    stored_branches,
)


class Refused(enum.Enum):
    """Why an edit or a switch is not made (each has its line for the page)."""
    FULL = "branches_full"  # the question keeps MAX_BRANCHES already
    TOO_DEEP = "branches_too_deep"  # the branches would nest deeper than MAX_BRANCH_DEPTH
    NO_SUCH_BRANCH = "branch_not_there"  # not another branch of this question (the chat changed, or a forged click)


def kept_message(type_: str, name: str, output: str, metadata: Optional[dict[str, Any]]) -> dict[str, Any]:
    """A message as a hidden branch keeps it (its versions and its own branches are in its metadata)."""
    return dict(zip(BRANCH_MESSAGE_KEYS, (type_, name, output, dict(metadata or {})), strict=True))


def _checked(metadata: dict[str, Any]) -> Union[dict[str, Any], Refused]:
    """``metadata`` when its branches read back as stored (count, depth, one shown), else why not."""
    if stored_branches(metadata) and shown_branch(metadata) is not None:
        return metadata
    return Refused.FULL if len(metadata[BRANCHES]) > MAX_BRANCHES else Refused.TOO_DEEP


def with_edit_kept(metadata: Optional[dict[str, Any]], asked: str, after: list[dict[str, Any]],
                   new_text: str) -> Union[dict[str, Any], Refused]:
    """A question's metadata once it is edited to ``new_text``: the question as it was ``asked``, with the
    messages ``after`` it, kept as a branch, and the new question shown as the newest branch."""
    meta = dict(metadata or {})
    branches = [dict(branch) for branch in stored_branches(meta)]
    shown = shown_branch(meta)
    if shown is None:  # never edited (or its branches unreadable: they are read as none, as everywhere)
        branches, shown = [{"text": asked, "after": None}], 0
    branches[shown] = {"text": asked, "after": after}
    branches.append({"text": new_text, "after": None})
    return _checked({**meta, BRANCHES: branches, BRANCH_SHOWN: len(branches) - 1})


def with_branch_switched(metadata: Optional[dict[str, Any]], shown_text: str, shown_after: list[dict[str, Any]],
                         index: int) -> Union[tuple[str, list[dict[str, Any]], dict[str, Any]], Refused]:
    """The question's text, the messages to show after it, and its metadata, once branch ``index`` is shown: the
    branch shown until now keeps ``shown_text`` and ``shown_after`` (the page's messages after the question)."""
    meta = dict(metadata or {})
    branches = [dict(branch) for branch in stored_branches(meta)]
    shown = shown_branch(meta)
    if shown is None or not 0 <= index < len(branches) or index == shown:
        return Refused.NO_SUCH_BRANCH
    chosen = branches[index]
    branches[shown] = {"text": shown_text, "after": shown_after}
    branches[index] = {"text": chosen["text"], "after": None}
    switched = _checked({**meta, BRANCHES: branches, BRANCH_SHOWN: index})
    return switched if isinstance(switched, Refused) else (chosen["text"], list(chosen["after"] or []), switched)
