"""Several answers to one question written at once, then kept as versions of one answer ("◀ Version 1/3 ▶").

While they are written each has a message of its own (a ``StreamedAnswer`` without buttons), so the page shows all
of them growing side by side in the chat, each with its own reading line, stats footer and Stop: one message
showing them one after another would make the reader wait for the first to end before seeing the second, which
is what writing them at once is for. When all have ended they fold into ONE answer: its versions are theirs, in
order, each with its own footer, the first one shown, and the other messages leave the chat. So the chat keeps one
answer per question, as Regenerate does (the next prompt holds the shown version only), and the arrows of
app/ui/answer_versions.py flip between them. On Regenerate the answer being regenerated keeps its versions and
gets the new ones after them, within MAX_VERSIONS (app/ui/answer.py decides how many fit).

Each answer is an engine request of its own through the fair queue (EngineHost.stream, with this user as owner): N
answers take N of the user's turns, one at a time among other users' (app/engine/queueing.py), as N questions
would. One vLLM request with ``n`` was no faster on the CPU build (docs/benchmarks.md, bench/n_answers.py), would
take a single turn of the queue for N answers' work, and a remote engine would need it too.

The fold is the one step that must not be cut short: it saves the kept answer with every version first, and only
then removes the others' messages, and a second cancel while it runs (Stop twice, Stop then the tab closed, the
app's own stop) waits for its end. A crash (kill -9, power loss) while they are written leaves their messages
saved as far as they got, each marked TOGETHER with the answer they fold into (the regenerated one is marked
partial too): a resumed chat folds them then (``fold_interrupted``), each cut one saying "interrupted".

At temperature 0 every answer would be the same: they are written as asked (the setting is the user's), and one
line says so, with how to get different ones.
"""
from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Coroutine
from typing import Any, Optional, TypeVar

import chainlit as cl

from app.conversation import several_samplings
from app.engine.protocol import Sampling
from app.history.messages import (
    FOOTER,
    KIND,
    KIND_ANSWER,
    MAX_VERSIONS,
    PARTIAL,
    SHOWN,
    TOGETHER,
    VERSIONS,
    showing,
    version_of,
    versions_of,
)
from app.i18n import t
from app.runtime import Runtime
from app.ui.answer_actions import offer_actions, take_off_answer_actions
from app.ui.chat_messages import notice, with_footer
from app.ui.streamed_answer import STOPPED, StreamedAnswer, mark_stopped

log = logging.getLogger("ernie_chat.chat")
T = TypeVar("T")


class SeveralAnswers:
    """``count`` answers to one prompt, written at once and kept as versions of one answer: a new one, or
    ``regenerating`` (whose versions stay, the new ones after them)."""

    def __init__(self, rt: Runtime, language: str, token_ids: list[int], sampling: Sampling, count: int,
                 regenerating: Optional[cl.Message] = None) -> None:
        self.rt, self.language, self.sampling, self.regenerating = rt, language, sampling, regenerating
        # The regenerated answer as it was: its versions, and itself again when none of the new ones wrote anything.
        self.before = (regenerating.content or "", dict(regenerating.metadata or {})) if regenerating else None
        together = {TOGETHER: regenerating.id if regenerating is not None else uuid.uuid4().hex}
        # Each in a new message of its own (StreamedAnswer's), without the buttons the kept answer gets.
        self.members = [StreamedAnswer(rt, language, token_ids, one, offers_actions=False, marks=together)
                        for one in several_samplings(sampling, count)]

    async def write(self) -> None:
        """Stream every answer into its own message; however they end, fold what they wrote into one answer."""
        if self.sampling.temperature == 0:
            await notice(t(self.language, "answers_same", count=len(self.members)))
        if self.regenerating is not None and self.before is not None:
            await take_off_answer_actions()  # the answer's buttons come back when the new versions are in it
            # Partial until the fold, as a single regenerated answer is: a crash meanwhile is settled on resume.
            self.regenerating.metadata = {**self.before[1], PARTIAL: True, TOGETHER: self.regenerating.id}
            await self.regenerating.update()
        ended: list[Any] = []
        try:
            # Every answer runs to its end (one failing does not leave the others running past the fold); on Stop,
            # gather cancels each, and each keeps what it wrote, before this task goes on.
            ended = await asyncio.gather(*(member.write() for member in self.members), return_exceptions=True)
        finally:
            stopped, cancelled = await _unbroken(self._fold())
            if stopped:
                mark_stopped()  # each stopped version says so under itself (here: this task's mark)
            if cancelled:
                raise asyncio.CancelledError
        failed = next((result for result in ended if isinstance(result, BaseException)), None)
        if failed is not None:
            raise failed

    async def _fold(self) -> bool:
        """The answers that wrote anything become the versions of one answer, saved first; then their other messages
        leave the chat. Whether a stopped one is among them."""
        written = [member for member in self.members if member.parts]
        new = [version_of(member.reply.content, member.reply.metadata) for member in written]
        target = self.regenerating if self.regenerating is not None else (written[0].reply if written else None)
        if target is not None:
            if self.before is not None and not new:  # regenerated, and nothing new: the answer as it was
                target.content, target.metadata = self.before
            else:
                earlier = versions_of(*self.before) if self.before is not None else []
                target.content, target.metadata = folded(earlier, new)
            await offer_actions(target, self.language)
            await target.update()
        for member in self.members:
            if member.reply is not target:
                await _remove(member.reply)
        return bool(new) and any(member.outcome == STOPPED for member in written)


def folded(earlier: list[dict[str, Any]], new: list[dict[str, Any]]) -> tuple[str, dict[str, Any]]:
    """An answer's output and metadata once answers written at once are its versions, after its ``earlier`` ones
    (within MAX_VERSIONS): the first new one shown; a single version needs no keys."""
    versions = [*earlier, *new][:MAX_VERSIONS]
    content, metadata = showing({KIND: KIND_ANSWER}, versions, min(len(earlier), len(versions) - 1))
    if len(versions) == 1:
        metadata = {key: value for key, value in metadata.items() if key not in (VERSIONS, SHOWN)}
    return content, metadata


async def _unbroken(work: Coroutine[Any, Any, T]) -> tuple[T, bool]:
    """``work``'s result, run to its end however often this task is cancelled meanwhile, and whether it was (the
    caller raises that cancel once it is done)."""
    task = asyncio.ensure_future(work)
    cancelled = False
    while not task.done():
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            cancelled = True
    return task.result(), cancelled


async def _remove(message: cl.Message) -> None:
    """One of the answers' own messages leaves the chat (and its database), sent or not."""
    try:
        await message.remove()
    except Exception:  # never sent (it ended before its first word): nothing is there to remove
        log.debug("an answer's message was not there to remove", exc_info=True)


async def fold_interrupted(thread: dict[str, Any], language: str) -> None:
    """A resumed chat whose answers at once were being written when the app was killed: they fold as they would
    have, into one answer (the regenerated one, else the first of them) whose versions are theirs after its own,
    each cut one saying "interrupted", the first new one shown; the others' messages leave the chat and its
    database. So the chat, and the next prompt, hold one answer to the question. Runs before mark_interrupted and
    before Chainlit builds the chat and the page from ``thread``'s steps."""
    from chainlit.data import get_data_layer

    layer = get_data_layer()
    groups: dict[str, list[dict[str, Any]]] = {}
    for step in thread.get("steps", []):
        metadata = step.get("metadata")
        if "message" in step.get("type", "") and isinstance(metadata, dict) and isinstance(metadata.get(TOGETHER), str):
            groups.setdefault(metadata[TOGETHER], []).append(step)
    if layer is None or not groups:
        return
    for tag, group in groups.items():
        regenerated = next((step for step in group if step.get("id") == tag), None)
        target = regenerated or group[0]
        new = [_interrupted_version(step, language) for step in group if step is not regenerated]
        if regenerated is not None and not new:  # nothing of the new ones was saved: the answer as it was
            target["metadata"] = {k: v for k, v in target["metadata"].items() if k not in (PARTIAL, TOGETHER)}
        else:
            earlier = versions_of(regenerated.get("output"), regenerated["metadata"]) if regenerated else []
            target["output"], target["metadata"] = folded(earlier, new)
        target["streaming"] = False
        await layer.update_step(target)  # saved first: whatever happens next, no version is lost
        for step in group:
            if step is not target:
                await layer.delete_step(step["id"])
                thread["steps"].remove(step)


def _interrupted_version(step: dict[str, Any], language: str) -> dict[str, Any]:
    """One of the answers at once as a version: as it ended, or, cut off by the crash, saying "interrupted"."""
    if not step["metadata"].get(PARTIAL):
        return version_of(step.get("output"), step["metadata"])
    output, footer = with_footer(step.get("output") or "", "\n\n`" + t(language, "interrupted") + "`")
    return version_of(output, {**step["metadata"], FOOTER: footer})
