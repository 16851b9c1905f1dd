"""One answer being written into the chat: ``StreamedAnswer`` holds its message, the text so far, the queue and
reading lines, its stats and why it ended, and takes it from the engine's first delta to what the chat keeps.

Batched streaming (one websocket message per token froze the page), saved every few seconds while it grows (a
crash keeps it up to the last save, marked partial: a resumed chat says "interrupted"), and on Stop, on the app's
own stop or on an engine failure the chat keeps what was shown.
"""
from __future__ import annotations

import asyncio
import contextvars
import logging
import time
from typing import Any, Optional

import chainlit as cl

from app.conversation import stats_line_values
from app.engine.protocol import Sampling
from app.errors import EngineUnavailable, RequestRefused
from app.history.data_layer import session_user_identifier
from app.history.messages import (
    FINISH,
    FOOTER,
    KIND,
    KIND_ANSWER,
    KIND_NOTICE,
    LENGTH,
    PARTIAL,
    SHOWN,
    VERSIONS,
    shown_index,
    stored_versions,
    versions_of,
    with_version,
)
from app.i18n import t
from app.runtime import Runtime
from app.ui.answer_actions import offer_actions, renew_actions, take_off_answer_actions
from app.ui.background import spawn
from app.ui.branding import APP_NAME
from app.ui.chat_messages import answer_text, notice, stopped_line, with_footer
from app.ui.markdown_nesting import limit_nesting
from app.ui.reading_line import ReadingLine
from app.ui.session_keys import HISTORY_WARNED

log = logging.getLogger("ernie_chat.chat")
# How often a growing answer is saved: after a crash (kill -9, power loss) the chat keeps the answer up to
# the last save. Chainlit itself saves a streamed message only when it ends.
SAVE_EVERY_SECONDS = 2.0

# Whether the chat already says this answer was stopped (under the answer so far): set in the answer's own task,
# read by app/ui/running_answers.py run_tracked, which says it for a stop that came before any of the answer
# (issue 35 item 11).
_STOP_MARKED: contextvars.ContextVar[bool] = contextvars.ContextVar("stop_marked", default=False)
STOPPED, CUT = "stopped", "cut"  # why an answer was cancelled (cancel_cause)
DONE, DIED, REFUSED = "done", "died", "refused"  # how else an answer ends


def cancel_cause(rt: Runtime) -> str:
    """Why an answer's task was cancelled: CUT by the app's own stop (Ctrl-C, SIGTERM: ``rt.stopping``), whose cut
    answer is kept as "interrupted" and never said to be the user's doing (issue 36, N13); else STOPPED, by the
    page (its Stop, or the page closed), which the "stopped by you" line says."""
    return CUT if rt.stopping else STOPPED


def forget_stop_mark() -> None:
    """A new answer begins in this task: the chat says nothing yet of its being stopped."""
    _STOP_MARKED.set(False)


def stop_marked() -> bool:
    """Whether the chat already says this task's answer was stopped."""
    return _STOP_MARKED.get()


def mark_stopped() -> None:
    """The chat says this task's answer was stopped (under answers written in tasks of their own)."""
    _STOP_MARKED.set(True)


class NestingWatch:
    """Notices, piece by piece and without rescanning the answer, a line that nests deeper than the page can
    render (10,000 '>' once replaced the chat with "Maximum call stack size exceeded")."""

    HEAD_CHARS = 1024  # nesting is decided by a line's leading markers; the rest of a long line never matters

    def __init__(self) -> None:
        self.line_head = ""

    def too_deep(self, piece: str) -> bool:
        touched = self.line_head + piece  # the lines this piece adds to, and no others
        self.line_head = touched.rsplit("\n", 1)[-1][:self.HEAD_CHARS]
        return limit_nesting(touched) != touched


class StreamedAnswer:
    """One answer written into the chat from the engine's deltas; with ``continuing``, that answer's message
    grows (Continue: the prompt ends with the answer so far) and its shown version with it; with ``regenerating``,
    that answer's message is written anew, its earlier text kept as a version (app/history/messages.py)."""

    def __init__(self, rt: Runtime, language: str, token_ids: list[int], sampling: Sampling,
                 continuing: Optional[cl.Message] = None, regenerating: Optional[cl.Message] = None,
                 offers_actions: bool = True, marks: Optional[dict[str, Any]] = None) -> None:
        self.rt, self.language, self.token_ids, self.sampling = rt, language, token_ids, sampling
        self.continuing = continuing
        # False for one of several answers written at once: the answer they are kept in gets the buttons
        # (app/ui/several_answers.py); ``marks``: what their metadata carries besides, however each ends (TOGETHER).
        self.offers_actions = offers_actions
        self.marks = marks or {}
        # The app answers (its favicon is the avatar): Chainlit's default author, the page's name, holds the
        # model's name, which its avatar route may refuse (it takes ASCII letters, digits and " _.-" only).
        self.reply = continuing or regenerating or cl.Message(content="", author=APP_NAME,
                                                              metadata={KIND: KIND_ANSWER, **self.marks})
        # The answer's other versions, and the place this one takes among them (past the end: a new version).
        self.versions: list[dict[str, Any]] = []
        self.place = 0
        # A regenerated answer as it was: put back whole when the new one ends before its first word.
        self.before: Optional[tuple[str, dict[str, Any]]] = None
        if continuing is not None:
            self.versions, self.place = stored_versions(continuing.metadata), shown_index(continuing.metadata)
        elif regenerating is not None:
            self.before = (regenerating.content or "", dict(regenerating.metadata or {}))
            self.versions = versions_of(*self.before)
            self.place = len(self.versions)
        self.parts: list[str] = []  # the answer so far
        self.pending: list[str] = []  # what the page has not been sent yet
        self.nesting = NestingWatch()
        self.queue_line: Optional[cl.Message] = None
        self.reading = ReadingLine(self._show_reading, language, len(token_ids),
                                   rt.host.prefill_rate.tokens_per_second())
        self.replace_reading = False  # the reading line is shown: the answer's first words take its place
        self.interval = rt.settings.chat.stream_interval_ms / 1000
        self.started = self.last_save = time.perf_counter()
        self.last_flush = 0.0
        self.saving: Optional[asyncio.Task] = None  # the save in the background, one at a time
        self.first_token_at: Optional[float] = None
        self.tokens = 0
        self.outcome = DONE
        self.finish: Optional[str] = None

    @property
    def text(self) -> str:
        return "".join(self.parts)

    async def write(self) -> None:
        """Stream the answer into the chat; what it ends as is kept, however it ends."""
        await self._take_up_message()
        self.started = self.last_save = time.perf_counter()
        try:
            async for delta in self.rt.host.stream(self.token_ids, self.sampling, on_queued=self._on_queued,
                                                   owner=session_user_identifier(), on_admitted=self.reading.start):
                await self._take(delta)
            if self.pending:
                await self._flush()
        except asyncio.CancelledError:
            self.outcome = cancel_cause(self.rt)
            raise
        except EngineUnavailable as err:  # the engine died, or is restarting
            self.outcome = CUT if self.rt.stopping else DIED  # or was shut down with the app: nothing restarts
            if self.outcome == DIED:
                await notice(t(self.language, "engine_died", detail=str(err)))
        except RequestRefused as err:
            self.outcome = REFUSED
            await notice(t(self.language, "refused", detail=str(err)))
        finally:
            await self._end()

    def _writing(self, metadata: dict[str, Any]) -> dict[str, Any]:
        """An answer's metadata while this version is written: the other versions, and its place among them."""
        metadata = {**metadata, **self.marks}
        return {**metadata, VERSIONS: self.versions, SHOWN: self.place} if self.versions else metadata

    def _kept(self, metadata: dict[str, Any]) -> dict[str, Any]:
        """An answer's metadata once this version ends: the version shown in its place among the others."""
        return with_version({**metadata, **self.marks}, self.reply.content or "", self.versions, self.place)

    async def _take_up_message(self) -> None:
        """Continue: the same message grows, its buttons and footer (the length line, the stats) gone while the rest
        comes. Regenerate: the same message is written anew (its text is kept as a version)."""
        if self.continuing is None and self.before is None:
            return
        await take_off_answer_actions()
        so_far = answer_text(self.continuing) if self.continuing is not None else ""
        if so_far:
            self.parts.append(so_far)
            self.nesting.too_deep(so_far)  # the watch starts from the answer's last line
        self.reply.content, self.reply.actions = limit_nesting(so_far), []
        # Written anew: marked partial from the start, so that a crash before the first save still settles the
        # versions on resume (mark_interrupted) instead of leaving an empty answer.
        self.reply.metadata = self._writing({KIND: KIND_ANSWER, **({PARTIAL: True} if self.before else {})})
        await self.reply.update()

    async def _on_queued(self, position: int) -> None:
        content = t(self.language, "queued", position=position)
        if self.queue_line is None:
            self.queue_line = await notice(content)
        else:
            self.queue_line.content = content
            await self.queue_line.update()

    async def _drop_queue_line(self) -> None:
        if self.queue_line is not None:
            line, self.queue_line = self.queue_line, None
            await line.remove()

    async def _show_reading(self, line: str) -> None:  # the answer's place, until its first words take it
        await self.reply.stream_token(line, is_sequence=True)

    async def _take(self, delta: Any) -> None:
        """One delta from the engine: counted, and sent to the page in batches."""
        self.finish = delta.finish_reason or self.finish
        await self._drop_queue_line()
        if self.first_token_at is None and delta.new_tokens:
            self.first_token_at = time.perf_counter()
            self.replace_reading = await self.reading.stop()
        self.tokens += delta.new_tokens
        if delta.text:
            self.parts.append(delta.text)
            self.pending.append(delta.text)
        now = time.perf_counter()
        # One websocket message per token freezes the page at ~300 tokens/s; send ~50 ms batches.
        if self.pending and now - self.last_flush >= self.interval:
            await self._flush()
            # Give the loop a real turn (I/O included): without it the websocket writer did not run until the
            # answer ended, and the page got the whole answer at once (seen in Chromium; sleep(0) was not enough).
            await asyncio.sleep(0.001)
            self.last_flush = now
        self._save_now_and_then(now)

    async def _flush(self) -> None:
        """Add what is pending to the answer on the page; after the reading line, the answer so far takes the
        place of what the message shows."""
        piece = "".join(self.pending)
        # too_deep first: it must see every piece. Too deep (rare) or replacing: the whole answer so far, made safe,
        # in place of what the message shows.
        if self.nesting.too_deep(piece) or self.replace_reading:
            await self.reply.stream_token(limit_nesting(self.text), is_sequence=True)
        else:
            await self.reply.stream_token(piece)
        self.replace_reading = False
        self.pending.clear()

    def _save_now_and_then(self, now: float) -> None:
        if now - self.last_save >= SAVE_EVERY_SECONDS and self.parts and (self.saving is None or self.saving.done()):
            # In the background: a slow database must not hold up the stream (one save at a time).
            self.last_save = now
            self.saving = spawn(save_so_far(self.reply, self.text), name="save-answer-so-far")

    async def _end(self) -> None:
        """However the answer ended: what the chat shows and keeps of it."""
        if self.outcome == CUT and self.parts:  # queued first: nothing below may wait or be cancelled before it
            await self._keep_cut()
        reading_shown = await self.reading.stop()
        if self.saving is not None and not self.saving.done():
            await asyncio.wait([self.saving])  # the last partial save lands before the final text, never after it
        await self._drop_queue_line()
        if self.outcome == DONE:
            await self._finish(reading_shown)
        elif self.parts:
            await self._keep_so_far()
        elif self.before is not None:
            await self._put_back()
        elif reading_shown:
            await self._replace_reading_line()
        await _warn_if_history_fails(self.rt, self.language)

    async def _finish(self, reading_shown: bool) -> None:
        """The whole answer: the stats under it (and the length line, with Continue), and its buttons."""
        decode = time.perf_counter() - (self.first_token_at or self.started)
        first = (self.first_token_at - self.started) if self.first_token_at else None
        values = stats_line_values(self.tokens, first, decode)
        lines = "\n\n" + t(self.language, "stats", prompt=len(self.token_ids), **values)
        metadata: dict[str, Any] = {KIND: KIND_ANSWER}
        if self.finish == LENGTH:  # said under the answer, and Continue offered (here and in a resumed chat)
            lines += "\n\n`" + t(self.language, "length_limit", tokens=self.sampling.max_tokens) + "`"
            metadata[FINISH] = LENGTH
        self.reply.content, footer = with_footer(self.text, lines)
        self.reply.metadata = self._kept({**metadata, FOOTER: footer})
        if self.offers_actions:
            await offer_actions(self.reply, self.language)
        # stream_token sent the message with the first piece (or the reading line); an empty answer was never sent
        # (unless it is one being rewritten).
        sent = self.parts or reading_shown or self.before is not None
        await (self.reply.update() if sent else self.reply.send())
        if self.rt.gpu_memory:
            self.rt.gpu_memory.sample(generating=True)

    async def _keep_so_far(self) -> None:
        """Stopped or cut off: the answer so far stays in the chat (and in the next prompt); a stopped one says so
        under it (the footer is never part of a prompt). It is the newest answer now, with its buttons (Regenerate),
        unless the app's own stop cut it (the page is going; a resumed chat offers them: mark_interrupted)."""
        if self.outcome == STOPPED:
            self.reply.content, footer = with_footer(self.text, "\n\n" + stopped_line(self.language))
            self.reply.metadata = self._kept({KIND: KIND_ANSWER, FOOTER: footer})
            _STOP_MARKED.set(True)
        elif self.outcome != CUT:  # a cut answer stays marked partial (_keep_cut)
            self.reply.metadata = self._kept({KIND: KIND_ANSWER})
        await self.reply.update()  # saved first: a second cancel (Stop again, the tab closed) must not skip it
        if self.outcome != CUT and self.offers_actions:
            await renew_actions(self.reply, self.language)

    async def _put_back(self) -> None:
        """A regenerated answer that ended before its first word: the answer it was comes back whole, with its
        buttons; a stop says so in a line of its own."""
        assert self.before is not None
        self.reply.content, self.reply.metadata = self.before
        await offer_actions(self.reply, self.language)
        await self.reply.update()
        if self.outcome == STOPPED:
            await notice(stopped_line(self.language))
            _STOP_MARKED.set(True)

    async def _replace_reading_line(self) -> None:
        """Ended while the engine read the prompt: the reading line goes."""
        if self.outcome == STOPPED:  # it becomes the stopped line (a notice: never part of a prompt)
            self.reply.content = stopped_line(self.language)
            self.reply.metadata = {KIND: KIND_NOTICE}
            await self.reply.update()
            _STOP_MARKED.set(True)
        else:  # the engine died or refused: its own line says so
            await self.reply.remove()

    async def _keep_cut(self) -> None:
        """An answer the app's own stop cut off: all of it that was shown is queued for the database first, before
        anything here can wait (a socket already closing, a second cancel), still marked partial, so a resumed chat
        says "interrupted" under it with Regenerate (mark_interrupted). On SIGTERM the chat kept 12-389 characters
        of ~1,500 shown, labelled "stopped by you" (issue 36, N13)."""
        if self.saving is not None:
            self.saving.cancel()  # a 2-s save not begun yet would queue a shorter text after this one
        text = self.text
        self.reply.content = limit_nesting(text)
        self.reply.metadata = self._writing({KIND: KIND_ANSWER, PARTIAL: True})  # the page's last update stores it too
        await save_so_far(self.reply, text)  # queued on this call's first step (update_step queues before it waits)


async def _warn_if_history_fails(rt: Runtime, language: str) -> None:
    """Once per chat: the answers come, but the chat is not being saved (read-only file, full disk)."""
    store = rt.history
    if store is not None and store.write_failing and not HISTORY_WARNED.get():
        HISTORY_WARNED.set(True)
        await notice(t(language, "history_failing", detail=store.last_error or ""))


async def save_so_far(reply: cl.Message, text: str) -> None:
    """Write the answer as far as it got to the chat history (when history is kept)."""
    from chainlit.data import get_data_layer

    data_layer = get_data_layer()
    if data_layer is None:
        return
    step = reply.to_dict()
    step["output"] = text
    # Marked while it grows: the answer's last save (done, stopped, cut off by the engine) replaces the mark, so
    # an answer still marked after a restart is one the app was killed under.
    step["metadata"] = {**(reply.metadata or {}), PARTIAL: True}
    try:
        await data_layer.update_step(step)
    except Exception:  # the history layer counts and reports its own write errors; the answer goes on
        log.debug("saving the answer so far failed", exc_info=True)


async def mark_interrupted(thread: dict[str, Any], language: str) -> None:
    """A resumed chat whose answer was saved mid-stream (the app was killed under it) says so under that answer.
    Runs before Chainlit builds the chat and the page from ``thread``'s steps, so both get the marked answer; the
    mark is saved, so it is made once."""
    from chainlit.data import get_data_layer

    messages = [step for step in thread.get("steps", []) if "message" in step.get("type", "")]
    for step in messages:
        if not (step.get("metadata") or {}).get(PARTIAL):
            continue
        step["output"], footer = with_footer(step.get("output") or "", "\n\n`" + t(language, "interrupted") + "`")
        metadata = step.get("metadata") or {}
        # the footer never goes into a prompt; the version written when the app was killed takes its place
        step["metadata"] = with_version({KIND: KIND_ANSWER, FOOTER: footer}, step["output"],
                                        stored_versions(metadata), shown_index(metadata))
        step["streaming"] = False  # saved while it streamed: the page would draw it as still coming, no buttons
        await get_data_layer().update_step(step)
