"""The chat's messages as this app marks and reads them: what each of ours is (an answer or a notice, kept in its
metadata and saved with the chat: only answers go back into prompts), the app's own lines, an answer's text
without the footer shown under it, and the turns the page shows above a message.

The prompt comes from ``cl.chat_context``, the messages this chat shows: Chainlit removes the later messages there
when one is edited, and puts a resumed chat's saved messages back there. So what the model sees is always what the
page shows (an earlier version kept its own list and, after an edit, still sent the deleted turns: "prompt 121
tokens" for a one-turn page).
"""
from __future__ import annotations

import chainlit as cl

from app.conversation import Message, clean_message
from app.documents.prompt import documents_of, render_turn
from app.history.messages import KIND, KIND_ANSWER, KIND_NOTICE, NOTICE_AUTHOR
from app.history.messages import answer_text as stored_answer_text
from app.i18n import t
from app.ui.markdown_nesting import closing_fence, limit_nesting
from app.ui.preset_commands import is_preset_command


def language() -> str:
    """This chat's page language."""
    try:
        return getattr(cl.context.session, "language", None) or "en-US"  # an HTTP context has none
    except Exception:
        return "en-US"


async def notice(text: str) -> cl.Message:
    """A line from the app (not the model): shown in the chat, never part of a prompt."""
    return await cl.Message(content=text, author=NOTICE_AUTHOR, metadata={KIND: KIND_NOTICE}).send()


async def toast(text: str) -> None:
    """A line about a click or an edit not acted on: shown a moment over the page, no part of the chat."""
    await cl.context.emitter.send_toast(text, "warning")


def stopped_line(language: str) -> str:
    """The line a stopped answer ends with, or stands for when it was stopped before its first word."""
    return "`" + t(language, "stopped") + "`"


def answer_text(message: cl.Message) -> str:
    """An answer as the model wrote it: the shown content without the stats line appended under it."""
    return stored_answer_text(message.content, message.metadata)


def with_footer(text: str, lines: str) -> tuple[str, str]:
    """An answer as shown, with the app's ``lines`` under it, and the footer (what the prompt leaves out again):
    the nesting limited, and a code block the answer left open closed first, else the lines render as code."""
    shown = limit_nesting(text)
    footer = closing_fence(shown) + lines
    return shown + footer, footer


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
        elif (shown.metadata or {}).get(KIND) == KIND_ANSWER:
            turns.append(({"role": "assistant", "content": answer_text(shown)}, []))
    return turns
