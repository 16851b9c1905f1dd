"""Chats out of the database: JSON to keep (a backup that ``import`` reads back, app/history/restore.py), Markdown to
read; one file each (0600) under a folder per user, each message with its stored time, and each user's presets as
presets.json. ``python launch.py export`` (app/history/transfer.py) and the page's download links
(app/ui/chat_history.py) use the same renderers.
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Optional

from sqlalchemy import select

from app.documents.prompt import documents_of
from app.history.data_layer import HistoryDataLayer
from app.history.importers import EXPORT_FORMAT, PRESETS_FORMAT
from app.history.messages import ROLE_OF_TYPE, answer_text, is_notice, stored_branches, versions_of
from app.history.presets import PresetStore
from app.history.schema import steps, threads
from app.private_files import make_private_folder, write_private

PRESETS_FILE_NAME = "presets.json"


def chat_messages(thread: dict) -> list[dict[str, Any]]:
    """The chat's messages as role/content pairs, in order; notices (author "system") left out."""
    found = []
    for step in thread.get("steps") or []:
        role = ROLE_OF_TYPE.get(str(step.get("type")))
        if role is None or is_notice(step):
            continue
        text = str(step.get("output") or "")
        if role == "assistant":  # the footer (the stats, the length line) is part of the page, not the answer
            text = answer_text(text, step.get("metadata"))
        message = {"role": role, "content": text, "created_at": step.get("createdAt")}
        others = len(versions_of(step.get("output"), step.get("metadata"))) - 1 if role == "assistant" else 0
        if others:  # the shown version is the content; the others are in its step's metadata (what import reads)
            message["other_versions"] = others
        branches = len(stored_branches(step.get("metadata"))) - 1 if role == "user" else 0
        if branches > 0:  # the shown branch is the chat's messages; the others are in its step's metadata too
            message["other_branches"] = branches
        documents = documents_of(step.get("metadata"))
        if role == "user" and documents:
            # Names and sizes here; each document's text is in its step's metadata (the "steps" that import reads).
            message["documents"] = [{"name": d.get("name"), "kind": d.get("kind"),
                                     "characters": len(d.get("text") or "")} for d in documents]
        found.append(message)
    return found


def to_json(thread: dict) -> str:
    return json.dumps({"format": EXPORT_FORMAT, "id": thread["id"], "name": thread.get("name"),
                       "created_at": thread.get("createdAt"), "user": thread.get("userIdentifier"),
                       "tags": thread.get("tags") or [], "metadata": thread.get("metadata") or {},
                       "messages": chat_messages(thread), "steps": thread.get("steps") or [],
                       "elements": thread.get("elements") or []}, ensure_ascii=False, indent=1, default=str)


def to_markdown(thread: dict) -> str:
    lines = [f"# {thread.get('name') or 'Chat'}", "", f"_{thread.get('createdAt', '')}_", ""]
    settings = (thread.get("metadata") or {}).get("chat_settings") or {}
    if settings.get("system_prompt"):
        lines += ["> **System prompt:** " + str(settings["system_prompt"]).replace("\n", "\n> "), ""]
    for m in chat_messages(thread):
        # Not "ERNIE": any model may have answered, and the chat does not record which.
        lines += [f"**{'You' if m['role'] == 'user' else 'Assistant'}:**", ""]
        lines += [f"- attached: {d['name']} ({d['kind']}, {d['characters']:,} characters)"
                  for d in m.get("documents", [])] + ([""] if m.get("documents") else [])
        lines += [m["content"], ""]
        if m.get("other_branches"):
            lines += [f"_({m['other_branches']} other branch(es) from this question, each with the messages "
                      "after it, are kept in the JSON export.)_", ""]
        if m.get("other_versions"):
            lines += [f"_({m['other_versions']} other version(s) of this answer are kept in the JSON export.)_", ""]
    return "\n".join(lines)


def file_name(thread: dict, fmt: str) -> str:
    title = re.sub(r"[^\w\-]+", "-", str(thread.get("name") or "chat"), flags=re.UNICODE).strip("-")[:40] or "chat"
    day = str(thread.get("createdAt") or "")[:10]
    return f"{day}-{title}-{thread['id'][:8]}.{fmt}"


async def export_all(layer: HistoryDataLayer, out: Path, fmt: str) -> list[Path]:
    async with layer.engine.connect() as conn:
        rows = (await conn.execute(select(threads.c.id, threads.c.user_identifier)
                                   .order_by(threads.c.created_at))).all()
    written = []
    for row in rows:
        thread = await thread_for_export(layer, row.id)
        if thread is None:
            continue
        path = _user_folder(out, row.user_identifier or "no-owner") / file_name(thread, fmt)
        write_private(path, to_json(thread) if fmt == "json" else to_markdown(thread))
        written.append(path)
    if fmt == "json":  # each user's presets, for import to bring back (the Markdown export is for reading)
        for user, saved in (await PresetStore(layer).by_user()).items():
            path = _user_folder(out, user) / PRESETS_FILE_NAME
            write_private(path, json.dumps({"format": PRESETS_FORMAT, "user": user, "presets": saved},
                                           ensure_ascii=False, indent=2))
            written.append(path)
    return written


def _user_folder(out: Path, user: str) -> Path:
    """The user's folder of an export (0700), named after them with only safe characters."""
    folder = out / re.sub(r"[^\w\-.@]+", "_", user)
    make_private_folder(folder)
    return folder


async def thread_for_export(layer: HistoryDataLayer, thread_id: str) -> Optional[dict]:
    """The chat with every message's stored time: a streamed answer's JSON has none (Chainlit sends it before
    it has a time), and an import would then stamp it with its own, after every question."""
    found = await layer.get_thread(thread_id)
    if found is None:
        return None
    thread: dict[str, Any] = dict(found)  # a plain dict: the export reads and writes it as one
    async with layer.engine.connect() as conn:
        stored = dict((await conn.execute(select(steps.c.id, steps.c.created_at)
                                          .where(steps.c.thread_id == thread_id))).all())
    thread["steps"] = [{**step, "createdAt": step.get("createdAt") or stored.get(step.get("id"))}
                       for step in thread.get("steps") or []]
    return thread
