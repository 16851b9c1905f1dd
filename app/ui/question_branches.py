"""A question's branches on the page: an edit keeps the question as it was and every message after it as a branch,
and "◀ Branch 2/3 ▶" on the question switches between them, each with its own continuation. The branch shown is
the chat the page shows, so the next question builds on it (the prompt is that chat, app/ui/chat_messages.py), and
a resumed chat shows the branch last shown, with its arrows; a chat picked from the search opens on the branch
holding the words searched.

The page draws no buttons on a user's message, so the arrows are a custom element shown with the question
(public/elements/BranchArrows.jsx), which calls the arrow's action. The page sends that action, and anything in it:
only another branch of a shown question, with no answer being written and no other switch or edit under way
(``branches_held``), is acted on; anything else changes nothing, and a line (a toast: not part of the chat) says why.
"""
from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable
from typing import Any, Optional, cast

import chainlit as cl

from app.chainlit_internals import answer_tasks, branches_held
from app.history.branching import Refused, kept_message, with_branch_switched, with_edit_kept
from app.history.messages import (
    KIND,
    KIND_ANSWER,
    MAX_BRANCH_DEPTH,
    MAX_BRANCHES,
    USER_MESSAGE,
    shown_branch,
    stored_branches,
)
from app.history.search_hits import branch_to_open, words_missing
from app.i18n import t
from app.runtime import current_runtime
from app.ui.answer import refused_as_too_long
from app.ui.answer_actions import newest_answer, offer_actions, offer_fork, take_off_answer_actions
from app.ui.answer_versions import asked_index
from app.ui.chat_messages import language, notice, toast

log = logging.getLogger("ernie_chat.chat")
BRANCH_ARROWS = "BranchArrows"  # public/elements/BranchArrows.jsx
# The arrows' actions carry the branch they show ({"index": n}).
BRANCH_PREVIOUS, BRANCH_NEXT = "branch_previous", "branch_next"
_ARROWS_IDS = uuid.UUID("3a0c9a52-3c55-4a52-9b53-3f7d0c1e6b21")  # one arrows element per question, redrawn in place


def arrows_props(question_id: str, metadata: Optional[dict[str, Any]], language: str) -> Optional[dict[str, Any]]:
    """What the arrows element shows for a question: its place among its branches, and an arrow where there is a
    branch to go to; None for a question without branches."""
    shown, count = shown_branch(metadata), len(stored_branches(metadata))
    if shown is None:
        return None

    def arrow(name: str, index: int) -> Optional[dict[str, Any]]:
        return {"name": name, "index": index, "tooltip": t(language, name)} if 0 <= index < count else None

    return {"forId": question_id, "place": t(language, "branch_place", shown=shown + 1, count=count),
            "previous": arrow(BRANCH_PREVIOUS, shown - 1), "next": arrow(BRANCH_NEXT, shown + 1)}


async def show_arrows(question_id: str, metadata: Optional[dict[str, Any]], language: str) -> Optional[dict]:
    """Draw (or redraw in place) the question's arrows, when it has branches; returns the element sent. Never
    stored: they are drawn from the question's metadata whenever the chat is shown."""
    props = arrows_props(question_id, metadata, language)
    if props is None:
        return None
    element = cl.CustomElement(name=BRANCH_ARROWS, props=props, display="inline",
                               id=str(uuid.uuid5(_ARROWS_IDS, question_id)))
    await element.send(for_id=question_id, persist=False)
    return dict(element.to_dict())


def _kept(message: cl.Message) -> dict[str, Any]:
    return kept_message(message.type, message.author, message.content or "", message.metadata)


async def keep_branch_on_edit(question: cl.Message, later: list[cl.Message], new_text: str, free: bool) -> bool:
    """Before an edit replaces ``question`` and removes the messages after it: keep them, with the question as it
    was, as a branch of the question (saved with it when the edit saves the question). False, with a line saying
    why, when the edit is not made (the page gets the chat back as it was): another switch or edit is under way
    (not ``free``), an answer is being written or waits (the branch would keep half of it, and its task would store
    it again after the edit removed it), the new text is longer than a message may be, or the question's branches
    are full."""
    page_language = language()
    if not free:
        await _show_again(question, later)
        await toast(t(page_language, "branches_busy"))
        return False
    if answer_tasks():
        await _show_again(question, later)
        await notice(t(page_language, "answer_running_edit"))
        return False
    if await refused_as_too_long(current_runtime(), new_text, page_language):
        await _show_again(question, later)
        return False
    metadata = with_edit_kept(question.metadata, question.content or "", [_kept(m) for m in later], new_text)
    if isinstance(metadata, Refused):
        await _show_again(question, later)
        await notice(_refused_line(metadata, page_language))
        return False
    question.metadata = metadata
    await show_arrows(question.id, metadata, page_language)
    return True


def _refused_line(refused: Refused, language: str) -> str:
    limit = {Refused.FULL: MAX_BRANCHES, Refused.TOO_DEEP: MAX_BRANCH_DEPTH}.get(refused)
    return t(language, refused.value, limit=limit)


async def _show_again(question: cl.Message, later: list[cl.Message]) -> None:
    """The page took the edit as made (its new text shown, the later messages gone): show the chat as it is."""
    await question.update()
    for message in later:
        # Stored already: sent to the page again, not stored again; its buttons are still on the page.
        actions, message.actions = message.actions, []
        await message.send()
        message.actions = actions


async def show_branch(action: cl.Action) -> None:
    """An arrow on a question: show the branch it names, and keep the one shown until now in its place."""
    page_language = language()
    with branches_held() as free:
        if not free:
            await toast(t(page_language, "branches_busy"))
            return
        if answer_tasks():
            await toast(t(page_language, "answer_running_branches"))
            return
        shown = cl.chat_context.get()
        place = next((n for n, m in enumerate(shown) if m.id == action.forId and m.type == USER_MESSAGE), None)
        index = asked_index(action.payload, MAX_BRANCHES)
        switched: Any = Refused.NO_SUCH_BRANCH
        if place is not None and index is not None:
            question, later = shown[place], shown[place + 1:]
            switched = with_branch_switched(question.metadata, question.content or "", [_kept(m) for m in later],
                                            index)
        if isinstance(switched, Refused):
            log.info("branch switch not made: %s", switched.name)
            await toast(_refused_line(switched, page_language))
            return
        question.content, after, question.metadata = switched
        await take_off_answer_actions()
        # Saved in this order, so that a stop between two writes leaves a branch shown twice, never one lost: the
        # question (the branch leaving kept in it), the coming branch's messages, then the leaving ones go.
        await question.update()
        await show_arrows(question.id, question.metadata, page_language)
        await show_messages(after, page_language, leaving=later)


async def show_messages(kept: list[dict[str, Any]], language: str, leaving: Iterable[cl.Message] = ()) -> None:
    """A branch's messages, shown (and stored) as the chat's own after its question, each with its buttons: a
    question its arrows, an answer its fork button, the newest answer its own buttons too. The messages
    ``leaving`` go once the coming ones are stored."""
    for item in kept:
        message = cl.Message(content=item["output"], author=item["name"], metadata=dict(item["metadata"]),
                             type=cast(Any, item["type"]))
        await message.send()
        if message.type == USER_MESSAGE:
            await show_arrows(message.id, message.metadata, language)
        elif (message.metadata or {}).get(KIND) == KIND_ANSWER:
            await offer_fork(message.id, language)
    for gone in leaving:
        await gone.remove()
    newest = newest_answer(cl.chat_context.get())
    if newest is not None and kept:
        await offer_actions(newest, language)
        await newest.update()


async def show_arrows_on_resume(thread: dict[str, Any], language: str) -> None:
    """A reopened chat: each question with branches gets its arrows, for the branch last shown.

    Chainlit calls on_chat_resume before it sends the chat to the page (``resume_thread``), and the page then
    replaces its elements with the chat's, so arrows sent now are wiped. They ride in the chat about to be sent,
    as the status panel does (app/ui/status_panel.py): the page's ``resume_thread`` handler keeps every element of
    the chat but avatars and task lists, and draws an inline element with the message its ``forId`` names, so the
    arrows come in the same event as their question, with no second event to lose or to race. Sending them after
    ``resume_thread`` instead would mean wrapping Chainlit's emitter, and they would still be a separate event.
    Whatever edits the chat's elements must keep them (app/documents/attach.py ``relink_resumed_files``, which
    leaves out a question's unread uploads, keeps custom elements)."""
    arrows = [await show_arrows(step["id"], step.get("metadata"), language)
              for step in thread.get("steps", []) if step.get("type") == USER_MESSAGE]
    drawn = [element for element in arrows if element is not None]
    if drawn:
        thread["elements"] = [*(thread.get("elements") or ()), *drawn]


def _kept_step(step: dict[str, Any]) -> dict[str, Any]:
    return kept_message(str(step.get("type")), str(step.get("name") or ""), str(step.get("output") or ""),
                        step.get("metadata"))


async def open_on_searched_branch(thread: dict[str, Any], layer: Any, words: Iterable[str]) -> None:
    """A chat opened from the search dialog for ``words``: when a hidden branch of a question holds words the
    shown chat misses, that branch is shown, switched as its arrows switch it (``with_branch_switched``) and saved
    through the data layer. The branch shown may hold the words deeper, in a hidden branch of one of its own
    questions (an edit made inside it): that one is shown too. Each switch is further down the chat than the last,
    one nesting level deeper, so it ends (MAX_BRANCH_DEPTH).

    It changes the chat Chainlit is about to send: on_chat_resume runs before the page, the chat's context (the
    next prompt) and the arrows read it, so nothing is sent here."""
    missing = words_missing(thread.get("steps") or [], words)
    start = 0
    for _ in range(MAX_BRANCH_DEPTH + 1):
        steps = list(thread.get("steps") or [])
        found = branch_to_open(steps[start:], missing) if missing else None
        place = None if found is None else next((n for n, step in enumerate(steps)
                                                 if step.get("id") == found[0] and step.get("type") == USER_MESSAGE),
                                                None)
        if found is None or place is None or not await _switch_in_chat(thread, layer, place, found[1]):
            return
        start, missing = place + 1, words_missing(thread["steps"], missing)


async def _switch_in_chat(thread: dict[str, Any], layer: Any, place: int, index: int) -> bool:
    """Show branch ``index`` of the question at ``place`` in the chat about to be sent, and save it as a switch is
    saved (``show_branch``): the question first, then the coming branch's messages stored as the chat's own, then
    the leaving ones removed. False when that is not another branch of the question."""
    steps = list(thread.get("steps") or [])
    question = steps[place]
    later = [step for step in steps[place + 1:] if "message" in str(step.get("type"))]
    switched = with_branch_switched(question.get("metadata"), str(question.get("output") or ""),
                                    [_kept_step(step) for step in later], index)
    if isinstance(switched, Refused):
        return False
    question["output"], after, question["metadata"] = switched
    await layer.update_step(question)
    shown = [dict(cl.Message(content=item["output"], author=item["name"], metadata=dict(item["metadata"]),
                             type=cast(Any, item["type"])).to_dict()) for item in after]
    for step in shown:
        await layer.create_step(step)
    for step in later:
        await layer.delete_step(step["id"])
    gone = {step["id"] for step in later}
    thread["steps"] = [step for step in steps if step.get("id") not in gone] + shown
    thread["elements"] = [e for e in thread.get("elements") or () if e.get("forId") not in gone]
    return True
