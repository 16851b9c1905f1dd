"""The chat's side: the files Chainlit uploaded with a message -> documents in the message's metadata, and one line
in the chat for each file that is not read. The typed text is answered either way.

Chainlit's upload route (POST /project/file, behind app/guards/web.py's --max-upload-mb body limit) stores each file
in this process's private files folder (0700, app/server.py) and hands them to on_message as ``message.elements``
with a ``path``. Nothing here logs a file's contents: names, sizes and reasons only.
"""
from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any, Optional

from app.chainlit_internals import set_upload_limits
from app.documents.limits import MAX_DOCUMENT_CHARS, MIB, sniff, too_big
from app.documents.prompt import Document, documents_of
from app.documents.worker import read_in_worker
from app.errors import DocumentRefused
from app.history.messages import USER_MESSAGE
from app.i18n import t

log = logging.getLogger("ernie_chat.documents")


def configure_uploads(chat_settings: Any) -> None:
    """Chainlit's upload limits (its page refuses a larger file or one file too many before sending it) from our
    flags, so --max-upload-mb and --max-upload-files are the one rule; .chainlit/config.toml holds the rest."""
    set_upload_limits(chat_settings.max_upload_mb, chat_settings.max_upload_files)


async def read_documents(elements: list[Any], max_upload_mb: int, max_files: int, language: str,
                         owner: Optional[str] = None) -> tuple[list[Document], list[str]]:
    """The message's files read into documents, and the lines to show for those that were not (or only partly);
    ``owner``: the user they are read for (users take turns for the workers)."""
    files = [e for e in elements if getattr(e, "path", None)]
    lines: list[str] = []
    if len(files) > max_files:
        left_out = ", ".join(e.name for e in files[max_files:])
        lines.append(t(language, "doc_too_many", count=len(files), limit=max_files, names=left_out))
        files = files[:max_files]
    # At once, as far as the workers' limit lets (app/documents/worker.py); documents and lines in the files' order.
    read = await asyncio.gather(*(_read_one(element, max_upload_mb, language, owner) for element in files))
    documents = [document for document, _ in read if document is not None]
    return documents, lines + [line for _, line in read if line is not None]


async def _read_one(element: Any, max_upload_mb: int, language: str,
                    owner: Optional[str]) -> tuple[Optional[Document], Optional[str]]:
    """One file: its document (None when not read), and the line to show for it (None when read whole)."""
    path, name = Path(element.path), str(element.name)
    try:
        if too_big(path, max_upload_mb):
            raise DocumentRefused("too_big", name, size=path.stat().st_size / MIB, limit=max_upload_mb)
        kind = sniff(path, name, getattr(element, "mime", "") or "")
        found = await read_in_worker(path, name, kind, MAX_DOCUMENT_CHARS, owner=owner)
    except DocumentRefused as refused:
        log.info("attached file not read: %s", refused)
        return None, t(language, f"doc_{refused.reason}", name=name, **refused.values)
    log.info("attached %s: %s, %d characters of text", name, kind.value, len(found["text"]))
    document: Document = {"name": name, "kind": kind.value, "text": found["text"],
                          "page_starts": found["page_starts"]}
    return document, t(language, "doc_truncated", name=name, limit=MAX_DOCUMENT_CHARS) if found["truncated"] \
        else None


def document_url(root_path: str, thread_id: str, step_id: str, index: int) -> str:
    return f"{root_path}/history/chats/{thread_id}/documents/{step_id}/{index}"


def relink_resumed_files(thread: dict[str, Any], root_path: str) -> None:
    """A resumed chat's attached files, pointed at their kept text: the uploaded copies lived in the files folder
    of the process that took them (gone after a restart), so Chainlit's own links would be broken. Each read file
    becomes a link to its text (``history_router``'s documents route, for the chat's owner); a file that was not
    read (its line is in the chat) is left out. Runs before Chainlit sends ``thread`` to the page.

    Only uploads are attachments: an element the app draws on a question (a custom element: the branch arrows,
    app/ui/question_branches.py) is kept as it is. Chainlit makes every upload a file, image, pdf, text, audio or
    video element, never a custom one."""
    documents = {step["id"]: documents_of(step.get("metadata")) for step in thread.get("steps", [])
                 if step.get("type") == USER_MESSAGE}
    kept = []
    for element in thread.get("elements") or []:
        step_documents = documents.get(element.get("forId"))
        if step_documents is None or element.get("type") == "custom":
            kept.append(element)  # not an attachment of a user message
            continue
        names = [d.get("name") for d in step_documents]
        if element.get("name") not in names:
            continue
        index = names.index(element["name"])
        names[index] = None  # two files of the same name: each link its own
        kept.append({**element, "type": "file", "mime": "text/plain", "chainlitKey": None, "path": None,
                     "url": document_url(root_path, thread["id"], element["forId"], index)})
    thread["elements"] = kept
