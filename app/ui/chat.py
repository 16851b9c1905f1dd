"""Chainlit handlers: every prompt built from the chat's own messages, batched streaming, stop -> abort.

``install()`` registers the handlers; app/ui/chainlit_app.py (the file Chainlit loads) calls it. Every
handler finds the app through ``current_runtime()``. The rules (cleaning, defaults, bounds, fitting to the
context) live in app/conversation.py and are shared with /v1; this module only talks to the page.

The prompt comes from ``cl.chat_context``, the messages this chat shows: Chainlit removes the later
messages there when one is edited, and puts a resumed chat's saved messages back there. So what the model
sees is always what the page shows (an earlier version kept its own list and, after an edit, still sent
the deleted turns: "prompt 121 tokens" for a one-turn page).
"""
from __future__ import annotations

import asyncio
import contextvars
import logging
import time
from collections.abc import Callable, Coroutine
from typing import Any, Optional

import chainlit as cl
from chainlit.input_widget import Slider, TextInput

from app.chainlit_internals import (
    REFUSED_CHAT,
    answer_tasks,
    delete_session_files,
    follow_login_mode,
    forget_chat_contexts_of_closed_sessions,
    leave_refused_chat,
    make_stoppable,
    remove_chainlits_stop_message,
    save_session_now,
)
from app.conversation import (
    ChatTemplate,
    Message,
    answer_sampling,
    chat_defaults,
    clamp_sampling,
    clean_message,
    fit_to_context,
    max_tokens_cap,
    stats_line_values,
)
from app.documents.attach import configure_uploads, read_documents, relink_resumed_files
from app.documents.fitting import fit_in_context
from app.documents.followup import PASSAGES_OF, as_sent, needing_passages
from app.documents.prompt import DOCUMENTS, Fit, apply, documents_of, render_turn
from app.engine.protocol import Sampling
from app.engine.status import EngineState
from app.errors import DocumentRefused, EngineUnavailable, PromptTooLongError, RequestRefused
from app.heap import give_back_free_memory
from app.history.chat_metadata import typed_settings
from app.history.data_layer import session_user_identifier
from app.history.messages import FINISH, KIND_ANSWER, KIND_NOTICE, LENGTH, NOTICE_AUTHOR, PARTIAL
from app.history.messages import answer_text as stored_answer_text
from app.history.presets import PresetStore
from app.i18n import STARTERS, t
from app.runtime import Runtime, current_runtime
from app.settings import SAMPLING_BOUNDS
from app.ui.branding import APP_NAME
from app.ui.chat_address import tell_page_the_chat_address
from app.ui.chat_history import install_history, store_before_answer
from app.ui.markdown_nesting import closing_fence, limit_nesting
from app.ui.preset_commands import is_preset_command, offer_presets, run_preset_command
from app.ui.reading_line import ReadingLine
from app.ui.status_panel import (
    SHOW_STATUS_MESSAGE,
    engine_state_text,
    keep_status_fresh,
    show_status,
    show_status_in_resumed_chat,
)

log = logging.getLogger("ernie_chat.chat")
WAIT_FOR_ENGINE_SECONDS = 600.0
REGENERATE = "regenerate"
CONTINUE = "continue"
# How often a growing answer is saved: after a crash (kill -9, power loss) the chat keeps the answer up to
# the last save. Chainlit itself saves a streamed message only when it ends.
SAVE_EVERY_SECONDS = 2.0


def _language() -> str:
    try:
        return cl.context.session.language or "en-US"
    except Exception:
        return "en-US"


# Whether the chat already says this answer was stopped (under the answer so far): set in the answer's own task,
# read by _run_tracked, which says it for a stop that came before any of the answer (issue 35 item 11).
_STOP_MARKED: contextvars.ContextVar[bool] = contextvars.ContextVar("stop_marked", default=False)
STOPPED, CUT = "stopped", "cut"  # why an answer was cancelled (cancel_cause)


def cancel_cause(rt: Runtime) -> str:
    """Why an answer's task was cancelled: CUT by the app's own stop (Ctrl-C, SIGTERM: ``rt.stopping``), whose cut
    answer is kept as "interrupted" and never said to be the user's doing (issue 36, N13); else STOPPED, by the
    page (its Stop, or the page closed), which the "stopped by you" line says."""
    return CUT if rt.stopping else STOPPED


def stopped_line(language: str) -> str:
    """The line a stopped answer ends with, or stands for when it was stopped before its first word."""
    return "`" + t(language, "stopped") + "`"


def _answer_cap(rt: Runtime) -> int:
    return max_tokens_cap(rt.max_model_len)


async def notice(text: str) -> cl.Message:
    """A line from the app (not the model): shown in the chat, never part of a prompt."""
    return await cl.Message(content=text, author=NOTICE_AUTHOR, metadata={"kind": KIND_NOTICE}).send()


async def _wait_until_ready(rt: Runtime, language: str) -> Optional[str]:
    """None when the engine is ready; else the message to show (after waiting through a load)."""
    status = rt.host.status
    if status.state is EngineState.READY:
        return None
    if status.state is EngineState.FAILED:
        return t(language, "failed", detail=status.detail)
    waiting = await notice(t(language, "waiting", detail=engine_state_text(status, language)))
    ready = await rt.host.wait_ready(WAIT_FOR_ENGINE_SECONDS)
    await waiting.remove()
    if ready:
        return None
    return t(language, "failed", detail=engine_state_text(rt.host.status, language))


def answer_text(message: cl.Message) -> str:
    """An answer as the model wrote it: the shown content without the stats line appended under it."""
    return stored_answer_text(message.content, message.metadata)


def earlier_user_messages(message: cl.Message) -> list[cl.Message]:
    """The chat's user messages shown above ``message``."""
    earlier = []
    for shown in cl.chat_context.get():
        if shown.id == message.id:
            break
        if shown.type == "user_message":
            earlier.append(shown)
    return earlier


def shown_turns(message: cl.Message) -> list[tuple[Message, list[str]]]:
    """Each chat turn shown above ``message``, with the names of the documents that turn's prompt carries."""
    turns: list[tuple[Message, list[str]]] = []
    for shown in cl.chat_context.get():
        if shown.id == message.id:
            break
        if shown.type == "user_message" and not is_preset_command(shown):
            # with the documents attached to it, as that turn's prompt had them (whole or its passages)
            documents = documents_of(shown.metadata)
            content = render_turn(clean_message(shown.content or "").text, documents)
            turns.append(({"role": "user", "content": content}, [d["name"] for d in documents if d.get("used") != []]))
        elif (shown.metadata or {}).get("kind") == KIND_ANSWER:
            turns.append(({"role": "assistant", "content": answer_text(shown)}, []))
    return turns


async def answer(rt: Runtime, message: cl.Message, continuing: Optional[cl.Message] = None) -> None:
    """Answer one user message (new, edited or regenerated) from the chat shown above it; with ``continuing``,
    write on where that answer to it stopped at its length limit (the prompt ends with the answer so far)."""
    language = _language()
    rt.metrics.messages.inc()
    cleaned = clean_message(message.content or "")
    text = cleaned.text
    documents = documents_of(message.metadata)
    if not text.strip() and not documents:
        if message.elements:  # only files, none of them read: their lines are in the chat already
            return
        rt.metrics.rejected.labels(reason="empty").inc()
        await notice(t(language, "empty"))
        return
    if len(text) > rt.settings.chat.max_message_chars:
        rt.metrics.rejected.labels(reason="too_many_chars").inc()
        await notice(t(language, "too_many_chars", chars=len(text), limit=rt.settings.chat.max_message_chars))
        return
    if cleaned.changed and continuing is None:
        await notice(t(language, "sanitized"))

    problem = await _wait_until_ready(rt, language)
    if problem:
        await notice(problem)
        return

    chat_settings = cl.user_session.get("chat_settings") or {}
    defaults = chat_defaults(rt.settings.chat, rt.generation_defaults, rt.max_model_len)
    sampling = clamp_sampling(chat_settings, defaults, _answer_cap(rt))
    for name, value, bound, used in sampling.corrections:
        await notice(t(language, "settings_fixed", name=name, value=value, low=bound.low, high=bound.high, used=used))
    system_prompt = str(chat_settings.get("system_prompt", defaults["system_prompt"]) or "")
    template = ChatTemplate(rt.tokenizer)
    max_tokens = sampling.chosen.max_tokens
    if continuing is None and not any(d.get(PASSAGES_OF) for d in documents):  # not fitted for it yet
        earlier = [documents_of(m.metadata) for m in earlier_user_messages(message)]
        documents = documents + await asyncio.to_thread(needing_passages, earlier, text)
    if documents and continuing is None:  # an answer continued keeps the passages its question was fitted with
        documents = await _fit_documents(rt, message, documents, system_prompt, text, max_tokens, template)
    so_far = answer_text(continuing) if continuing is not None else ""
    def fit() -> tuple[Any, list[str]]:  # earlier turns render their documents' passages: off the event loop
        earlier = shown_turns(message)
        fitted = fit_to_context(system_prompt, [turn for turn, _ in earlier], render_turn(text, documents),
                                rt.max_model_len, max_tokens, template, answer_so_far=so_far)
        return fitted, [name for _, names in earlier[:fitted.dropped_messages] for name in names]

    try:
        fitted, documents_dropped = await asyncio.to_thread(fit)
    except PromptTooLongError as err:
        rt.metrics.rejected.labels(reason="too_long").inc()
        await notice(t(language, "too_long", tokens=err.tokens, limit=err.limit))
        return
    if fitted.dropped_messages:
        await notice(t(language, "dropped", limit=rt.max_model_len, turns=fitted.dropped_messages) + (
            t(language, "dropped_documents", names=", ".join(documents_dropped)) if documents_dropped else ""))
    if fitted.shortened:
        await notice(t(language, "shortened", tokens=fitted.max_tokens))

    sampled = answer_sampling(sampling.chosen, fitted, rt.model.stop_token_ids)
    await _stream_answer(rt, language, fitted.token_ids, sampled, continuing)


async def _fit_documents(rt: Runtime, message: cl.Message, documents: list[dict], system_prompt: str, text: str,
                         max_tokens: int, template: ChatTemplate) -> list[dict]:
    """The message's documents as they fit in the room the question and the answer leave (whole, or the passages
    most relevant to the question), with a line for each one that did not fit whole. What was used is kept with
    the message, so later prompts of this chat show that turn as the model saw it."""
    language = _language()
    system = [{"role": "system", "content": system_prompt}] if system_prompt.strip() else []
    question = await asyncio.to_thread(template.encode, system + [{"role": "user", "content": render_turn(text, [])}])
    try:
        fits = await fit_in_context(documents, text, rt.max_model_len - max_tokens - len(question), rt.tokenizer,
                                    template.count, owner=session_user_identifier())
    except DocumentRefused as refused:  # the reader process that fits them failed: answered without them
        await notice(t(language, f"doc_{refused.reason}", name=refused.name, **refused.values))
        fits = [Fit(d["name"], 0, 0, used=[]) for d in documents]
    for each in fits:
        if each.left_out and each.tokens:  # tokens 0: never counted (the line above said why)
            await notice(t(language, "doc_left_out", name=each.name, tokens=each.tokens, room=max(each.room, 0)))
        elif each.where is not None:
            where_kind, where = each.where
            await notice(t(language, "doc_passages", name=each.name, tokens=each.tokens, room=each.room,
                           where_kind=t(language, f"doc_where_{where_kind}"), where=where, used=len(each.used or ()),
                           total=each.passages, left=each.passages_left_out))
    used = [as_sent(document, fit) for document, fit in zip(apply(documents, fits), fits, strict=True)]
    if used != documents:
        message.metadata = {**(message.metadata or {}), DOCUMENTS: used}
        await message.update()  # saved with the chat: a later prompt renders this turn the same way
    return used


async def _stream_answer(rt: Runtime, language: str, token_ids: list[int], sampling: Sampling,
                         continuing: Optional[cl.Message] = None) -> None:
    # The app answers (its favicon is the avatar): Chainlit's default author, the page's name, holds the model's
    # name, which its avatar route may refuse (it takes ASCII letters, digits and " _.-" only).
    reply = continuing or cl.Message(content="", author=APP_NAME, metadata={"kind": KIND_ANSWER})
    parts: list[str] = []
    nesting = NestingWatch()
    if continuing is not None:
        # The same message grows: its buttons and footer (the length line, the stats) go while the rest comes.
        await _take_off_answer_actions()
        so_far = answer_text(continuing)
        parts.append(so_far)
        nesting.too_deep(so_far)  # the watch starts from the answer's last line
        reply.content, reply.metadata, reply.actions = limit_nesting(so_far), {"kind": KIND_ANSWER}, []
        await reply.update()
    queue_notice: dict[str, cl.Message] = {}

    async def on_queued(position: int) -> None:
        note = queue_notice.get("msg")
        content = t(language, "queued", position=position)
        if note is None:
            queue_notice["msg"] = await notice(content)
        else:
            note.content = content
            await note.update()

    async def show_reading(line: str) -> None:  # the answer's place, until its first words take it
        await reply.stream_token(line, is_sequence=True)

    reading = ReadingLine(show_reading, language, len(token_ids), rt.host.prefill_rate.tokens_per_second())
    replace_reading = False
    pending: list[str] = []
    interval = rt.settings.chat.stream_interval_ms / 1000
    started = time.perf_counter()
    last_save = started
    saving: Optional[asyncio.Task] = None
    first_token_at: Optional[float] = None
    tokens = 0
    last_flush = 0.0
    outcome = "done"
    finish: Optional[str] = None
    try:
        async for delta in rt.host.stream(token_ids, sampling, on_queued=on_queued, owner=session_user_identifier(),
                                          on_admitted=reading.start):
            finish = delta.finish_reason or finish
            if "msg" in queue_notice:
                await queue_notice.pop("msg").remove()
            if first_token_at is None and delta.new_tokens:
                first_token_at = time.perf_counter()
                replace_reading = await reading.stop()
            tokens += delta.new_tokens
            if delta.text:
                parts.append(delta.text)
                pending.append(delta.text)
            now = time.perf_counter()
            # One websocket message per token freezes the page at ~300 tokens/s; send ~50 ms batches.
            if pending and now - last_flush >= interval:
                await _stream_piece(reply, "".join(pending), parts, nesting, replace_reading)
                replace_reading = False
                # Give the loop a real turn (I/O included): without it the websocket writer did not
                # run until the answer ended, and the page got the whole answer at once (seen in
                # Chromium; sleep(0) was not enough).
                await asyncio.sleep(0.001)
                pending.clear()
                last_flush = now
            if now - last_save >= SAVE_EVERY_SECONDS and parts and (saving is None or saving.done()):
                # In the background: a slow database must not hold up the stream (one save at a time).
                last_save = now
                saving = asyncio.create_task(_save_so_far(reply, "".join(parts)))
        if pending:
            await _stream_piece(reply, "".join(pending), parts, nesting, replace_reading)
    except asyncio.CancelledError:
        outcome = cancel_cause(rt)
        raise
    except EngineUnavailable as err:  # the engine died, or is restarting
        outcome = CUT if rt.stopping else "died"  # or was shut down with the app: nothing restarts
        if outcome == "died":
            await notice(t(language, "engine_died", detail=str(err)))
    except RequestRefused as err:
        outcome = "refused"
        await notice(t(language, "refused", detail=str(err)))
    finally:
        if outcome == CUT and parts:  # queued first: nothing below may wait or be cancelled before it
            await _keep_cut_answer(reply, "".join(parts), saving)
        reading_shown = await reading.stop()
        if saving is not None and not saving.done():
            await asyncio.wait([saving])  # the last partial save lands before the final text, never after it
        if "msg" in queue_notice:
            await queue_notice.pop("msg").remove()
        if outcome == "done":
            decode = time.perf_counter() - (first_token_at or started)
            values = stats_line_values(tokens, (first_token_at - started) if first_token_at else None, decode)
            lines = "\n\n" + t(language, "stats", prompt=len(token_ids), **values)
            metadata: dict[str, Any] = {"kind": KIND_ANSWER}
            if finish == LENGTH:  # said under the answer, and Continue offered (here and in a resumed chat)
                lines += "\n\n`" + t(language, "length_limit", tokens=sampling.max_tokens) + "`"
                metadata[FINISH] = LENGTH
            reply.content, footer = _with_footer("".join(parts), lines)
            reply.metadata = {**metadata, "footer": footer}
            await _offer_actions(reply, language)
            # stream_token sent the message with the first piece (or the reading line); an empty answer was never
            # sent.
            await (reply.update() if parts or reading_shown else reply.send())
            if rt.gpu_memory:
                rt.gpu_memory.sample(generating=True)
        elif parts:
            # Stopped or cut off: the answer so far stays in the chat (and in the next prompt); a stopped one
            # says so under it (the footer is never part of a prompt).
            if outcome == STOPPED:
                reply.content, footer = _with_footer("".join(parts), "\n\n" + stopped_line(language))
                reply.metadata = {"kind": KIND_ANSWER, "footer": footer}
                _STOP_MARKED.set(True)
            await reply.update()
        elif reading_shown:  # ended while the engine read the prompt: the reading line goes
            if outcome == STOPPED:  # it becomes the stopped line (a notice: never part of a prompt)
                reply.content = stopped_line(language)
                reply.metadata = {"kind": KIND_NOTICE}
                await reply.update()
                _STOP_MARKED.set(True)
            else:  # the engine died or refused: its own line says so
                await reply.remove()
        await _warn_if_history_fails(rt, language)


def _with_footer(text: str, lines: str) -> tuple[str, str]:
    """An answer as shown, with the app's ``lines`` under it, and the footer (what the prompt leaves out again):
    the nesting limited, and a code block the answer left open closed first, else the lines render as code."""
    shown = limit_nesting(text)
    footer = closing_fence(shown) + lines
    return shown + footer, footer


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


async def _stream_piece(reply: cl.Message, piece: str, parts: list[str], nesting: NestingWatch,
                        replace: bool = False) -> None:
    """Add ``piece`` to the answer on the page; ``replace``: the answer so far takes the place of what the message
    shows (the reading line)."""
    # too_deep first: it must see every piece. Too deep (rare) or replacing: the whole answer so far, made safe, in
    # place of what the message shows.
    if nesting.too_deep(piece) or replace:
        await reply.stream_token(limit_nesting("".join(parts)), is_sequence=True)
    else:
        await reply.stream_token(piece)


async def _warn_if_history_fails(rt: Runtime, language: str) -> None:
    """Once per chat: the answers come, but the chat is not being saved (read-only file, full disk)."""
    store = rt.history
    if store is not None and store.write_failing and not cl.user_session.get("history_warned"):
        cl.user_session.set("history_warned", True)
        await notice(t(language, "history_failing", detail=store.last_error or ""))


async def _keep_cut_answer(reply: cl.Message, text: str, saving: Optional[asyncio.Task]) -> None:
    """An answer the app's own stop cut off: all of it that was shown is queued for the database first, before
    anything here can wait (a socket already closing, a second cancel), still marked partial, so a resumed chat
    says "interrupted" under it with Regenerate (_mark_interrupted). On SIGTERM the chat kept 12-389 characters
    of ~1,500 shown, labelled "stopped by you" (issue 36, N13)."""
    if saving is not None:
        saving.cancel()  # a 2-s save not begun yet would queue a shorter text after this one
    reply.content = limit_nesting(text)
    reply.metadata = {"kind": KIND_ANSWER, PARTIAL: True}  # the page's last update stores the mark too
    await _save_so_far(reply, text)  # queued on this call's first step (update_step queues before it waits)


async def _save_so_far(reply: cl.Message, text: str) -> None:
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


async def _mark_interrupted(thread: dict[str, Any], language: str) -> None:
    """A resumed chat whose answer was saved mid-stream (the app was killed under it) says so under that answer.
    Runs before Chainlit builds the chat and the page from ``thread``'s steps, so both get the marked answer; the
    mark is saved, so it is made once."""
    from chainlit.data import get_data_layer

    messages = [step for step in thread.get("steps", []) if "message" in step.get("type", "")]
    for step in messages:
        if not (step.get("metadata") or {}).get(PARTIAL):
            continue
        step["output"], footer = _with_footer(step.get("output") or "", "\n\n`" + t(language, "interrupted") + "`")
        step["metadata"] = {"kind": KIND_ANSWER, "footer": footer}  # the footer never goes into a prompt
        step["streaming"] = False  # saved while it streamed: the page would draw it as still coming, no buttons
        await get_data_layer().update_step(step)


def _answer_actions(metadata: Optional[dict[str, Any]], language: str) -> list[cl.Action]:
    """The buttons under the newest answer: Regenerate, and Continue when it stopped at its length limit."""
    names = [REGENERATE] + ([CONTINUE] if (metadata or {}).get(FINISH) == LENGTH else [])
    icons = {REGENERATE: "refresh-cw", CONTINUE: "arrow-right"}
    return [cl.Action(name=name, payload={}, label=t(language, name), icon=icons[name], tooltip=t(language, name))
            for name in names]


async def _take_off_answer_actions() -> None:
    """The newest answer's buttons leave the page: a newer answer gets them, or this one is being rewritten."""
    for action in cl.user_session.get("answer_actions") or ():
        try:
            await action.remove()
        except Exception:  # that answer was removed with an edit
            log.debug("old answer action already gone", exc_info=True)
    cl.user_session.set("answer_actions", [])


async def _offer_actions(reply: cl.Message, language: str) -> None:
    """Put the buttons on this answer (sent with it), and take them off the previous one: only the newest answer
    can be regenerated or continued (an older one has later turns built on it)."""
    await _take_off_answer_actions()
    reply.actions = _answer_actions(reply.metadata, language)
    cl.user_session.set("answer_actions", reply.actions)


async def _offer_actions_on_resume(thread: dict[str, Any], language: str) -> None:
    """A reopened chat gets the buttons on its newest message when that is an answer, as the chat had them."""
    messages = [step for step in thread.get("steps", []) if "message" in step.get("type", "")]
    if not messages or (messages[-1].get("metadata") or {}).get("kind") != KIND_ANSWER:
        return
    actions = _answer_actions(messages[-1].get("metadata"), language)
    for action in actions:
        await action.send(for_id=messages[-1]["id"])
    cl.user_session.set("answer_actions", actions)


async def regenerate(rt: Runtime, action: cl.Action) -> None:
    """Answer the last question again: the old answer (and notices after it) leave the chat and the prompt."""
    shown = cl.chat_context.get()
    index = next((i for i, m in enumerate(shown) if m.id == action.forId), None)
    if index is None:
        return
    question = next((m for m in reversed(shown[:index]) if m.type == "user_message"), None)
    if question is None:
        return
    for later in shown[shown.index(question) + 1:]:
        await later.remove()
    cl.user_session.set("answer_actions", [])
    await answer(rt, question)


async def continue_answer(rt: Runtime, action: cl.Action) -> None:
    """Write on where the answer stopped at its length limit: into the same message, from a prompt that ends with
    the answer so far (no new turn), so the model takes it up mid-sentence or mid-code."""
    shown = cl.chat_context.get()
    reply = next((m for m in shown if m.id == action.forId), None)
    if reply is None or (reply.metadata or {}).get(FINISH) != LENGTH:
        return
    question = next((m for m in reversed(shown[:shown.index(reply)]) if m.type == "user_message"), None)
    if question is None:
        return
    await answer(rt, question, continuing=reply)


# Answers one chat may have running or queued at once; more would hold other users' places in the queue
# (one page once queued 60 messages, and another user saw "48 ahead of you").
MAX_ANSWERS_PER_CHAT = 3


async def _run_tracked(work: Coroutine[Any, Any, None]) -> None:
    """Run ``work`` as one of this chat's answers: Stop reaches it, a closed page cancels it."""
    # Chainlit's edit path (and an action) does not register its task, so Stop found nothing to cancel.
    task = asyncio.current_task()
    make_stoppable(task)
    running = answer_tasks()
    if len(running) >= MAX_ANSWERS_PER_CHAT:
        work.close()
        await notice(t(_language(), "too_many_waiting", limit=MAX_ANSWERS_PER_CHAT))
        return
    running.add(task)
    _STOP_MARKED.set(False)
    try:
        await work
    except asyncio.CancelledError:
        # Stopped before the answer's first word (its files being read, the engine reading the prompt): the chat
        # said nothing, as if the question had been dropped. The line says it, in the page and in the history.
        # Cut by the app's shutdown: no line (nobody stopped it; what was shown is kept, see _keep_cut_answer).
        if cancel_cause(current_runtime()) == STOPPED and not _STOP_MARKED.get():
            await notice(stopped_line(_language()))
        raise
    finally:
        running.discard(task)


def forget_closed_chats() -> int:
    """Drop the messages Chainlit keeps for chats whose page is gone; returns how many chats were dropped. The
    app grew ~53 KiB per chat without it (python -m bench.history_load); the chats stay in the database."""
    return forget_chat_contexts_of_closed_sessions()


async def keep_forgetting_closed_chats(every_s: float = 60.0) -> None:
    while True:
        await asyncio.sleep(every_s)
        forget_closed_chats()
        await asyncio.to_thread(give_back_free_memory)  # what they and the last minute's bursts freed (app/heap.py)


async def _send_settings(rt: Runtime, values: dict[str, Any]) -> dict[str, Any]:
    """The settings panel with ``values`` (the defaults where one is missing); returns what it holds."""
    defaults = chat_defaults(rt.settings.chat, rt.generation_defaults, rt.max_model_len)
    initial = {**defaults, **typed_settings(values)}  # a stored or sent value of another type is not drawn
    language = _language()
    top_p, max_tokens = SAMPLING_BOUNDS["top_p"], SAMPLING_BOUNDS["max_tokens"]
    temperature = SAMPLING_BOUNDS["temperature"]
    settings = await cl.ChatSettings([
        TextInput(id="system_prompt", label=t(language, "setting_system_prompt"),
                  initial=initial["system_prompt"], multiline=True),
        Slider(id="temperature", label=t(language, "setting_temperature"), initial=initial["temperature"],
               min=temperature.low, max=temperature.high, step=0.05),
        Slider(id="top_p", label=t(language, "setting_top_p"), initial=initial["top_p"],
               min=top_p.low, max=top_p.high, step=0.05),
        Slider(id="max_tokens", label=t(language, "setting_max_tokens"), initial=initial["max_tokens"],
               min=max_tokens.low, max=_answer_cap(rt), step=max_tokens.low),
    ]).send()
    cl.user_session.set("chat_settings", settings)
    return settings


async def _keep_settings(settings: dict[str, Any]) -> None:
    """This chat's settings, saved with the chat now, not only when the page closes (a crash would lose them)."""
    cl.user_session.set("chat_settings", settings)
    await save_session_now()


def _presets(rt: Runtime) -> Optional[PresetStore]:
    return PresetStore(rt.history.layer) if rt.history is not None else None


async def _open_chat(rt: Runtime, saved: dict[str, Any]) -> None:
    """The settings panel (with this chat's saved values, else the defaults), the presets and the status panel."""
    language = _language()
    await _send_settings(rt, saved)
    await offer_presets(_presets(rt), language)
    if rt.damaged_history is not None:  # once: the first page opened after the start that kept it aside
        kept, rt.damaged_history = rt.damaged_history, None
        await notice(t(language, "history_damaged", path=kept))
    # Runs in this chat's context, so it draws into this chat's panel; ends with the chat.
    cl.user_session.set("status_task", asyncio.create_task(keep_status_fresh(rt, language)))


async def _say_if_a_chat_was_refused() -> None:
    """The page asked for another user's chat (its address): Chainlit refused it and this is a new chat instead
    (app/guards); one line says so, and the page leaves that chat's address (issue 35 item 7)."""
    if cl.user_session.get(REFUSED_CHAT):
        cl.user_session.set(REFUSED_CHAT, None)  # once: the user session is saved with the new chat
        line = t(_language(), "not_your_chat")
        await leave_refused_chat(line)
        await notice(line)


async def _attach_documents(rt: Runtime, message: cl.Message) -> None:
    """Read the files sent with ``message`` (off the event loop, in a process of their own) into its metadata; a
    line in the chat for each one that is not read. The message itself always goes on to be answered."""
    language = _language()
    chat = rt.settings.chat
    # Said at once: the page has shown nothing since the message was sent, and a reader process takes its time to
    # start (~0.5 s here); the answer's reading line follows (issue 35 item 2).
    names = ", ".join(e.name for e in message.elements if getattr(e, "path", None))
    reading = await notice(t(language, "reading_files", names=names)) if names else None
    try:
        documents, lines = await read_documents(message.elements, chat.max_upload_mb, chat.max_upload_files,
                                                language, owner=session_user_identifier())
    finally:
        if reading is not None:
            await reading.remove()
    for line in lines:
        await notice(line)
    message.metadata = {**(message.metadata or {}), DOCUMENTS: documents}


def install() -> None:
    """Register the Chainlit handlers (called by app/ui/chainlit_app.py)."""
    rt = current_runtime()
    configure_uploads(rt.settings.chat)  # Chainlit's upload limits are --max-upload-mb and --max-upload-files
    install_history(rt)  # chat history: data layer, and the local user on loopback (app/ui/chat_history.py)
    if rt.login.has_login_page:
        # Chainlit's login page guards the UI: each user's own secret, or the one person's --auth-token. On loopback
        # without users it is registered too, and offered once a user is added while the app runs.
        @cl.password_auth_callback
        async def check_login(username: str, password: str) -> Optional[cl.User]:
            identity = await rt.login.check(username, password)
            return cl.User(identifier=identity.name, metadata=identity.metadata) if identity else None

        follow_login_mode(rt.login.asks_for_login)

    @cl.set_starters
    async def starters(user: Any = None, language: Optional[str] = None) -> list[cl.Starter]:
        return [cl.Starter(label=t(language, f"starter_{name}_label"), message=t(language, f"starter_{name}"))
                for name in STARTERS]

    @cl.on_chat_start
    async def on_chat_start() -> None:
        rt = current_runtime()
        rt.metrics.chats.inc()
        await _say_if_a_chat_was_refused()
        await _open_chat(rt, {})

    @cl.on_chat_resume
    async def on_chat_resume(thread: dict) -> None:
        # Chainlit put the chat's saved messages back (the next prompt is built from them) and its saved
        # session, whose chat_settings are this chat's system prompt, temperature, top_p and length.
        rt = current_runtime()
        await _open_chat(rt, cl.user_session.get("chat_settings") or {})
        await _mark_interrupted(thread, _language())
        await _offer_actions_on_resume(thread, _language())
        relink_resumed_files(thread, rt.settings.server.root_path)
        await show_status_in_resumed_chat(rt, _language(), thread)

    @cl.on_chat_end
    async def on_chat_end() -> None:
        # The page went away: stop its answers, running or queued; nobody is left to read them.
        for task in list(answer_tasks()):
            task.cancel()
        task = cl.user_session.get("status_task")
        if task:
            task.cancel()
        rt = current_runtime()
        if rt.uploads is not None:  # its uploads go now, not when Chainlit drops the session 10 min later (N7)
            delete_session_files(rt.uploads.session_ended(cl.context.session.id))

    @cl.on_settings_update
    async def on_settings_update(settings: dict[str, Any]) -> None:
        await _keep_settings(settings)

    @cl.on_message
    async def on_message(message: cl.Message) -> None:
        rt = current_runtime()

        async def use_preset(values: dict[str, Any]) -> None:
            await _keep_settings(await _send_settings(rt, values))

        if await run_preset_command(_presets(rt), message, _language(), notice, use_preset):
            return  # "Save preset": done, and no question to answer

        async def read_and_answer() -> None:  # reading the files is part of the answer: Stop reaches it too
            if message.elements and DOCUMENTS not in (message.metadata or {}):  # files attached, not yet read
                await _attach_documents(rt, message)
            await store_before_answer(message)  # the user's message is stored before the engine answers
            if rt.history is not None:  # a saved chat has an address of its own
                await tell_page_the_chat_address(rt.settings.server.root_path)
            await answer(rt, message)

        await _run_tracked(read_and_answer())
        if rt.gpu_memory:  # GPU memory peak moved; without a GPU nothing in the panel changed
            await show_status(rt, _language())

    @cl.on_window_message
    async def on_window_message(message: Any) -> None:
        # The page passes every window message on, whoever posted it: only the Status button's is acted on.
        if message == SHOW_STATUS_MESSAGE:
            await show_status(current_runtime(), _language())

    def answering(handler: Callable[[Runtime, cl.Action], Coroutine[Any, Any, None]]) -> Callable[..., Any]:
        async def on_action(action: cl.Action) -> None:
            # Actions arrive as an HTTP request: answer in a task of its own (with the stop button shown)
            # instead of holding the request open for the whole answer.
            rt = current_runtime()
            emitter = cl.context.emitter

            async def run() -> None:
                await emitter.task_start()
                try:
                    await _run_tracked(handler(rt, action))
                finally:
                    await emitter.task_end()

            asyncio.create_task(run())

        return on_action

    cl.action_callback(REGENERATE)(answering(regenerate))
    cl.action_callback(CONTINUE)(answering(continue_answer))

    @cl.on_stop
    async def on_stop() -> None:
        # Chainlit cancels the current task; EngineHost.stream's cleanup aborts the engine request, and the
        # stopped answer is marked in place of Chainlit's own "Task manually stopped." message.
        log.info("stop pressed")
        await remove_chainlits_stop_message()
