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

At temperature 0 every answer would be the same: they are written as asked (the setting is the user's), and one
line says so, with how to get different ones.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Any, Optional

import chainlit as cl

from app.conversation import several_samplings
from app.engine.protocol import Sampling
from app.history.messages import KIND, KIND_ANSWER, showing, version_of, versions_of
from app.i18n import t
from app.runtime import Runtime
from app.ui.answer_actions import offer_actions, take_off_answer_actions
from app.ui.chat_messages import notice
from app.ui.streamed_answer import STOPPED, StreamedAnswer, mark_stopped

log = logging.getLogger("ernie_chat.chat")


class SeveralAnswers:
    """``count`` answers to one prompt, written at once and kept as versions of one answer: a new one, or
    ``regenerating`` (whose versions stay, the new ones after them)."""

    def __init__(self, rt: Runtime, language: str, token_ids: list[int], sampling: Sampling, count: int,
                 regenerating: Optional[cl.Message] = None) -> None:
        self.rt, self.language, self.sampling, self.regenerating = rt, language, sampling, regenerating
        # Each in a new message of its own (StreamedAnswer's), without the buttons the kept answer gets.
        self.members = [StreamedAnswer(rt, language, token_ids, one, offers_actions=False)
                        for one in several_samplings(sampling, count)]

    async def write(self) -> None:
        """Stream every answer into its own message; however they end, fold what they wrote into one answer."""
        if self.sampling.temperature == 0:
            await notice(t(self.language, "answers_same", count=len(self.members)))
        if self.regenerating is not None:
            await take_off_answer_actions()  # the answer's buttons come back when the new versions are in it
        ended: list[Any] = []
        try:
            # Every answer runs to its end (one failing does not leave the others running past the fold); on Stop,
            # gather cancels each, and each keeps what it wrote, before this task goes on.
            ended = await asyncio.gather(*(member.write() for member in self.members), return_exceptions=True)
        finally:
            await self._fold()
        failed = next((result for result in ended if isinstance(result, BaseException)), None)
        if failed is not None:
            raise failed

    async def _fold(self) -> None:
        """The answers that wrote anything become the versions of one answer; their messages leave the chat."""
        written = [member for member in self.members if member.parts]
        new = [version_of(member.reply.content, member.reply.metadata) for member in written]
        target = self.regenerating if self.regenerating is not None else (written[0].reply if written else None)
        for member in self.members:
            if member.reply is not target:
                await _remove(member.reply)
        if target is None:
            return
        earlier = versions_of(*_shown(self.regenerating)) if self.regenerating is not None else []
        if new:
            target.content, target.metadata = showing({KIND: KIND_ANSWER}, [*earlier, *new], len(earlier))
        await offer_actions(target, self.language)
        await target.update()
        if new and any(member.outcome == STOPPED for member in written):
            mark_stopped()  # each stopped version says so under itself


def _shown(message: cl.Message) -> tuple[str, dict[str, Any]]:
    return message.content or "", dict(message.metadata or {})


async def _remove(message: cl.Message) -> None:
    """One of the answers' own messages leaves the chat (and its database), sent or not."""
    try:
        await message.remove()
    except Exception:  # never sent (it ended before its first word): nothing is there to remove
        log.debug("an answer's message was not there to remove", exc_info=True)
