"""What an edit and a switch do to a question's branches (app/history/branching.py): nothing is dropped, the
shown branch is always the chat's own rows, and a question that cannot keep one more branch is left as it is."""
from __future__ import annotations

from app.history.branching import Refused, kept_message, with_branch_switched, with_edit_kept
from app.history.messages import (
    BRANCH_SHOWN,
    BRANCHES,
    KIND,
    KIND_ANSWER,
    MAX_BRANCH_DEPTH,
    MAX_BRANCHES,
    branches_search_text,
    shown_branch,
    stored_branches,
)

ANSWER = kept_message("assistant_message", "Assistant", "Paris is in France.", {KIND: KIND_ANSWER})
LATER = kept_message("user_message", "local", "and its river?", {})


def test_a_first_edit_keeps_the_question_and_its_turns_and_shows_the_new_question():
    metadata = with_edit_kept({"documents": []}, "Where is Paris?", [ANSWER, LATER], "Where is Rome?")
    assert metadata is not None and metadata["documents"] == []  # the question's own keys stay
    assert metadata[BRANCHES] == [{"text": "Where is Paris?", "after": [ANSWER, LATER]},
                                  {"text": "Where is Rome?", "after": None}]
    assert shown_branch(metadata) == 1
    assert "paris is in france." in branches_search_text(metadata).lower()


def test_a_later_edit_keeps_the_branch_shown_in_its_place_and_adds_the_new_one_last():
    once = with_edit_kept({}, "one", [ANSWER], "two")
    switched = with_branch_switched(once, "two", [], 0)
    assert switched is not None
    text, after, metadata = switched
    assert (text, after) == ("one", [ANSWER])
    again = with_edit_kept(metadata, "one", [ANSWER, LATER], "three")
    assert again is not None
    assert [(b["text"], b["after"]) for b in again[BRANCHES]] == [("one", [ANSWER, LATER]), ("two", []),
                                                                  ("three", None)]
    assert again[BRANCH_SHOWN] == 2


def test_a_switch_keeps_the_page_messages_as_the_branch_left_and_hands_back_the_other():
    metadata = with_edit_kept({}, "one", [ANSWER], "two")
    switched = with_branch_switched(metadata, "two", [LATER], 0)
    assert switched is not None
    text, after, new = switched
    assert (text, after) == ("one", [ANSWER])
    assert new[BRANCHES] == [{"text": "one", "after": None}, {"text": "two", "after": [LATER]}]
    back = with_branch_switched(new, "one", [ANSWER], 1)
    assert back is not None and back[:2] == ("two", [LATER])


def test_a_switch_to_the_branch_shown_or_to_none_changes_nothing():
    metadata = with_edit_kept({}, "one", [ANSWER], "two")
    for index in (1, 2, -1, 10):
        assert with_branch_switched(metadata, "two", [], index) is Refused.NO_SUCH_BRANCH
    assert with_branch_switched({}, "two", [], 0) is Refused.NO_SUCH_BRANCH  # never edited
    assert with_branch_switched({BRANCHES: "damaged", BRANCH_SHOWN: 0}, "two", [], 0) is Refused.NO_SUCH_BRANCH


def test_a_question_keeping_the_most_branches_is_not_edited_and_loses_nothing():
    metadata: dict = {}
    for n in range(MAX_BRANCHES - 1):
        edited = with_edit_kept(metadata, f"q{n}", [ANSWER], f"q{n + 1}")
        assert isinstance(edited, dict)
        metadata = edited
    assert len(stored_branches(metadata)) == MAX_BRANCHES
    assert with_edit_kept(metadata, "q9", [ANSWER], "q10") is Refused.FULL  # its own line, not the depth's


def test_an_edit_that_would_nest_branches_too_deep_is_not_made():
    metadata: dict = {}
    for depth in range(MAX_BRANCH_DEPTH + 5):
        inner = kept_message("user_message", "local", f"question {depth}", metadata)
        edited = with_edit_kept({}, f"outer {depth}", [inner], "edited")
        if isinstance(edited, Refused):
            assert edited is Refused.TOO_DEEP
            break
        metadata = edited
    else:
        raise AssertionError("branches nested past MAX_BRANCH_DEPTH were taken")
    assert stored_branches(metadata)  # the deepest tree kept still reads back whole
