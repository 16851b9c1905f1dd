"""What is stored for a chat message: the one contract that the chat writes (app/ui/streamed_answer.py and
app/ui/chat_messages.py), the importers make (app/history/importers.py), the export reads (app/history/export.py),
the data layer serves back (data_layer.py) and the page's own messages are held to (app/guards/page_input.py).

A message is a Chainlit step. Its ``type`` says whose it is (the page sends every message as the user's); its
``metadata`` what it is to the app, set by the server only: ``kind`` (an answer, which goes back into prompts, or
a notice, which never does), ``footer`` (the lines the app put under an answer: the stats, "stopped", the length
limit; part of the page, never of a prompt or an export), ``partial`` (saved while it was being written: a resumed
chat says "interrupted" under it) and ``finish`` (``length``: it stopped at its length limit, Continue writes on).
"""
from __future__ import annotations

from typing import Any, Optional

# Chainlit's step types for messages, and the chat role each one stands for.
USER_MESSAGE, ASSISTANT_MESSAGE, SYSTEM_MESSAGE = "user_message", "assistant_message", "system_message"
ROLE_OF_TYPE = {USER_MESSAGE: "user", ASSISTANT_MESSAGE: "assistant", SYSTEM_MESSAGE: "system"}

# A message's metadata keys, and their values.
KIND = "kind"
KIND_ANSWER, KIND_NOTICE = "answer", "notice"  # only answers go back into prompts
FOOTER = "footer"
PARTIAL = "partial"  # in an answer's metadata while it is being written
FINISH, LENGTH = "finish", "length"  # an answer that stopped at its length limit (max_tokens)

# Authors: a notice is the app's line (never the model's), shown as "system"; an answer the app did not write
# itself (imported, or unreadable in the database) is the assistant's, a question whose author is unknown the user's.
NOTICE_AUTHOR = "system"
ASSISTANT_AUTHOR, USER_AUTHOR = "Assistant", "User"

# A chat's name: Chainlit names a chat after its first message; the sidebar shows one line.
CHAT_NAME_CHARS = 200


def answer_text(shown: Optional[str], metadata: Optional[dict[str, Any]]) -> str:
    """An answer as the model wrote it: what is shown (or stored) without the footer the app put under it."""
    footer = metadata.get(FOOTER) if isinstance(metadata, dict) else None  # an imported file's may be anything
    content = shown or ""
    return content[:-len(footer)] if isinstance(footer, str) and footer and content.endswith(footer) else content


def is_notice(step: dict[str, Any]) -> bool:
    """A line of the app's in the chat (its author "system"), not a message of the user's or the model's."""
    return step.get("type") == SYSTEM_MESSAGE or step.get("name") == NOTICE_AUTHOR
