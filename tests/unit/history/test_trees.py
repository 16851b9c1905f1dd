"""A file's message tree read into our stored-message contract (app/history/trees.py): every branch kept, opened on
the file's current node, a damaged tree refused in one line, the cost linear in the nodes. The trees are written as
ChatGPT's ``mapping`` and Open WebUI's ``history.messages`` hold them (tests/unit/history/test_importers.py cites
their sources): a regenerated answer is a sibling of the answer under the same question (Open WebUI's
regenerateResponse, ChatGPT's "children"), an edited question a sibling of the question under the same parent
(Open WebUI's Messages.svelte confirmEditMessage: the new message takes the edited one's parentId and is appended
to that parent's childrenIds)."""
from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from app.errors import ImportRefused
from app.history.importers import read_chat_file
from app.history.messages import (
    MAX_BRANCH_DEPTH,
    MAX_BRANCHES,
    MAX_VERSIONS,
    branches_search_text,
    shown_branch,
    stored_branches,
    stored_versions,
    tree_damage,
)
from app.history.trees import Node, Said, said_metadata, tree_chat

MOST = 100_000


def tree(*rows, current=None):
    """Nodes from rows (id, parent, role or None, text): children listed as their parents' in row order."""
    children: dict = {}
    for node_id, parent, *_ in rows:
        children.setdefault(parent, []).append(node_id)
    nodes = {node_id: Node(parent, tuple(children.get(node_id, [])), None if role is None else Said(role, text))
             for node_id, parent, role, text in rows}
    return tree_chat(nodes, current, MOST)


def shape(said: list[Said]) -> list:
    """(role, text) per message, with its versions or branches (each branch's messages as shape too)."""
    found = []
    for m in said:
        item: list = [m.role, m.text]
        if m.versions:
            item.append(("versions", list(m.versions), m.shown))
        if m.branches:
            item.append(("branches", [(b.text, None if b.after is None else shape(list(b.after)))
                                      for b in m.branches], m.branch))
        found.append(tuple(item))
    return found


def test_a_line_is_the_chat_and_hidden_nodes_pass_their_children_on():
    said = tree(("root", None, None, ""), ("q", "root", "user", "Q"), ("tool", "q", None, ""),
                ("a", "tool", "assistant", "A"), ("a+", "a", "assistant", "more"))
    assert shape(said) == [("user", "Q"), ("assistant", "A\n\nmore")]  # one answer around a tool call


def test_regenerated_answers_that_ended_the_chat_are_versions_opened_on_the_current_one():
    rows = [("q", None, "user", "Q"), ("a1", "q", "assistant", "one"), ("a2", "q", "assistant", "two"),
            ("a3", "q", "assistant", "three")]
    assert shape(tree(*rows, current="a2")) == [("user", "Q"), ("assistant", "two", ("versions", ["one", "two",
                                                                                                   "three"], 1))]
    # No current node: the last leaf, as before.
    assert shape(tree(*rows)) == [("user", "Q"), ("assistant", "three", ("versions", ["one", "two", "three"], 2))]


def test_edited_questions_are_branches_each_with_its_continuation():
    rows = [("q1", None, "user", "Q1"), ("a1", "q1", "assistant", "A1"),
            ("q2-old", "a1", "user", "old Q2"), ("a2-old", "q2-old", "assistant", "old A2"),
            ("q3-old", "a2-old", "user", "old Q3"),
            ("q2", "a1", "user", "new Q2"), ("a2", "q2", "assistant", "new A2")]
    said = tree(*rows, current="a2")
    assert shape(said) == [
        ("user", "Q1"), ("assistant", "A1"),
        ("user", "new Q2", ("branches", [("old Q2", [("assistant", "old A2"), ("user", "old Q3")]),
                                         ("new Q2", None)], 1)),
        ("assistant", "new A2")]
    # Opened on the old branch: the chat is that branch, the new one hidden.
    assert shape(tree(*rows, current="q3-old"))[2] == (
        "user", "old Q2", ("branches", [("old Q2", None), ("new Q2", [("assistant", "new A2")])], 0))


def test_an_answer_followed_by_more_turns_is_a_branch_of_its_question_and_nested_choices_keep_theirs():
    rows = [("q", None, "user", "Q"),
            ("a-old", "q", "assistant", "old A"), ("f", "a-old", "user", "follow-up"),
            ("fa1", "f", "assistant", "fa one"), ("fa2", "f", "assistant", "fa two"),
            ("a-new", "q", "assistant", "new A"), ("a-alt", "q", "assistant", "ended A")]
    said = tree(*rows, current="a-new")
    assert shape(said) == [
        ("user", "Q", ("branches", [("Q", None), ("Q", [("assistant", "old A"), ("user", "follow-up"),
                                                        ("assistant", "fa two", ("versions", ["fa one", "fa two"],
                                                                                 1))])], 0)),
        ("assistant", "new A", ("versions", ["new A", "ended A"], 0))]


def test_what_it_makes_is_what_the_stored_contract_accepts(tmp_path):
    """Through a whole ChatGPT file: every message's tree passes messages.tree_damage, and search reads every
    branch's words."""
    mapping = {}
    for node_id, parent, role, text in [("root", None, None, ""), ("q", "root", "user", "Q"),
                                        ("a1", "q", "assistant", "first"), ("a2", "q", "assistant", "second"),
                                        ("e", "root", "user", "an edit"), ("ea", "e", "assistant", "lighthouse")]:
        message = None if role is None else {"id": node_id, "author": {"role": role}, "content": {
            "content_type": "text", "parts": [text]}, "recipient": "all", "metadata": {}}
        mapping[node_id] = {"id": node_id, "message": message, "parent": parent,
                            "children": [k for k, p in [("q", "root"), ("a1", "q"), ("a2", "q"), ("e", "root"),
                                                        ("ea", "e")] if p == node_id]}
    path = tmp_path / "conversations.json"
    path.write_text(json.dumps([{"id": "c", "title": "t", "mapping": mapping, "current_node": "a1"}]))
    steps = read_chat_file(path, "local").chats[0].data["steps"]
    for step in steps:
        assert tree_damage(step["metadata"]) is None
    question, answer = steps
    assert question["output"] == "Q" and shown_branch(question["metadata"]) == 0
    assert len(stored_branches(question["metadata"])) == 2 and "lighthouse" in branches_search_text(
        question["metadata"])
    assert [v["text"] for v in stored_versions(answer["metadata"])] == ["first", "second"]


@pytest.mark.parametrize("rows, current, line", [
    ([("q", "gone", "user", "Q")], None, "its message 'q' has a parent 'gone' that is not in the file"),
    ([("q", None, "user", "Q"), ("x", "y", "user", "X"), ("y", "x", "assistant", "Y")], "q",
     "its tree loops: 2 of its messages are their own ancestors (or below one that is)"),
    ([("q", None, "user", "Q"), ("q", "q", "user", "Q")], "q",
     "its tree loops: 1 of its messages are their own ancestors (or below one that is)"),
    ([("q", None, "user", "Q"), ("a", "q", "assistant", "A"), ("b", "q", "user", "B")], "a",
     "its tree mixes questions and answers among one message's replies"),
    ([("a", None, "assistant", "A"), ("b", None, "assistant", "B"), ("c", "a", "user", "C")], "b",
     "an answer of its tree has versions with turns after them and no question before them"),
])
def test_a_damaged_tree_is_refused_in_one_line(rows, current, line):
    with pytest.raises(ImportRefused) as caught:
        tree(*rows, current=current)
    assert str(caught.value) == line


def test_over_the_caps_is_refused():
    versions = [("q", None, "user", "Q")] + [(f"a{n}", "q", "assistant", f"A{n}") for n in range(MAX_VERSIONS + 1)]
    with pytest.raises(ImportRefused, match=f"one of its answers has {MAX_VERSIONS + 1} versions; at most "):
        tree(*versions)
    assert len(tree(*versions[:-1])[1].versions) == MAX_VERSIONS
    branches = [(f"q{n}", None, "user", f"Q{n}") for n in range(MAX_BRANCHES + 1)]
    with pytest.raises(ImportRefused, match=f"one of its questions has {MAX_BRANCHES + 1} branches; at most "):
        tree(*branches)
    assert len(tree(*branches[:-1])[0].branches) == MAX_BRANCHES
    with pytest.raises(ImportRefused, match="messages in its tree; at most 2 per chat"):
        tree_chat({"a": Node(None, (), Said("user", "a")), "b": Node("a", (), None), "c": Node("b", (), None)},
                  None, 2)


def nested(levels: int) -> list:
    """A question edited at each of ``levels`` nested levels: each hidden branch holds the next edit."""
    rows, parent = [], None
    for n in range(levels):
        rows += [(f"old{n}", parent, "user", f"old {n}"), (f"new{n}", parent, "user", f"new {n}")]
        parent = f"old{n}"
    return rows


def test_branches_nest_up_to_the_depth_limit_and_no_further():
    # current at the last "new": the first questions show their newest sibling, the old branches nest
    said = tree(*nested(MAX_BRANCH_DEPTH + 1), current="new0")
    assert tree_damage(said_metadata(said[0], "local")) is None  # the stored contract takes it whole
    with pytest.raises(ImportRefused, match=f"its branches nest deeper than {MAX_BRANCH_DEPTH} levels"):
        tree(*nested(MAX_BRANCH_DEPTH + 2), current="new0")


def test_a_long_chat_is_read_in_linear_time_without_recursion():
    """100,000 messages in a line (past Python's recursion limit), and a wide tree: each in well under the time a
    quadratic walk would take (10^10 steps)."""
    line = [("m0", None, "user", "q")] + [(f"m{n}", f"m{n - 1}", "assistant" if n % 2 else "user", f"t{n}")
                                          for n in range(1, 100_000)]
    started = time.monotonic()
    said = tree(*line)
    assert len(said) == 100_000 and time.monotonic() - started < 20
    wide = [("q", None, "user", "Q")]
    for n in range(5_000):  # answers followed by turns, each branch 2 messages: over the cap, refused at once
        wide += [(f"a{n}", "q", "assistant", "A"), (f"f{n}", f"a{n}", "user", "F")]
    started = time.monotonic()
    with pytest.raises(ImportRefused, match="branches; at most"):
        tree(*wide)
    siblings = [(f"a{n}", None, "assistant", "A") for n in range(50_000)]  # answers with no question, all siblings
    with pytest.raises(ImportRefused, match="50000 versions; at most"):
        tree(*siblings)
    assert time.monotonic() - started < 10


def test_a_file_with_one_damaged_tree_keeps_its_other_chats(tmp_path):
    good = {"id": "ok", "title": "fine", "mapping": {
        "q": {"id": "q", "parent": None, "children": ["a"], "message": {
            "author": {"role": "user"}, "content": {"content_type": "text", "parts": ["hello"]}}},
        "a": {"id": "a", "parent": "q", "children": [], "message": {
            "author": {"role": "assistant"}, "content": {"content_type": "text", "parts": ["hi"]}}}}}
    bad = {"id": "bad", "title": "broken", "mapping": {
        "q": {"id": "q", "parent": "nowhere", "children": [], "message": {
            "author": {"role": "user"}, "content": {"content_type": "text", "parts": ["lost"]}}}}}
    path = Path(tmp_path / "conversations.json")
    path.write_text(json.dumps([bad, good]))
    reading = read_chat_file(path, "local")
    assert reading.chats[0].refused == "its message 'q' has a parent 'nowhere' that is not in the file"
    assert [s["output"] for s in reading.chats[1].data["steps"]] == ["hello", "hi"]
