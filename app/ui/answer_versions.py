"""Flipping between the versions Regenerate kept of the newest answer ("◀ Version 2/3 ▶"): the version shown
replaces the message's text and footer, and is saved (Chainlit's update_step, our data layer), so the next question
builds on it (the prompt is the chat the page shows, app/ui/chat_messages.py) and a resumed chat shows it.

The page sends the arrow's action, and anything in it: only an index in range, for this chat's newest answer, with
no answer being written, is acted on; anything else is ignored (the page of another chat, or a forged action, gets
no error and changes nothing)."""
from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any, Optional

import chainlit as cl

from app.history.messages import KIND, KIND_ANSWER, PARTIAL, showing, shown_index, stored_versions
from app.history.search_hits import version_holding, words_missing
from app.ui.answer_actions import answer_acted_on, renew_actions
from app.ui.chat_messages import language

log = logging.getLogger("ernie_chat.chat")


def asked_index(payload: Any, count: int) -> Optional[int]:
    """The version an arrow's payload asks for, when it is a whole number below ``count``."""
    index = payload.get("index") if isinstance(payload, dict) else None
    if isinstance(index, int) and not isinstance(index, bool) and 0 <= index < count:
        return index
    return None


async def show_version(action: cl.Action) -> None:
    """An arrow under the newest answer: show the version it names, and save which one is shown."""
    reply = answer_acted_on(action.forId)
    if reply is None:
        log.info("version flip ignored: not this chat's newest answer, or an answer is being written")
        return
    metadata: dict[str, Any] = dict(reply.metadata or {})
    versions = stored_versions(metadata)
    index = asked_index(action.payload, len(versions))
    if index is None or metadata.get(PARTIAL) or shown_index(metadata) >= len(versions):
        log.info("version flip ignored: no such version")
        return
    reply.content, reply.metadata = showing(metadata, versions, index)
    # The text first (saved with the version shown), then the buttons, each set in one go: the page redraws its
    # message list for every event it gets, so the text does not wait behind the buttons' events.
    await reply.update()
    await renew_actions(reply, language())


async def version_place(action: cl.Action) -> None:
    """The place between the arrows ("Version 2/3") is a button too; pressing it does nothing."""


async def open_on_searched_version(thread: dict[str, Any], layer: Any, words: Iterable[str]) -> None:
    """A chat opened from the search dialog for ``words``: each word that no shown message holds is shown, by
    showing the version of an answer that holds it (the most of them), saved as a flip is. Runs before the page
    gets the chat (on_chat_resume), so the page, the arrows and the next prompt all read the version shown."""
    steps = thread.get("steps") or []
    missing = words_missing(steps, words)
    for step in steps:
        metadata = step.get("metadata")
        if not missing or not isinstance(metadata, dict) or metadata.get(KIND) != KIND_ANSWER or metadata.get(PARTIAL):
            continue
        index = version_holding(metadata, missing)
        if index is None:
            continue
        step["output"], step["metadata"] = showing(metadata, stored_versions(metadata), index)
        await layer.update_step(step)
        missing = words_missing([step], missing)
