"""Chat files that ``python launch.py import`` reads: ours and other apps', each into one shape, our own export's
(app/history/export.py ``to_json``, ``steps`` included), which ``restore.import_chat`` stores.

``read_chat_file`` checks a file's size (from stat) and its nesting (a streaming scan) before parsing it, finds
its format, and reads each chat in it on its own, so that one bad chat is refused and the others still go in.
The formats, as their own apps publish them (tests/unit/history/test_importers.py cites the sources):

- ChatGPT's ``conversations.json``: a list of conversations, each a ``mapping`` tree of nodes {id, message,
  parent, children} and the ``current_node`` the chat shows.
- Open WebUI's chat export: a list of {id, title, chat: {history: {messages: {id: {parentId, childrenIds, role,
  content, timestamp}}, currentId}}, created_at}.
  Both trees are read whole (app/history/trees.py): every version and branch kept, the chat opened on the file's
  current node, a damaged tree refused for that chat.
- ``{"messages": [...]}`` in OpenAI's chat format: role and content (a string, or a list of parts).
- ernie-chat's own export, with ``steps`` (kept whole) or only ``messages``.

Every chat keeps the order of its file: times that are missing, equal or going back are replaced by ones that
rise in file order (the database sorts a chat's messages by time).
"""
from __future__ import annotations

import hashlib
import io
import json
import stat
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Optional

import ijson

from app.control_characters import CONTROLS
from app.errors import ImportRefused
from app.history.chat_metadata import CHAT_SETTINGS, imported_metadata
from app.history.messages import ASSISTANT_AUTHOR, ASSISTANT_MESSAGE, CHAT_NAME_CHARS, USER_MESSAGE, tree_damage
from app.history.trees import Node, Said, said_metadata, tree_chat

EXPORT_FORMAT = "ernie-chat/chat-v1"
PRESETS_FORMAT = "ernie-chat/presets-v1"  # one user's presets: {"format", "user", "presets": {name: settings}}
# Ids of chats and messages from other apps: derived from their own ids (or content), so a second import of the
# same file finds them already there.
IMPORT_NAMESPACE = uuid.UUID("f76f7701-25a2-4043-9e2d-538c398e1d15")
ID_CHARS, OWNER_CHARS = 64, 255  # the schema's column widths (PostgreSQL refuses longer)


@dataclass(frozen=True)
class Limits:
    """What one import file may hold. Python's json parser recurses per level and fails near 1,000; real
    exports nest about 15 deep (Open WebUI's files within messages), so 100 leaves room and refuses bombs."""

    max_bytes: int = 256 * 1024 * 1024  # a large ChatGPT history is tens of MB; parsing takes ~6x in memory
    max_depth: int = 100
    max_chats: int = 50_000
    max_messages: int = 100_000  # per chat


LIMITS = Limits()


@dataclass(frozen=True)
class ChatReading:
    """One chat of a file: ``data`` in our export's shape, or ``refused`` with the reason."""

    label: str
    data: Optional[dict[str, Any]] = None
    refused: str = ""


@dataclass(frozen=True)
class FileReading:
    kind: str  # the format, as the report names it
    chats: list[ChatReading] = field(default_factory=list)
    presets: Optional[tuple[str, dict[str, dict[str, Any]]]] = None  # a presets file: (user, name -> settings)


# ----- the file: limits, parsing, format ---------------------------------------------------------------
def read_chat_file(path: Path, owner: str, limits: Limits = LIMITS) -> FileReading:
    """The chats of one file. Raises ImportRefused (one line) for a file that is not read at all."""
    data = parse_limited(_read_limited(path, limits), limits)
    if isinstance(data, dict) and data.get("format") == PRESETS_FORMAT:
        return FileReading("ernie-chat presets", presets=read_presets(data))
    kind, items, reader = detect(data)
    if not items:
        raise ImportRefused(f"a {kind} with no chats in it")
    if len(items) > limits.max_chats:
        raise ImportRefused(f"{len(items):,} chats; at most {limits.max_chats:,} are read from one file")
    return FileReading(kind, [read_one(reader, item, n, owner, limits) for n, item in enumerate(items, 1)])


def read_presets(data: dict[str, Any]) -> tuple[str, dict[str, dict[str, Any]]]:
    user, presets = data.get("user"), data.get("presets")
    if not isinstance(user, str) or not user or len(user) > OWNER_CHARS or not isinstance(presets, dict):
        raise ImportRefused("a presets file needs a user and a presets object")
    if not all(isinstance(name, str) and isinstance(settings, dict) for name, settings in presets.items()):
        raise ImportRefused("each preset is a name and an object of settings")
    return user, presets


def _read_limited(path: Path, limits: Limits) -> bytes:
    try:
        info = path.stat()
        if not stat.S_ISREG(info.st_mode):
            raise ImportRefused("not a regular file")
        if info.st_size > limits.max_bytes:
            raise ImportRefused(f"{info.st_size:,} bytes; at most {_mib(limits)} are read from one file")
        with path.open("rb") as f:
            raw = f.read(limits.max_bytes + 1)  # a file that grew since stat is still bounded
    except OSError as err:
        raise ImportRefused(f"cannot read it: {err.strerror or err}") from None
    if len(raw) > limits.max_bytes:
        raise ImportRefused(f"larger than the {_mib(limits)} read from one file")
    return raw.removeprefix(b"\xef\xbb\xbf")  # a UTF-8 byte-order mark, as Windows editors write


def _mib(limits: Limits) -> str:
    return f"{limits.max_bytes:,} bytes ({limits.max_bytes / 2**20:,.0f} MiB)"


def parse_limited(raw: bytes, limits: Limits = LIMITS) -> Any:
    """JSON parsed once its nesting is known to be within the limit. The scan is ijson's C parser (yajl),
    event by event: constant memory, stops at the first level too deep, and refuses broken JSON itself."""
    depth = 0
    try:
        for event, _ in ijson.basic_parse(io.BytesIO(raw)):
            if event in ("start_map", "start_array"):
                depth += 1
                if depth > limits.max_depth:
                    raise ImportRefused(f"nested deeper than {limits.max_depth} levels")
            elif event in ("end_map", "end_array"):
                depth -= 1
    except (ijson.JSONError, ValueError) as err:
        raise ImportRefused(f"not valid JSON ({_first_line(err)})") from None
    try:
        return json.loads(raw)
    except (ValueError, RecursionError) as err:
        raise ImportRefused(f"not valid JSON ({_first_line(err)})") from None


Reader = Callable[[Any, str], dict]


def detect(data: Any) -> tuple[str, list, Reader]:
    """(format name, its chats, the reader of one chat); ImportRefused when no reader fits."""
    if isinstance(data, dict):
        if str(data.get("format") or "").startswith("ernie-chat/"):
            return "ernie-chat export", [data], from_ernie_chat
        if "mapping" in data:
            return "ChatGPT export", [data], from_chatgpt
        if isinstance(data.get("chat"), dict) or isinstance(data.get("history"), dict):
            return "Open WebUI export", [data], from_open_webui
        if isinstance(data.get("messages"), list):
            return "OpenAI messages file", [data], from_openai_messages
    if isinstance(data, list):
        first = next((item for item in data if isinstance(item, dict)), None)
        if first is None and not data:
            raise ImportRefused("an empty list: no chats in it")
        if first is not None and "mapping" in first:
            return "ChatGPT export", data, from_chatgpt
        if first is not None and (isinstance(first.get("chat"), dict) or isinstance(first.get("history"), dict)):
            return "Open WebUI export", data, from_open_webui
    raise ImportRefused("not a chat file this import reads (ernie-chat JSON export, ChatGPT conversations.json, "
                        "Open WebUI export, or {\"messages\": [...]})")


def read_one(reader: Reader, item: Any, n: int, owner: str, limits: Limits = LIMITS) -> ChatReading:
    label = _label(item, n)
    try:
        data = reader(item, owner)
        if len(data["steps"]) > limits.max_messages:
            raise ImportRefused(f"{len(data['steps']):,} messages; at most {limits.max_messages:,} per chat")
        return ChatReading(label, data)
    except ImportRefused as err:
        return ChatReading(label, refused=str(err))
    except (TypeError, ValueError, KeyError, AttributeError, RecursionError) as err:
        # A shape no reader foresaw: that chat is refused, in one line; the file's other chats still go in.
        return ChatReading(label, refused=f"cannot be read ({_first_line(err)})")


def _label(item: Any, n: int) -> str:
    title = ""
    if isinstance(item, dict):
        found = item.get("chat")
        chat = found if isinstance(found, dict) else {}
        title = item.get("title") or item.get("name") or chat.get("title") or ""
    shown = CONTROLS.sub("", str(title))[:60] if isinstance(title, str) else ""
    return f"chat {n} \"{shown}\"" if shown else f"chat {n}"


# ----- the readers, one per format -------------------------------------------------------------------
def from_chatgpt(conversation: Any, owner: str) -> dict:
    """ChatGPT: the tree of ``mapping`` (app/history/trees.py), opened at ``current_node``; only what the chat
    showed: user and assistant text (system and tool nodes, calls to tools, hidden and empty ones passed through)."""
    _require(isinstance(conversation, dict), "not a conversation object")
    mapping = conversation.get("mapping")
    _require(isinstance(mapping, dict) and bool(mapping), "its mapping holds no messages")
    nodes = {key: _tree_node(key, node, "parent", "children", _chatgpt_said(node.get("message")))
             for key, node in mapping.items()}
    said = tree_chat(nodes, conversation.get("current_node"), LIMITS.max_messages)
    source_id = conversation.get("conversation_id") or conversation.get("id")
    return _chat(_foreign_id("chatgpt", source_id, conversation), conversation.get("title"),
                 conversation.get("create_time"), said, owner)


_CHATGPT_TEXT_TYPES = {"text", "multimodal_text"}


def _chatgpt_said(message: Any) -> Optional[Said]:
    if not isinstance(message, dict):
        return None
    role = (message.get("author") or {}).get("role")
    content = message.get("content") or {}
    if role not in ("user", "assistant") or not isinstance(content, dict):
        return None  # system and tool nodes: not what the chat showed
    if message.get("recipient", "all") != "all" or content.get("content_type", "text") not in _CHATGPT_TEXT_TYPES:
        return None  # a call to a tool (code, browsing), reasoning, custom instructions
    if (message.get("metadata") or {}).get("is_visually_hidden_from_conversation"):
        return None
    text = _parts_text(content.get("parts")) if content.get("parts") is not None else content.get("text")
    return Said(role, text, message.get("create_time")) if isinstance(text, str) and text.strip() else None


def from_open_webui(item: Any, owner: str) -> dict:
    """Open WebUI: the tree of ``chat.history.messages`` (app/history/trees.py), opened at ``currentId``; a chat
    without a history (older versions) by its ``chat.messages`` list. The chat's own system prompt
    (``chat.params.system``) stays its system prompt."""
    _require(isinstance(item, dict), "not a chat object")
    chat = item["chat"] if isinstance(item.get("chat"), dict) else item  # older exports: the chat itself
    history = chat.get("history") if isinstance(chat.get("history"), dict) else {}
    messages = history.get("messages")
    if isinstance(messages, dict) and messages:
        nodes = {key: _tree_node(key, message, "parentId", "childrenIds", _open_webui_said(message))
                 for key, message in messages.items()}
        said = tree_chat(nodes, history.get("currentId"), LIMITS.max_messages)
    else:
        found = chat.get("messages")
        _require(isinstance(found, list), "its chat holds no history.messages")
        said = [m for m in map(_open_webui_said, found) if m is not None]
    system = (chat.get("params") or {}).get("system") if isinstance(chat.get("params"), dict) else None
    return _chat(_foreign_id("open-webui", item.get("id") or chat.get("id"), item),
                 item.get("title") or chat.get("title"), item.get("created_at") or chat.get("timestamp"),
                 said, owner, system if isinstance(system, str) else "")


def _open_webui_said(message: Any) -> Optional[Said]:
    if not isinstance(message, dict) or message.get("role") not in ("user", "assistant"):
        return None
    text = _content_text(message.get("content"))
    return Said(message["role"], text, message.get("timestamp")) if text.strip() else None


def _tree_node(key: Any, node: Any, parent_key: str, children_key: str, said: Optional[Said]) -> Node:
    """A node of a file's tree, its links checked for shape."""
    _require(isinstance(key, str) and isinstance(node, dict), f"its node {str(key)[:40]!r} is not an object")
    parent, children = node.get(parent_key), node.get(children_key) or []
    _require(parent is None or isinstance(parent, str), f"its node {key[:40]!r} has a parent that is not an id")
    _require(isinstance(children, list), f"its node {key[:40]!r} has children that are not a list")
    return Node(parent, tuple(child for child in children if isinstance(child, str)), said)


def from_openai_messages(data: Any, owner: str) -> dict:
    """``{"messages": [...]}`` as sent to OpenAI's chat completions: user and assistant turns in order;
    system (or developer) messages become the chat's system prompt; tool messages and calls are left out."""
    messages = data.get("messages")
    _require(isinstance(messages, list), "its messages is not a list")
    said, system = [], []
    for m in messages:
        _require(isinstance(m, dict), "a message is not an object")
        text = _content_text(m.get("content"))
        if m.get("role") in ("system", "developer"):
            system.append(text)
        elif m.get("role") in ("user", "assistant") and text.strip():
            said.append(Said(m["role"], text, m.get("created_at") or m.get("timestamp")))
    return _chat(_foreign_id("openai", data.get("id"), data), data.get("title") or data.get("name"),
                 data.get("created_at"), said, owner, "\n\n".join(s for s in system if s.strip()))


def from_ernie_chat(data: Any, owner: str) -> dict:
    """Our own export: kept whole (its id, owner, settings, steps and elements); a file with ``messages``
    and no ``steps`` gets its steps made from them."""
    if data.get("format") != EXPORT_FORMAT:
        raise ImportRefused(f"format {data.get('format')!r} is not {EXPORT_FORMAT} (written by a newer ernie-chat?)")
    chat_id = _short_text(data.get("id"), "id", ID_CHARS)
    user = data.get("user") or owner
    _short_text(user, "user", OWNER_CHARS)
    steps = data.get("steps")
    if steps is None:
        messages = data.get("messages")
        _require(isinstance(messages, list), "it has neither steps nor a messages list")
        said = [Said(m["role"], _content_text(m.get("content")), m.get("created_at")) for m in messages
                if isinstance(m, dict) and m.get("role") in ("user", "assistant")]
        made = _chat(chat_id, data.get("name"), data.get("created_at"), said, user)
        return {**made, "tags": _list(data, "tags"), "metadata": imported_metadata(_dict(data, "metadata"))}
    _require(isinstance(steps, list), "its steps is not a list")
    for n, step in enumerate(steps, 1):
        _require(isinstance(step, dict) and isinstance(step.get("type"), str), "a step is not a message object")
        _short_text(step.get("id"), "step id", ID_CHARS)
        damage = tree_damage(step.get("metadata"))
        _require(damage is None, f"its message {n}: {damage}")
    elements = _list(data, "elements")
    for element in elements:
        _require(isinstance(element, dict), "an element is not an object")
        _short_text(element.get("id"), "element id", ID_CHARS)
    stamps = in_file_order([step.get("createdAt") for step in steps], data.get("created_at"))
    steps = [{**step, "createdAt": at} for step, at in zip(steps, stamps, strict=True)]
    created = _stamp_or(data.get("created_at"), stamps)
    name = data.get("name")
    _require(name is None or isinstance(name, str), "its name is not a text")
    return {"format": EXPORT_FORMAT, "id": chat_id, "name": name, "created_at": created,
            "updated_at": max([created, *stamps]), "user": user, "tags": _list(data, "tags"),
            "metadata": imported_metadata(_dict(data, "metadata")), "steps": steps, "elements": elements}


# ----- shared pieces ------------------------------------------------------------------------------------
def _chat(chat_id: str, name: Any, created: Any, said: list[Said], owner: str, system_prompt: str = "") -> dict:
    """A chat in our export's shape, its steps made as the app stores a question and its answer."""
    if not said:
        raise ImportRefused("no user or assistant messages with text in it")
    stamps = in_file_order([m.at for m in said], created)
    steps = [_step(chat_id, n, m, at, owner) for n, (m, at) in enumerate(zip(said, stamps, strict=True))]
    metadata = {CHAT_SETTINGS: {"system_prompt": system_prompt}} if system_prompt.strip() else {}
    created_at = _stamp_or(created, stamps)
    return {"format": EXPORT_FORMAT, "id": chat_id, "name": _name(name, said), "created_at": created_at,
            "updated_at": max([created_at, *stamps]), "user": owner, "tags": [], "metadata": metadata,
            "steps": steps, "elements": []}


def _step(chat_id: str, n: int, said: Said, at: str, owner: str) -> dict:
    # app/ui/chat_messages.py shown_turns builds the prompt from user messages and answers marked kind "answer"
    # (app/history/messages.py)
    question = said.role == "user"
    return {"id": str(uuid.uuid5(IMPORT_NAMESPACE, f"{chat_id}/{n}")), "threadId": chat_id, "parentId": None,
            "type": USER_MESSAGE if question else ASSISTANT_MESSAGE, "name": owner if question else ASSISTANT_AUTHOR,
            "output": said.text, "createdAt": at, "start": at, "end": at, "streaming": False, "isError": False,
            "metadata": said_metadata(said, owner)}


def in_file_order(times: list[Any], created: Any = None) -> list[str]:
    """Each message's time as stored, rising strictly in file order. Times given as our own strings that
    already rise are kept as written (an export reads back unchanged); otherwise every one is written in one
    fixed-width form (the database sorts them as text), a missing, equal or earlier one just after the one
    before it, the first missing one at the chat's start (or its earliest known time)."""
    parsed = [_when(t) for t in times]
    ours = [when for t, when in zip(times, parsed, strict=True) if isinstance(t, str) and when is not None]
    if len(ours) == len(times) and all(a < b and when_a < when_b for a, b, when_a, when_b
                                       in zip(times, times[1:], ours, ours[1:], strict=False)):
        return list(times)
    known = [p for p in parsed if p is not None]
    start = _when(created) or (min(known) if known else datetime.now(timezone.utc))
    rising: list[datetime] = []
    for when in parsed:
        last = rising[-1] if rising else None
        if last is not None and (when is None or when <= last):
            when = last + timedelta(microseconds=1)
        rising.append(when or start)
    return [_stamp(when) for when in rising]


def _when(value: Any) -> Optional[datetime]:
    """A time from an epoch number (seconds, or milliseconds past 1e11) or an ISO string, in UTC."""
    if isinstance(value, bool):
        return None
    try:
        if isinstance(value, (int, float)):
            return datetime.fromtimestamp(value / 1000 if abs(value) > 1e11 else value, timezone.utc)
        if isinstance(value, str) and value:
            parsed = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
            return parsed.replace(tzinfo=timezone.utc) if parsed.tzinfo is None else parsed.astimezone(timezone.utc)
    except (ValueError, OverflowError, OSError):
        return None
    return None


def _stamp(when: datetime) -> str:
    return when.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _stamp_or(created: Any, stamps: list[str]) -> str:
    if isinstance(created, str) and _when(created):
        return created
    when = _when(created)
    return _stamp(when) if when else (stamps[0] if stamps else _stamp(datetime.now(timezone.utc)))


def _content_text(content: Any) -> str:
    """OpenAI's content: a string, or a list of parts of which the text ones are kept."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(p["text"] for p in content
                         if isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str))
    return ""


def _parts_text(parts: Any) -> str:
    """ChatGPT's parts: strings, and objects (images, files) that carry no text."""
    return "\n".join(p for p in parts if isinstance(p, str)) if isinstance(parts, list) else ""


def _foreign_id(app: str, source_id: Any, whole: Any) -> str:
    if isinstance(source_id, str) and source_id:
        return str(uuid.uuid5(IMPORT_NAMESPACE, f"{app}:{source_id}"))
    digest = hashlib.sha256(json.dumps(whole, sort_keys=True, default=str).encode()).hexdigest()
    return str(uuid.uuid5(IMPORT_NAMESPACE, f"{app}:sha256:{digest}"))


def _name(name: Any, said: list[Said]) -> str:
    """The chat's title, else its first question, as Chainlit names a chat: one line, at most CHAT_NAME_CHARS."""
    text = name if isinstance(name, str) and name.strip() else next((m.text for m in said if m.role == "user"), "")
    return " ".join(CONTROLS.sub(" ", text).split())[:CHAT_NAME_CHARS] or "Imported chat"


def _short_text(value: Any, what: str, most: int) -> str:
    _require(isinstance(value, str) and 0 < len(value) <= most, f"its {what} is not a text of 1 to {most} characters")
    return value


def _list(data: dict, key: str) -> list:
    value = data.get(key)
    _require(value is None or isinstance(value, list), f"its {key} is not a list")
    return value or []


def _dict(data: dict, key: str) -> dict:
    value = data.get(key)
    _require(value is None or isinstance(value, dict), f"its {key} is not an object")
    return value or {}


def _require(condition: bool, reason: str) -> None:
    if not condition:
        raise ImportRefused(reason)


def _first_line(err: BaseException) -> str:
    lines = str(err).strip().splitlines()
    return (lines[0] if lines else type(err).__name__)[:200]

