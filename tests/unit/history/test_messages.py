"""The one contract of a stored message (app/history/messages.py), as the chat, the export and the importers read
it: an answer's footer (the stats, the length line, "stopped") is the page's, never the answer's."""
from __future__ import annotations

from app.history.export import chat_messages
from app.history.importers import from_openai_messages
from app.history.messages import ASSISTANT_MESSAGE, FOOTER, KIND, KIND_ANSWER, answer_text


def test_an_answer_is_its_text_without_the_footer_its_metadata_names():
    footer = "\n\n`prompt 9 tokens` · `answer 3 tokens`\n\n`stopped at 3 tokens`"
    assert answer_text("the answer" + footer, {KIND: KIND_ANSWER, FOOTER: footer}) == "the answer"
    assert answer_text("ends in `code`\n\n`x`", {KIND: KIND_ANSWER}) == "ends in `code`\n\n`x`"  # no footer kept


def test_a_footer_that_is_not_a_text_or_metadata_that_is_not_an_object_leaves_the_answer_whole():
    for metadata in (None, [], "footer", {FOOTER: 3}, {FOOTER: None}):
        assert answer_text("the answer", metadata) == "the answer"
    assert answer_text(None, None) == ""


def test_the_export_keeps_an_answer_without_its_whole_footer_and_leaves_notices_out():
    footer = "\n\n`prompt 9 tokens`\n\n`length limit`"
    thread = {"steps": [
        {"type": "user_message", "name": "local", "output": "question"},
        {"type": ASSISTANT_MESSAGE, "name": "system", "output": "a notice", "metadata": {"kind": "notice"}},
        {"type": ASSISTANT_MESSAGE, "name": "ernie-chat", "output": "answer" + footer,
         "metadata": {KIND: KIND_ANSWER, FOOTER: footer}},
    ]}
    assert [(m["role"], m["content"]) for m in chat_messages(thread)] == [("user", "question"), ("assistant", "answer")]


def test_an_imported_answer_is_stored_as_the_chat_stores_one():
    steps = from_openai_messages({"messages": [{"role": "user", "content": "q"},
                                               {"role": "assistant", "content": "a"}]}, "local")["steps"]
    assert [(s["type"], s["metadata"]) for s in steps] == [("user_message", {}),
                                                           (ASSISTANT_MESSAGE, {KIND: KIND_ANSWER})]
    assert [m["content"] for m in chat_messages({"steps": steps})] == ["q", "a"]


def _said(kind: str, output: str, metadata: dict | None = None) -> dict:
    return {"type": kind, "name": "User" if kind == "user_message" else "Assistant", "output": output,
            "metadata": metadata or {}}


def test_a_question_s_branches_are_read_with_the_one_shown_and_their_words_searched():
    from app.history.messages import branches_search_text, shown_branch, stored_branches
    nested = {"branches": [{"text": "deeper old", "after": [_said("assistant_message", "deep answer")]},
                           {"text": "deeper new", "after": None}], "branch": 1}
    metadata = {"branches": [{"text": "old question", "after": [_said("assistant_message", "old answer"),
                                                                  _said("user_message", "deeper new", nested)]},
                             {"text": "new question", "after": None}], "branch": 1}
    assert len(stored_branches(metadata)) == 2 and shown_branch(metadata) == 1
    words = branches_search_text(metadata)
    assert all(word in words for word in ("old question", "old answer", "deeper old", "deep answer"))
    assert "new question" not in words  # the shown branch is the chat's own rows


def test_a_damaged_tree_counts_as_no_branches():
    from app.history.messages import MAX_BRANCH_DEPTH, MAX_BRANCHES, shown_branch, stored_branches
    live = {"text": "now", "after": None}
    old = {"text": "then", "after": []}
    damaged = [
        {"branches": [live]},  # one branch alone is no branch
        {"branches": [old, old]},  # none shown
        {"branches": [live, live]},  # two shown
        {"branches": [live, {"text": 3, "after": []}]},
        {"branches": [live, {"text": "x", "after": [{"type": "user_message"}]}]},
        {"branches": [live] + [old] * MAX_BRANCHES},
    ]
    assert all(stored_branches(metadata) == [] for metadata in damaged)
    assert shown_branch({"branches": [live, old], "branch": 1}) is None  # "branch" names a hidden one
    deep: dict = {"branches": [live, old]}
    for _ in range(MAX_BRANCH_DEPTH + 1):
        deep = {"branches": [live, {"text": "q", "after": [_said("user_message", "q", deep)]}]}
    assert stored_branches(deep) == []
