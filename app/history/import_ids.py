"""Ids of their own for an imported chat's messages and elements.

The database keeps one row per message id: a message whose id another chat already had was refused, and ids
repeated in one file were merged into one row, while import said "imported" (a chat with 0 of 2 messages; 3 of
4 kept; issue 36, N14). An id already taken, or seen before in the same chat, gets a new one; what pointed at it
(a message's parent, an element's message) follows the first message that had it.
"""
from __future__ import annotations

import uuid
from typing import Any


def with_own_ids(chat: dict[str, Any], taken_steps: set[str], taken_elements: set[str]) -> dict[str, Any]:
    """``chat`` (our export's shape) with every step and element id unique, none of them in ``taken_*``."""
    renamed: dict[str, str] = {}  # an id in the file -> the id its first message is stored under
    seen: set[str] = set()
    steps = []
    for step in chat["steps"]:
        old = step["id"]
        new = old if old not in taken_steps and old not in seen else str(uuid.uuid4())
        seen.add(new)
        renamed.setdefault(old, new)
        steps.append({**step, "id": new})
    steps = [_follow(step, "parentId", renamed) for step in steps]
    elements = []
    element_ids: set[str] = set()
    for element in chat["elements"]:
        old = element["id"]
        new = old if old not in taken_elements and old not in element_ids else str(uuid.uuid4())
        element_ids.add(new)
        elements.append(_follow({**element, "id": new}, "forId", renamed))
    return {**chat, "steps": steps, "elements": elements}


def _follow(item: dict[str, Any], key: str, renamed: dict[str, str]) -> dict[str, Any]:
    """``item`` with its ``key`` (an id it points at) under that id's new name, when it has one."""
    target = item.get(key)
    return {**item, key: renamed[target]} if isinstance(target, str) and renamed.get(target, target) != target \
        else item


def file_ids(chat: dict[str, Any]) -> tuple[list[str], list[str]]:
    """The step ids and element ids ``chat`` names, to look up in the database."""
    return [step["id"] for step in chat["steps"]], [element["id"] for element in chat["elements"]]
