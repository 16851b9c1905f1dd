"""The buttons under the newest answer: Regenerate, Continue when it stopped at its length limit, and its versions'
arrows and place ("◀ Version 2/3 ▶") when Regenerate kept earlier ones. Only the newest answer has them (an older
one has later turns built on it: the version shown is the one they built on); what they do is app/ui/answer.py's.
Every answer has a fork button (a new chat with the turns up to it: app/ui/fork_chat.py) while chats are kept."""
from __future__ import annotations

import asyncio
import logging
from typing import Any, Optional

import chainlit as cl

from app.chainlit_internals import answer_tasks
from app.history.messages import FINISH, KIND, KIND_ANSWER, LENGTH, USER_MESSAGE, shown_index, stored_versions
from app.i18n import t
from app.ui.preset_commands import is_preset_command
from app.ui.session_keys import ANSWER_ACTIONS

log = logging.getLogger("ernie_chat.chat")
REGENERATE = "regenerate"
CONTINUE = "continue"
# The versions' buttons: the arrows carry the index they show ({"index": n}); the place does nothing.
VERSION_PREVIOUS, VERSION_PLACE, VERSION_NEXT = "version_previous", "version_place", "version_next"
FORK = "fork"


def answer_actions(metadata: Optional[dict[str, Any]], language: str) -> list[cl.Action]:
    """The buttons for an answer with ``metadata``: Regenerate, Continue when it stopped at its length limit, and
    its versions' arrows and place when it keeps more than one."""
    names = [REGENERATE] + ([CONTINUE] if (metadata or {}).get(FINISH) == LENGTH else [])
    icons = {REGENERATE: "refresh-cw", CONTINUE: "arrow-right"}
    return [cl.Action(name=name, payload={}, label=t(language, name), icon=icons[name], tooltip=t(language, name))
            for name in names] + version_actions(metadata, language)


def version_actions(metadata: Optional[dict[str, Any]], language: str) -> list[cl.Action]:
    """"◀ Version 2/3 ▶" for an answer that keeps versions: an arrow only where there is a version to go to."""
    versions, shown = stored_versions(metadata), shown_index(metadata)
    if len(versions) < 2 or shown >= len(versions):
        return []
    place = t(language, VERSION_PLACE, shown=shown + 1, count=len(versions))
    actions = [cl.Action(name=VERSION_PLACE, payload={}, label=place, tooltip=place)]
    if shown > 0:
        actions.insert(0, cl.Action(name=VERSION_PREVIOUS, payload={"index": shown - 1}, label="◀",
                                    tooltip=t(language, VERSION_PREVIOUS)))
    if shown < len(versions) - 1:
        actions.append(cl.Action(name=VERSION_NEXT, payload={"index": shown + 1}, label="▶",
                                 tooltip=t(language, VERSION_NEXT)))
    return actions


async def take_off_answer_actions() -> None:
    """The newest answer's buttons leave the page, all at once: a newer answer gets them, or this one is being
    rewritten."""
    leaving = ANSWER_ACTIONS.get()
    ANSWER_ACTIONS.set([])  # before the awaits: buttons offered meanwhile are the newest, and stay tracked
    await asyncio.gather(*(_take_off(action) for action in leaving))


async def _take_off(action: cl.Action) -> None:
    try:
        await action.remove()
    except Exception:  # that answer was removed with an edit
        log.debug("old answer action already gone", exc_info=True)


def newest_answer(shown: list[cl.Message]) -> Optional[cl.Message]:
    """This chat's newest answer, when no question was asked after it (notices and "Save preset" messages after it
    may be: neither is a turn of the chat)."""
    for message in reversed(shown):
        if message.type == USER_MESSAGE and not is_preset_command(message):
            return None
        if (message.metadata or {}).get(KIND) == KIND_ANSWER:
            return message
    return None


def answer_acted_on(for_id: Optional[str]) -> Optional[cl.Message]:
    """The answer a Regenerate, Continue or version button acts on: this chat's newest answer, when the button names
    it and no other answer of this tab is being written (``answer_tasks``, less the caller's own). None for any
    other: an older answer has later turns built on it, which Regenerate would take out of the chat (a stale button
    under the previous answer, pressed after a stop or while the next answer streamed, did), and what the page
    sends may be forged."""
    reply = newest_answer(cl.chat_context.get())
    others = answer_tasks() - {asyncio.current_task()}
    return reply if reply is not None and reply.id == for_id and not others else None


def fork_action(answer_id: str, language: str) -> cl.Action:
    """An answer's fork button: an icon, with its words as the tooltip. Its id is the answer's own, so that the page
    holds one per answer however often it is offered (Chainlit's page adds every action it is sent)."""
    return cl.Action(name=FORK, id=f"{FORK}-{answer_id}", payload={}, label="", icon="git-branch",
                     tooltip=t(language, FORK))


def _chats_kept() -> bool:
    from app.ui.chat_history import current_store

    return current_store() is not None


async def _fork_button(answer_id: str, language: str) -> list[cl.Action]:
    """The answer's fork button, taken off the page first where it was offered before; none without kept chats."""
    if not _chats_kept():
        return []
    fork = fork_action(answer_id, language)
    await fork.remove()
    return [fork]


async def offer_fork(answer_id: str, language: str) -> None:
    """Put the fork button on an answer already shown."""
    for fork in await _fork_button(answer_id, language):
        await fork.send(for_id=answer_id)


async def offer_actions(reply: cl.Message, language: str) -> None:
    """Put the buttons on this answer (sent with it), and take them off the previous one: only the newest answer
    can be regenerated, continued or flipped (an older one has later turns built on it). Its fork button stays.
    The answer is final here: its task no longer counts as an answer being written, so a click on these buttons
    is taken even before the task's last steps (the other versions' messages leaving, a line under it) end."""
    answer_tasks().discard(asyncio.current_task())
    await take_off_answer_actions()
    actions = answer_actions(reply.metadata, language)
    ANSWER_ACTIONS.set(actions)
    reply.actions = actions + await _fork_button(reply.id, language)


async def renew_actions(reply: cl.Message, language: str) -> None:
    """The buttons of an answer already on the page, made again for what it shows now (another version): the old
    ones leave and the new ones come, each set at once."""
    await offer_actions(reply, language)
    await asyncio.gather(*(action.send(for_id=reply.id) for action in reply.actions))


async def offer_actions_on_resume(thread: dict[str, Any], language: str) -> None:
    """A reopened chat gets the buttons on its newest message when that is an answer, as the chat had them, and
    every answer its fork button."""
    messages = [step for step in thread.get("steps", []) if "message" in step.get("type", "")]
    for step in messages:
        if (step.get("metadata") or {}).get(KIND) == KIND_ANSWER:
            await offer_fork(step["id"], language)
    if not messages or (messages[-1].get("metadata") or {}).get(KIND) != KIND_ANSWER:
        return
    actions = answer_actions(messages[-1].get("metadata"), language)
    for action in actions:
        await action.send(for_id=messages[-1]["id"])
    ANSWER_ACTIONS.set(actions)
