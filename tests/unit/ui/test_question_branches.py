"""The arrows on a question with branches (app/ui/question_branches.py): an arrow only where there is a branch to
go to, the place in the page's language, and nothing for a question never edited."""
from __future__ import annotations

from app.history.branching import with_edit_kept
from app.ui.answer_actions import FORK, fork_action
from app.ui.question_branches import BRANCH_NEXT, BRANCH_PREVIOUS, arrows_props


def test_the_arrows_go_only_where_there_is_a_branch_and_the_place_is_in_the_pages_language():
    two = with_edit_kept({}, "one", [], "two")
    three = with_edit_kept(two, "two", [], "three")
    props = arrows_props("q", three, "en-US")
    assert props == {"forId": "q", "place": "Branch 3/3", "next": None,
                     "previous": {"name": BRANCH_PREVIOUS, "index": 1, "tooltip": "Previous branch"}}
    assert three is not None
    first = {**three, "branch": 0, "branches": [{**three["branches"][0], "after": None},
                                                 *[{**b, "after": []} for b in three["branches"][1:]]]}
    props = arrows_props("q", first, "zh-CN")
    assert props is not None and props["place"] == "分支 1/3" and props["previous"] is None
    assert props["next"] == {"name": BRANCH_NEXT, "index": 1, "tooltip": "下一个分支"}


def test_a_question_never_edited_or_with_unreadable_branches_has_no_arrows():
    for metadata in (None, {}, {"branches": [{"text": "x", "after": None}], "branch": 0},
                     {"branches": "x", "branch": 0}):
        assert arrows_props("q", metadata, "en-US") is None


def test_an_answers_fork_button_is_one_per_answer_and_says_what_it_does():
    fork = fork_action("a1", "zh-CN")
    assert (fork.name, fork.id, fork.tooltip, fork.payload) == (FORK, "fork-a1", "分叉为新对话", {})
    assert fork_action("a1", "en-US").id == fork.id
