"""What is stored for a chat message: the one contract that the chat writes (app/ui/streamed_answer.py and
app/ui/chat_messages.py), the importers make (app/history/importers.py), the export reads (app/history/export.py),
the data layer serves back (data_layer.py) and the page's own messages are held to (app/guards/page_input.py).

A message is a Chainlit step. Its ``type`` says whose it is (the page sends every message as the user's); its
``metadata`` what it is to the app, set by the server only: ``kind`` (an answer, which goes back into prompts, or
a notice, which never does), ``footer`` (the lines the app put under an answer: the stats, "stopped", the length
limit; part of the page, never of a prompt or an export), ``partial`` (saved while it was being written: a resumed
chat says "interrupted" under it) and ``finish`` (``length``: it stopped at its length limit, Continue writes on).

An answer regenerated keeps its earlier texts in its own message: ``versions`` lists every version, the shown one
included, each ``{"text", "footer", "finish"?}`` (the text as shown without its footer; the shown one's text and
footer are the message's output), and ``shown`` is the index of the one shown. An answer never regenerated has
neither key (it is its one version). While a version is being written, ``shown`` is the place it will take
(``len(versions)`` for a new one) and the message is ``partial``; ``with_version`` puts it in its place when it
ends. A message's versions go wherever the message goes: the chat's prompt (the shown one only), search (every
one), export and import, and deletion with the chat.

A question edited keeps what it replaced as a branch, in the question's own message: ``branches`` lists every
branch of the chat from that question on, the shown one included, each ``{"text", "after"}``: the question as it
was asked there, and the messages that followed it (``after``, a list of ``{"type", "name", "output",
"metadata"}``, the same contract as a stored message, so a message in a branch may hold versions and branches of
its own). The shown branch's ``after`` is ``None``: its messages are the chat's own rows after the question, and
its text is the message's output. ``branch`` is the index of the one shown. A question never edited has neither
key. Like versions, branches go wherever the message goes: search (every branch's words), export and import, and
deletion with the chat; the prompt follows the shown branch only, as it is the chat the page shows.
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

VERSIONS, SHOWN = "versions", "shown"  # an answer's versions (Regenerate keeps the earlier ones) and the one shown
# Versions one answer keeps: each is a whole answer stored in the message's row, searched and sent with the chat;
# ten is more than anyone compares, and keeps a message (and the page's copy of it) within ten answers' size.
MAX_VERSIONS = 10

BRANCHES, BRANCH_SHOWN = "branches", "branch"  # a question's branches (an edit keeps the replaced one) and the shown
# Branches one question keeps, and how deep branches may nest inside branches: the same reasoning as MAX_VERSIONS
# (a branch is kept whole in the question's row); the depth bounds the work of reading a tree a file brought.
MAX_BRANCHES = 10
MAX_BRANCH_DEPTH = 16
# The keys of a message kept inside a branch.
BRANCH_MESSAGE_KEYS = ("type", "name", "output", "metadata")

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


def version_of(shown: Optional[str], metadata: Optional[dict[str, Any]]) -> dict[str, Any]:
    """The answer a message shows as one version: its text without the footer, the footer, why it ended."""
    meta = metadata if isinstance(metadata, dict) else {}
    footer = meta.get(FOOTER)
    version: dict[str, Any] = {"text": answer_text(shown, meta), "footer": footer if isinstance(footer, str) else ""}
    if meta.get(FINISH) == LENGTH:
        version[FINISH] = LENGTH
    return version


def _is_version(item: Any) -> bool:
    return isinstance(item, dict) and isinstance(item.get("text"), str) and isinstance(item.get("footer"), str)


def stored_versions(metadata: Optional[dict[str, Any]]) -> list[dict[str, Any]]:
    """The versions kept in ``metadata``, as stored ([] when none); an imported file's may be anything: a list
    with anything but versions in it, or longer than MAX_VERSIONS, counts as none."""
    versions = metadata.get(VERSIONS) if isinstance(metadata, dict) else None
    if not isinstance(versions, list) or len(versions) > MAX_VERSIONS or not all(map(_is_version, versions)):
        return []
    return versions


def shown_index(metadata: Optional[dict[str, Any]]) -> int:
    """The place of the version shown (or being written) among the stored ones: ``len(versions)`` when there are
    none, or when ``shown`` is not a whole number from 0 to ``len(versions)``."""
    versions = stored_versions(metadata)
    shown = metadata.get(SHOWN) if isinstance(metadata, dict) else None
    if isinstance(shown, int) and not isinstance(shown, bool) and 0 <= shown <= len(versions):
        return shown
    return len(versions)


def versions_of(shown: Optional[str], metadata: Optional[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every version of a finished answer, the shown one included: stored ones with a valid ``shown`` among them,
    else the answer shown as its one version."""
    versions = stored_versions(metadata)
    return versions if shown_index(metadata) < len(versions) else [version_of(shown, metadata)]


def with_version(metadata: dict[str, Any], shown: str, versions: list[dict[str, Any]], place: int) -> dict[str, Any]:
    """An answer's ``metadata`` with the answer it shows put at ``place`` among ``versions`` (past the end: added
    as the newest), and shown; one version alone needs no keys."""
    kept = [*versions[:place], version_of(shown, metadata), *versions[place + 1:]]
    plain = {key: value for key, value in metadata.items() if key not in (VERSIONS, SHOWN)}
    return plain if len(kept) < 2 else {**plain, VERSIONS: kept, SHOWN: min(place, len(kept) - 1)}


def showing(metadata: dict[str, Any], versions: list[dict[str, Any]], index: int) -> tuple[str, dict[str, Any]]:
    """The output and metadata of an answer whose version ``index`` (in range) is shown."""
    version = versions[index]
    meta = {key: value for key, value in metadata.items() if key not in (FOOTER, FINISH, PARTIAL)}
    meta.update({FOOTER: version["footer"], VERSIONS: versions, SHOWN: index})
    if version.get(FINISH) == LENGTH:
        meta[FINISH] = LENGTH
    return version["text"] + version["footer"], meta


def versions_search_text(metadata: Optional[dict[str, Any]]) -> str:
    """The words of an answer's versions (the shown one is the output already)."""
    return "\n".join(version["text"] for version in stored_versions(metadata))


def _is_branch_message(item: Any, depth: int) -> bool:
    return (isinstance(item, dict) and isinstance(item.get("type"), str) and isinstance(item.get("name"), str)
            and isinstance(item.get("output"), str) and isinstance(item.get("metadata"), dict)
            and (not item["metadata"].get(BRANCHES) or bool(stored_branches(item["metadata"], depth + 1))))


def _is_branch(item: Any, depth: int) -> bool:
    if not isinstance(item, dict) or not isinstance(item.get("text"), str):
        return False
    after = item.get("after")
    return after is None or (isinstance(after, list) and all(_is_branch_message(m, depth) for m in after))


def stored_branches(metadata: Optional[dict[str, Any]], depth: int = 0) -> list[dict[str, Any]]:
    """The branches kept in a question's ``metadata``, as stored ([] when none); an imported file's may be
    anything: a list with anything but branches in it (nested ones included), longer than MAX_BRANCHES, nested
    deeper than MAX_BRANCH_DEPTH, or without exactly one shown branch (``after`` None), counts as none."""
    branches = metadata.get(BRANCHES) if isinstance(metadata, dict) else None
    if (depth > MAX_BRANCH_DEPTH or not isinstance(branches, list) or not 2 <= len(branches) <= MAX_BRANCHES
            or not all(_is_branch(branch, depth) for branch in branches)
            or sum(branch["after"] is None for branch in branches) != 1):
        return []
    return branches


def shown_branch(metadata: Optional[dict[str, Any]]) -> Optional[int]:
    """The index of the branch shown, when the question has branches and ``branch`` names the one whose
    messages are the chat's own (``after`` None)."""
    branches = stored_branches(metadata)
    shown = metadata.get(BRANCH_SHOWN) if isinstance(metadata, dict) else None
    if (isinstance(shown, int) and not isinstance(shown, bool) and 0 <= shown < len(branches)
            and branches[shown]["after"] is None):
        return shown
    return None


def branches_search_text(metadata: Optional[dict[str, Any]]) -> str:
    """The words of a question's hidden branches, nested ones and their answers' versions included (the shown
    branch is the chat's own rows)."""
    texts: list[str] = []
    for branch in stored_branches(metadata):
        if branch["after"] is None:
            continue
        texts.append(branch["text"])
        for message in branch["after"]:
            texts += [message["output"], versions_search_text(message["metadata"]),
                      branches_search_text(message["metadata"])]
    return "\n".join(text for text in texts if text)


def search_text(step: dict[str, Any]) -> str:
    """A stored message's words for search (the ``search_text`` column), every version of an answer's and every
    branch of a question's among them, lower-cased here (Python folds every script; SQLite's lower() only ASCII),
    so that the search is a plain substring test."""
    if "message" not in str(step.get("type", "")):
        return ""
    metadata = step.get("metadata")
    texts = [str(step.get(key) or "") for key in ("output", "input")]
    texts += [versions_search_text(metadata), branches_search_text(metadata)]
    return "\n".join(texts).strip().lower()


def tree_damage(metadata: Optional[dict[str, Any]]) -> Optional[str]:
    """What is wrong with the versions or branches a message's ``metadata`` holds, in a few words; None when
    they are sound or absent. An imported file's are checked with this before they are stored."""
    if not isinstance(metadata, dict):
        return None
    if metadata.get(VERSIONS) not in (None, []) and not stored_versions(metadata):
        return f"its versions are not a list of at most {MAX_VERSIONS} versions, each a text and a footer"
    if metadata.get(BRANCHES) not in (None, []):
        if not stored_branches(metadata):
            return (f"its branches are not 2 to {MAX_BRANCHES} branches (nested at most {MAX_BRANCH_DEPTH} deep), "
                    "each a question and the messages after it, exactly one shown")
        if shown_branch(metadata) is None:
            return "its branch shown is not the one whose messages are the chat's"
    return None
