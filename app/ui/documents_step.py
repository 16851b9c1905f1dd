"""The documents step of an answer: the files sent with a message read into its metadata, and the documents its
prompt carries (a later question's own passages of a file sent in part, each fitted whole or as passages into the
room the question and the answer leave), with a line in the chat for each one that is not read or not used whole.
"""
from __future__ import annotations

import asyncio
from typing import Optional

import chainlit as cl

from app.conversation import ChatTemplate
from app.documents.attach import read_documents
from app.documents.fitting import fit_in_context
from app.documents.followup import PASSAGES_OF, as_sent, needing_passages
from app.documents.prompt import DOCUMENTS, Fit, apply, documents_of, render_turn
from app.errors import DocumentRefused
from app.history.data_layer import session_user_identifier
from app.i18n import t
from app.runtime import Runtime
from app.ui.chat_messages import earlier_user_messages, language, notice


def files_to_read(message: cl.Message) -> bool:
    """Files attached to ``message``, not yet read."""
    return bool(message.elements) and DOCUMENTS not in (message.metadata or {})


async def attach_documents(rt: Runtime, message: cl.Message) -> None:
    """Read the files sent with ``message`` (off the event loop, in a process of their own) into its metadata; a
    line in the chat for each one that is not read. The message itself always goes on to be answered."""
    page_language = language()
    chat = rt.settings.chat
    # Said at once: the page has shown nothing since the message was sent, and a reader process takes its time to
    # start (~0.5 s here); the answer's reading line follows (issue 35 item 2).
    names = ", ".join(e.name for e in message.elements if getattr(e, "path", None))
    reading = await notice(t(page_language, "reading_files", names=names)) if names else None
    try:
        documents, lines = await read_documents(message.elements, chat.max_upload_mb, chat.max_upload_files,
                                                page_language, owner=session_user_identifier())
    finally:
        if reading is not None:
            await reading.remove()
    for line in lines:
        await notice(line)
    message.metadata = {**(message.metadata or {}), DOCUMENTS: documents}


async def documents_for_prompt(rt: Runtime, message: cl.Message, documents: list[dict], text: str,
                               system_prompt: str, max_tokens: int, template: ChatTemplate,
                               continuing: Optional[cl.Message]) -> list[dict]:
    """The documents this question's prompt carries: its own (``documents``), and the passages of earlier files
    sent in part that it needs, fitted to the room left. An answer continued keeps the passages its question was
    fitted with."""
    if continuing is not None:
        return documents
    if not any(d.get(PASSAGES_OF) for d in documents):  # not fitted for it yet
        earlier = [documents_of(m.metadata) for m in earlier_user_messages(message)]
        documents = documents + await asyncio.to_thread(needing_passages, earlier, text)
    if documents:
        documents = await fit_documents(rt, message, documents, system_prompt, text, max_tokens, template)
    return documents


async def fit_documents(rt: Runtime, message: cl.Message, documents: list[dict], system_prompt: str, text: str,
                        max_tokens: int, template: ChatTemplate) -> list[dict]:
    """The message's documents as they fit in the room the question and the answer leave (whole, or the passages
    most relevant to the question), with a line for each one that did not fit whole. What was used is kept with
    the message, so later prompts of this chat show that turn as the model saw it."""
    page_language = language()
    system = [{"role": "system", "content": system_prompt}] if system_prompt.strip() else []
    question = await asyncio.to_thread(template.encode, system + [{"role": "user", "content": render_turn(text, [])}])
    try:
        fits = await fit_in_context(documents, text, rt.max_model_len - max_tokens - len(question), rt.tokenizer,
                                    template.count, owner=session_user_identifier())
    except DocumentRefused as refused:  # the reader process that fits them failed: answered without them
        await notice(t(page_language, f"doc_{refused.reason}", name=refused.name, **refused.values))
        fits = [Fit(d["name"], 0, 0, used=[]) for d in documents]
    for each in fits:
        await _say_how_it_fit(each, page_language)
    used = [as_sent(document, fit) for document, fit in zip(apply(documents, fits), fits, strict=True)]
    if used != documents:
        message.metadata = {**(message.metadata or {}), DOCUMENTS: used}
        await message.update()  # saved with the chat: a later prompt renders this turn the same way
    return used


async def _say_how_it_fit(each: Fit, language: str) -> None:
    """A line for a document that did not fit whole: left out, or which of its passages the prompt carries."""
    if each.left_out and each.tokens:  # tokens 0: never counted (the line above said why)
        await notice(t(language, "doc_left_out", name=each.name, tokens=each.tokens, room=max(each.room, 0)))
    elif each.where is not None:
        where_kind, where = each.where
        await notice(t(language, "doc_passages", name=each.name, tokens=each.tokens, room=each.room,
                       where_kind=t(language, f"doc_where_{where_kind}"), where=where, used=len(each.used or ()),
                       total=each.passages, left=each.passages_left_out))
