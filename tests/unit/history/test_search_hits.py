"""Which version or branch holds the words a search found a chat by (app/history/search_hits.py)."""
from __future__ import annotations

from app.history.search_hits import branch_holding, branch_to_open, version_holding, words_missing

ANSWER = {"kind": "answer", "shown": 0, "versions": [{"text": "Le Havre.", "footer": ""},
                                                     {"text": "Brest, a naval harbour.", "footer": ""},
                                                     {"text": "Brest or Toulon, both naval.", "footer": ""}]}
QUESTION = {"branch": 1, "branches": [
    {"text": "A port?", "after": [{"type": "assistant_message", "name": "Assistant", "output": "Calais.",
                                   "metadata": {"kind": "answer"}}]},
    {"text": "A city?", "after": None},
    {"text": "A river?", "after": [{"type": "assistant_message", "name": "Assistant", "output": "The Loire.",
                                    "metadata": {"kind": "answer", "shown": 0, "versions": [
                                        {"text": "The Loire.", "footer": ""}, {"text": "Cordouan?", "footer": ""}]}}]}]}


def test_the_version_holding_the_most_words_and_never_the_shown_one():
    assert version_holding(ANSWER, ["brest"]) == 1
    assert version_holding(ANSWER, ["brest", "toulon"]) == 2
    assert version_holding(ANSWER, ["havre"]) is None  # shown already
    assert version_holding(ANSWER, ["nantes"]) is None and version_holding(ANSWER, []) is None
    assert version_holding({"kind": "answer"}, ["brest"]) is None


def test_the_branch_holding_the_words_in_its_messages_their_versions_included():
    assert branch_holding(QUESTION, ["calais"]) == 0
    assert branch_holding(QUESTION, ["cordouan"]) == 2 and branch_holding(QUESTION, ["river"]) == 2
    assert branch_holding(QUESTION, ["paris"]) is None and branch_holding({}, ["calais"]) is None


def test_only_words_the_shown_chat_misses_move_anything():
    steps = [{"id": "q", "type": "user_message", "output": "A city?", "metadata": QUESTION},
             {"id": "a", "type": "assistant_message", "output": "Lyon, said Calais.", "metadata": {"kind": "answer"}}]
    assert words_missing(steps, ["calais", "loire"]) == ["loire"]
    assert branch_to_open(steps, ["calais"]) is None  # the chat shows it already
    assert branch_to_open(steps, ["calais", "loire"]) == ("q", 2)
