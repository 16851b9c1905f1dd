"""Answering one user message (new, edited, regenerated or continued): the checks on it, the engine ready, this
chat's settings, the documents step, the prompt built from the chat the page shows and fitted to the context, then
the answer streamed (app/ui/streamed_answer.py).

The rules (cleaning, defaults, bounds, fitting to the context) live in app/conversation.py and are shared with /v1;
this module only talks to the page.
"""
from __future__ import annotations

import asyncio
from typing import NamedTuple, Optional

import chainlit as cl

from app.conversation import (
    ChatTemplate,
    FittedPrompt,
    answer_sampling,
    chat_defaults,
    clamp_sampling,
    clean_message,
    fit_to_context,
)
from app.documents.prompt import documents_of, render_turn
from app.engine.protocol import Sampling
from app.engine.status import EngineState
from app.errors import PromptTooLongError
from app.history.messages import FINISH, KIND, KIND_NOTICE, LENGTH, MAX_VERSIONS, PARTIAL, versions_of
from app.i18n import t
from app.runtime import Runtime
from app.settings import ANSWERS, Bound
from app.ui.answer_actions import answer_acted_on
from app.ui.answers_command import answers_asked
from app.ui.chat_messages import answer_text, language, notice, shown_turns, toast
from app.ui.documents_step import documents_for_prompt
from app.ui.preset_commands import is_preset_command
from app.ui.session_keys import CHAT_SETTINGS
from app.ui.settings_panel import answer_cap
from app.ui.several_answers import SeveralAnswers
from app.ui.status_panel import engine_state_text
from app.ui.streamed_answer import StreamedAnswer

WAIT_FOR_ENGINE_SECONDS = 600.0


class Question(NamedTuple):
    text: str  # cleaned
    documents: list[dict]  # attached to it (app/documents/prompt.py)


class Prompt(NamedTuple):
    token_ids: list[int]
    sampling: Sampling
    answers: int  # the chat's answers at once (the settings panel's, within ANSWERS_AT_ONCE)


async def answer(rt: Runtime, message: cl.Message, continuing: Optional[cl.Message] = None,
                 regenerating: Optional[cl.Message] = None) -> None:
    """Answer one user message (new, edited or regenerated) from the chat shown above it; with ``continuing``,
    write on where that answer to it stopped at its length limit (the prompt ends with the answer so far); with
    ``regenerating``, write a new version of that answer to it into its message."""
    page_language = language()
    rt.metrics.messages.inc()
    question = await _checked_question(rt, message, continuing, page_language)
    if question is None:
        return
    problem = await _wait_until_ready(rt, page_language)
    if problem:
        await notice(problem)
        return
    prompt = await _prompt(rt, message, question, continuing, page_language)
    if prompt is None:
        return
    count = await _answers_to_write(message, prompt, continuing, regenerating, page_language)
    if count > 1:
        await SeveralAnswers(rt, page_language, prompt.token_ids, prompt.sampling, count, regenerating).write()
    else:
        await StreamedAnswer(rt, page_language, prompt.token_ids, prompt.sampling, continuing, regenerating).write()


async def _answers_to_write(message: cl.Message, prompt: Prompt, continuing: Optional[cl.Message],
                            regenerating: Optional[cl.Message], language: str) -> int:
    """How many answers to write at once: one to continue; the chat's setting (or the message's "Several answers"
    command) for a new one; on Regenerate as many as the answer has room for among its MAX_VERSIONS, with a line
    when that is fewer than asked (regenerate() already refused a full one)."""
    if continuing is not None:
        return 1
    if regenerating is None:
        return answers_asked(prompt.answers, message.command)
    room = MAX_VERSIONS - len(versions_of(regenerating.content, regenerating.metadata))
    if room < prompt.answers:
        await notice(t(language, "versions_room", limit=MAX_VERSIONS, room=room, asked=prompt.answers))
    return max(1, min(prompt.answers, room))


async def refused_as_too_long(rt: Runtime, text: str, language: str) -> bool:
    """True, with a line saying so, when ``text`` is longer than a message may be (a question asked, or an edit
    about to become a question's branch)."""
    if len(text) <= rt.settings.chat.max_message_chars:
        return False
    rt.metrics.rejected.labels(reason="too_many_chars").inc()
    await notice(t(language, "too_many_chars", chars=len(text), limit=rt.settings.chat.max_message_chars))
    return True


async def _checked_question(rt: Runtime, message: cl.Message, continuing: Optional[cl.Message],
                            language: str) -> Optional[Question]:
    """The message's text (cleaned) and documents; None, with a line saying why, when it is not to be answered."""
    cleaned = clean_message(message.content or "")
    text = cleaned.text
    documents = documents_of(message.metadata)
    if not text.strip() and not documents:
        if message.elements:  # only files, none of them read: their lines are in the chat already
            return None
        rt.metrics.rejected.labels(reason="empty").inc()
        await notice(t(language, "empty"))
        return None
    if await refused_as_too_long(rt, text, language):
        return None
    if cleaned.changed and continuing is None:
        await notice(t(language, "sanitized"))
    return Question(text, documents)


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


async def _prompt(rt: Runtime, message: cl.Message, question: Question, continuing: Optional[cl.Message],
                  language: str) -> Optional[Prompt]:
    """The prompt's tokens and the answer's sampling, from this chat's settings and the chat shown above
    ``message``; None, with a line saying why, when the question alone does not fit."""
    chat_settings = CHAT_SETTINGS.get()
    defaults = chat_defaults(rt.settings.chat, rt.generation_defaults, rt.max_model_len)
    sampling = clamp_sampling(chat_settings, defaults, answer_cap(rt))
    for name, value, bound, used in sampling.corrections:
        await notice(setting_fixed(language, name, value, bound, used))
    system_prompt = str(chat_settings.get("system_prompt", defaults["system_prompt"]) or "")
    template = ChatTemplate(rt.tokenizer)
    max_tokens = sampling.chosen.max_tokens
    text = question.text
    documents = await documents_for_prompt(rt, message, question.documents, text, system_prompt, max_tokens,
                                           template, continuing)
    so_far = answer_text(continuing) if continuing is not None else ""

    def fit() -> tuple[FittedPrompt, list[str]]:  # earlier turns render their documents' passages: off the event loop
        earlier = shown_turns(message)
        fitted = fit_to_context(system_prompt, [turn for turn, _ in earlier], render_turn(text, documents),
                                rt.max_model_len, max_tokens, template, answer_so_far=so_far)
        return fitted, [name for _, names in earlier[:fitted.dropped_messages] for name in names]

    try:
        fitted, documents_dropped = await asyncio.to_thread(fit)
    except PromptTooLongError as err:
        rt.metrics.rejected.labels(reason="too_long").inc()
        await notice(t(language, "too_long", tokens=err.tokens, limit=err.limit))
        return None
    await _say_what_was_fitted(rt, fitted, documents_dropped, language)
    sampled = answer_sampling(sampling.chosen, fitted, rt.model.stop_token_ids)
    return Prompt(fitted.token_ids, sampled, sampling.chosen.answers)


def setting_fixed(language: str, name: str, value: object, bound: Bound, used: float) -> str:
    """The line for a chat setting that was brought within its range (or to a whole number): the setting by the
    name the settings panel gives it where it has a short one, its range, what was asked and what is used."""
    label = t(language, "answers_name") if name == ANSWERS else name
    whole = t(language, "whole_numbers") if bound.integer else ""
    return t(language, "settings_fixed", name=label, low=f"{bound.low:g}", high=f"{bound.high:g}", whole=whole,
             value=value, used=f"{used:g}")


async def _say_what_was_fitted(rt: Runtime, fitted: FittedPrompt, documents_dropped: list[str], language: str) -> None:
    """Lines for what fitting the prompt changed: earlier turns (and their documents) left out, the answer's room
    shortened."""
    if fitted.dropped_messages:
        await notice(t(language, "dropped", limit=rt.max_model_len, turns=fitted.dropped_messages) + (
            t(language, "dropped_documents", names=", ".join(documents_dropped)) if documents_dropped else ""))
    if fitted.shortened:
        await notice(t(language, "shortened", tokens=fitted.max_tokens))


async def regenerate(rt: Runtime, action: cl.Action) -> None:
    """Answer the last question again, into the same message: the old answer is kept as a version of it (up to
    MAX_VERSIONS), the notices after the question leave the chat, and the prompt is the chat above the question.
    Only the newest answer is regenerated (answer_acted_on): anything else gets a line and changes nothing."""
    reply = await newest_or_say_why(action)
    question = _question_of(reply) if reply is not None else None
    if reply is None or question is None:
        return
    if (reply.metadata or {}).get(PARTIAL):  # cut by the app's own stop, which is ending this chat's page
        return
    if len(versions_of(reply.content, reply.metadata)) >= MAX_VERSIONS:
        await notice(t(language(), "versions_full", limit=MAX_VERSIONS))  # nothing is lost, nothing is written
        return
    shown = cl.chat_context.get()
    for later in shown[shown.index(question) + 1:]:
        if (later.metadata or {}).get(KIND) == KIND_NOTICE:  # lines about the old answer; never a turn
            await later.remove()
    await answer(rt, question, regenerating=reply)


async def newest_or_say_why(action: cl.Action) -> Optional[cl.Message]:
    """The newest answer the button names; None, with a line over the page saying why (not a chat message), for any
    other (a stale or forged button, or one pressed while another answer is written)."""
    reply = answer_acted_on(action.forId)
    if reply is None:
        await toast(t(language(), "not_newest"))
    return reply


async def takes_the_button(action: cl.Action) -> bool:
    """Whether a Regenerate or Continue is acted on, asked before it becomes the chat's stoppable task: a refused
    one must not take Stop (and the page's "answering" state) from the answer being written."""
    return await newest_or_say_why(action) is not None


def _question_of(reply: cl.Message) -> Optional[cl.Message]:
    """The question ``reply`` answers: the last user message above it (a "Save preset" one is none)."""
    shown = cl.chat_context.get()
    return next((m for m in reversed(shown[:shown.index(reply)])
                 if m.type == "user_message" and not is_preset_command(m)), None)


async def continue_answer(rt: Runtime, action: cl.Action) -> None:
    """Write on where the answer stopped at its length limit: into the same message, from a prompt that ends with
    the answer so far (no new turn), so the model takes it up mid-sentence or mid-code."""
    reply = await newest_or_say_why(action)
    if reply is None or (reply.metadata or {}).get(FINISH) != LENGTH:
        return
    question = _question_of(reply)
    if question is None:
        return
    await answer(rt, question, continuing=reply)
