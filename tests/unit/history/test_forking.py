"""A chat forked from one of its messages (app/history/forking.py): the messages up to and including it, the
elements of those messages, the settings panel's values of their type, the owner, and a name from its origin."""
from __future__ import annotations

from app.history.forking import forked_chat, origin_name
from app.history.messages import CHAT_NAME_CHARS

THREAD = {
    "id": "origin", "name": "Seine", "metadata": {"chat_settings": {"max_tokens": 16}, "is_shared": True},
    "steps": [
        {"id": "q1", "type": "user_message", "threadId": "origin", "output": "Seine?",
         "metadata": {"documents": [{"name": "seine.txt", "text": "777 km"}]}},
        {"id": "a1", "type": "assistant_message", "threadId": "origin", "output": "A river.",
         "metadata": {"kind": "answer"}, "feedback": {"value": 1}},
        {"id": "q2", "type": "user_message", "threadId": "origin", "output": "Length?", "metadata": {}},
        {"id": "a2", "type": "assistant_message", "threadId": "origin", "output": "777 km.", "metadata": {}},
    ],
    "elements": [{"id": "e1", "forId": "q1", "threadId": "origin"}, {"id": "e2", "forId": "q2"}],
}


def test_a_fork_holds_the_messages_up_to_the_one_chosen_with_their_elements_and_settings():
    chat = forked_chat(THREAD, "a1", "fork", "alice", "Fork of Seine", {"max_tokens": 16, "top_p": "x"}, "now")
    assert chat is not None
    assert [s["id"] for s in chat["steps"]] == ["q1", "a1"]  # the old ids: import_chat gives new ones
    assert {s["threadId"] for s in chat["steps"]} == {"fork"} and "feedback" not in chat["steps"][1]
    assert chat["steps"][0]["metadata"]["documents"][0]["text"] == "777 km"
    assert chat["elements"] == [{"id": "e1", "forId": "q1", "threadId": "fork"}]
    assert chat["metadata"] == {"chat_settings": {"max_tokens": 16}}  # only the panel's values, each of its type
    assert (chat["id"], chat["user"], chat["name"], chat["created_at"]) == ("fork", "alice", "Fork of Seine", "now")


def test_a_fork_at_a_message_the_chat_does_not_hold_is_none():
    assert forked_chat(THREAD, "elsewhere", "fork", "alice", "name", {}, "now") is None


def test_a_fork_is_named_after_the_chat_or_its_first_question_within_the_sidebars_length():
    assert origin_name(THREAD) == "Seine"
    assert origin_name({**THREAD, "name": None}) == "Seine?"
    assert origin_name({"steps": []}) == ""
    long = forked_chat(THREAD, "q1", "fork", "alice", "x" * 500, {}, "now")
    assert long is not None and len(long["name"]) == CHAT_NAME_CHARS
