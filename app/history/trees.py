"""A chat file's message tree, read into our stored-message contract (app/history/messages.py): ChatGPT's
``conversations.json`` (``mapping``: nodes with ``parent`` and ``children``, and ``current_node``) and Open WebUI's
export (``chat.history.messages``: ``parentId`` and ``childrenIds``, and ``currentId``) keep every message ever
written in a chat as a tree: a regenerated answer is a sibling of the answer it replaced, an edited question a
sibling of the question.

How the tree becomes our chat, opening on the file's current node (else its last leaf):

- the messages on the path to the current node are the chat's own rows;
- sibling answers that end the chat there (nothing was asked after them) are versions of that answer;
- sibling questions (edits) are branches of that question, each with everything that followed it; a sibling
  answer that was followed by more turns is a branch too (the same question, that answer and what followed), as
  our versions hold an answer alone; a branch shows, inside, the newest sibling at each choice;
- nodes that are not messages the chat showed (ChatGPT's root, system and tool nodes, empty ones) are passed
  through: their children count as their parent's; an answer continued in a node of its own (around a tool call)
  is one answer.

A damaged tree is refused for that chat in one line (ImportRefused): a parent that is not in the file, a loop
(a message its own ancestor), questions and answers mixed among one message's replies, more than MAX_VERSIONS
versions or MAX_BRANCHES branches at one place, branches nested deeper than MAX_BRANCH_DEPTH, or more than
``most`` nodes. Every step is linear in the number of nodes: each node is visited a bounded number of times, the
walks are loops, and recursion happens only into a hidden branch, at most MAX_BRANCH_DEPTH deep.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from app.errors import ImportRefused
from app.history.messages import (
    ASSISTANT_AUTHOR,
    ASSISTANT_MESSAGE,
    BRANCH_SHOWN,
    BRANCHES,
    KIND,
    KIND_ANSWER,
    MAX_BRANCH_DEPTH,
    MAX_BRANCHES,
    MAX_VERSIONS,
    SHOWN,
    USER_MESSAGE,
    VERSIONS,
)


@dataclass(frozen=True)
class Said:
    """One message as another app kept it: role, text and its time (any form the importers' ``_when`` reads, or
    None); from a tree, also the texts of its versions (an answer's, the shown one among them at ``shown``) or its
    branches (a question's, the shown one at ``branch``)."""

    role: str
    text: str
    at: Any = None
    versions: tuple[str, ...] = ()
    shown: int = 0
    branches: tuple[Branch, ...] = ()
    branch: int = 0


@dataclass(frozen=True)
class Branch:
    """A question as it was asked at one branch, and the messages that followed it (None: the shown branch, whose
    messages are the chat's own)."""

    text: str
    after: Optional[tuple[Said, ...]]


@dataclass(frozen=True)
class Node:
    """A node of a file's tree: its parent's id (None at a root), its children's ids in the file's order (a
    child listed that does not name this node as its parent is not counted), and what it said (None: not a
    message the chat showed)."""

    parent: Optional[str]
    children: tuple[str, ...]
    said: Optional[Said]


def tree_chat(nodes: dict[str, Node], current: Any, most: int) -> list[Said]:
    """The chat a tree holds: the path to ``current`` (else to the last leaf) as its messages, every other
    branch kept in them. Raises ImportRefused (one line) for a damaged tree."""
    if len(nodes) > most:
        raise ImportRefused(f"{len(nodes):,} messages in its tree; at most {most:,} per chat")
    tree = _Tree(nodes, current)
    return tree.line(tree.visible_children(None), 0)


def said_metadata(said: Said, owner: str) -> dict[str, Any]:
    """A message's stored metadata (app/history/messages.py): an answer's kind and versions, a question's
    branches."""
    if said.role != "user":
        metadata: dict[str, Any] = {KIND: KIND_ANSWER}
        if len(said.versions) > 1:
            metadata.update({VERSIONS: [{"text": text, "footer": ""} for text in said.versions], SHOWN: said.shown})
        return metadata
    if len(said.branches) < 2:
        return {}
    return {BRANCHES: [{"text": branch.text, "after": None if branch.after is None
                        else [_branch_message(m, owner) for m in branch.after]} for branch in said.branches],
            BRANCH_SHOWN: said.branch}


def _branch_message(said: Said, owner: str) -> dict[str, Any]:
    question = said.role == "user"
    return {"type": USER_MESSAGE if question else ASSISTANT_MESSAGE, "name": owner if question else ASSISTANT_AUTHOR,
            "output": said.text, "metadata": said_metadata(said, owner)}


def _short(node_id: str) -> str:
    return repr(node_id[:40])


class _Tree:
    """The file's nodes with the links checked and the hidden nodes passed through, read once each."""

    def __init__(self, nodes: dict[str, Node], current: Any) -> None:
        self.nodes = nodes
        children = self._children()
        self._check_reached(children)
        self.on_path = self._path(current)
        self.shown_children = self._visible(children)

    def _children(self) -> dict[Optional[str], list[str]]:
        """Each node's children by their own parent links (one parent each: a tree, or loops no root reaches), in
        the order their parent lists them, then any it does not list, in file order."""
        children: dict[Optional[str], list[str]] = {}
        for node_id, node in self.nodes.items():
            if node.parent is not None and node.parent not in self.nodes:
                raise ImportRefused(f"its message {_short(node_id)} has a parent {_short(node.parent)} that is "
                                    "not in the file")
            children.setdefault(node.parent, [])
        listed: set[str] = set()
        for node_id, node in self.nodes.items():
            for child in node.children:
                found = self.nodes.get(child) if isinstance(child, str) else None
                if found is not None and found.parent == node_id and child not in listed:
                    listed.add(child)
                    children[node_id].append(child)
        for node_id, node in self.nodes.items():
            if node_id not in listed:
                children[node.parent].append(node_id)
        return children

    def _check_reached(self, children: dict[Optional[str], list[str]]) -> None:
        """Every node hangs from a root: one that does not is on a loop of parents (or below one)."""
        reached, stack = 0, list(children.get(None, []))
        while stack:
            node_id = stack.pop()
            reached += 1
            stack.extend(children.get(node_id, []))
        if reached != len(self.nodes):
            raise ImportRefused(f"its tree loops: {len(self.nodes) - reached:,} of its messages are their own "
                                "ancestors (or below one that is)")

    def _path(self, current: Any) -> set[str]:
        """The nodes from the root to the file's current node, else to its last leaf."""
        if not isinstance(current, str) or current not in self.nodes:
            has_child = {node.parent for node in self.nodes.values()}
            current = next((node_id for node_id in reversed(self.nodes) if node_id not in has_child), None)
        path: set[str] = set()
        while current is not None:  # no loops: checked
            path.add(current)
            current = self.nodes[current].parent
        return path

    def _visible(self, children: dict[Optional[str], list[str]]) -> dict[Optional[str], list[str]]:
        """Each shown message's shown children (None: the roots), a hidden node's children counted as its
        nearest shown ancestor's; walked depth first, so that siblings keep the file's order."""
        shown: dict[Optional[str], list[str]] = {None: []}
        stack: list[tuple[str, Optional[str]]] = [(child, None) for child in reversed(children.get(None, []))]
        while stack:
            node_id, above = stack.pop()
            if self.nodes[node_id].said is not None:
                shown[above].append(node_id)
                shown[node_id] = []
                above = node_id
            stack.extend((child, above) for child in reversed(children.get(node_id, [])))
        return shown

    def visible_children(self, node_id: Optional[str]) -> list[str]:
        return self.shown_children.get(node_id, [])

    # -- reading the tree into messages ----------------------------------------------------------------------------
    def said(self, node_id: str) -> Said:
        found = self.nodes[node_id].said
        assert found is not None  # only shown nodes are walked
        return found

    def run(self, node_id: str) -> tuple[str, str]:
        """A message and its continuation in nodes of its own (one same-role child each): its whole text and the
        node the run ends at."""
        text, end = self.said(node_id).text, node_id
        while True:
            after = self.visible_children(end)
            if len(after) != 1 or self.said(after[0]).role != self.said(node_id).role:
                return text, end
            end = after[0]
            text += "\n\n" + self.said(end).text

    def pick(self, options: list[str]) -> str:
        """The sibling shown: the one on the path to the current node, else the newest."""
        return next((option for option in options if option in self.on_path), options[-1])

    def line(self, options: list[str], depth: int) -> list[Said]:
        """The messages from a choice among ``options`` (siblings) to the end, on the shown path below them;
        ``depth``: how deep in hidden branches these messages are."""
        found: list[Said] = []
        while options:
            roles = {self.said(option).role for option in options}
            if roles == {"user"}:
                options = self._question(options, depth, found)
            elif roles == {"assistant"}:
                shown = self.pick(options)
                if any(self._continues(option) for option in options if option != shown):
                    raise ImportRefused("an answer of its tree has versions with turns after them and no question "
                                        "before them")
                options = self._answer(options, shown, True, found)
            else:
                raise ImportRefused("its tree mixes questions and answers among one message's replies")
        return found

    def _question(self, options: list[str], depth: int, found: list[Said]) -> list[str]:
        """A question and its edits, each with its answers: every way the chat went on from here is a branch.
        Returns what follows the shown way's answer."""
        chosen = self.pick(options)
        ways = [(question, answer) for question in options for answer in self._ways(question)]
        if len(ways) > MAX_BRANCHES:
            raise ImportRefused(f"one of its questions has {len(ways)} branches; at most {MAX_BRANCHES} are kept")
        if len(ways) > 1 and depth > MAX_BRANCH_DEPTH:
            raise ImportRefused(f"its branches nest deeper than {MAX_BRANCH_DEPTH} levels")
        shown = ways.index(next(way for way in ways if way[0] == chosen))
        branches = tuple(Branch(self.run(question)[0],
                                None if n == shown else tuple(self._after(question, answer, depth + 1)))
                         for n, (question, answer) in enumerate(ways))
        text, end = self.run(chosen)
        found.append(Said("user", text, self.said(chosen).at, branches=branches if len(branches) > 1 else (),
                          branch=shown if len(branches) > 1 else 0))
        answer = ways[shown][1]
        return self.visible_children(end) if answer is None else self._answer(
            self.visible_children(end), answer, True, found)

    def _ways(self, question: str) -> list[Optional[str]]:
        """How the chat went on after ``question``: its shown answer (None: none, or questions follow), then each
        other answer that more turns followed (one that ended the chat is a version of the shown one)."""
        options = self.visible_children(self.run(question)[1])
        answers = [option for option in options if self.said(option).role == "assistant"]
        if not answers:
            return [None]
        if len(answers) != len(options):
            raise ImportRefused("its tree mixes questions and answers among one message's replies")
        shown = self.pick(answers)
        return [shown, *(answer for answer in answers if answer != shown and self._continues(answer))]

    def _continues(self, answer: str) -> bool:
        return bool(self.visible_children(self.run(answer)[1]))

    def _after(self, question: str, answer: Optional[str], depth: int) -> list[Said]:
        """A hidden branch's messages after its question: that answer (the question's shown one with its ended
        siblings as versions; another alone) and what followed it."""
        options = self.visible_children(self.run(question)[1])
        if answer is None:
            return self.line(options, depth)
        found: list[Said] = []
        rest = self._answer(options, answer, answer == self.pick(options), found)
        return found + self.line(rest, depth)

    def _answer(self, options: list[str], shown: str, with_ended: bool, found: list[Said]) -> list[str]:
        """The answer ``shown``, with its siblings that ended the chat as its versions when ``with_ended`` (those
        that more turns followed are branches of the question, ``_ways``). Returns what follows it."""
        kept = [option for option in options if option == shown or (with_ended and not self._continues(option))]
        if len(kept) > MAX_VERSIONS:
            raise ImportRefused(f"one of its answers has {len(kept)} versions; at most {MAX_VERSIONS} are kept")
        texts = tuple(self.run(option)[0] for option in kept)
        place = kept.index(shown)
        found.append(Said("assistant", texts[place], self.said(shown).at, versions=texts if len(texts) > 1 else (),
                          shown=place if len(texts) > 1 else 0))
        return self.visible_children(self.run(shown)[1])
