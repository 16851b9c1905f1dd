"""The arrows on a question with branches (app/ui/question_branches.py): an arrow only where there is a branch to
go to, the place in the page's language, and nothing for a question never edited."""
from __future__ import annotations

from app.history.branching import with_edit_kept
from app.ui.answer_actions import FORK, fork_action
from app.ui.question_branches import BRANCH_NEXT, BRANCH_PREVIOUS, arrows_props


class RecordingLayer:
    """The data layer's writes a branch switch makes, in order: ("update", the step's ``update_key``),
    ("delete", its id), ("create", its output); the created steps whole in ``created``."""

    def __init__(self, update_key: str) -> None:
        self.update_key = update_key
        self.calls: list[tuple[str, str]] = []
        self.created: list[dict] = []

    async def update_step(self, step):
        self.calls.append(("update", step[self.update_key]))

    async def delete_step(self, step_id):
        self.calls.append(("delete", step_id))

    async def create_step(self, step):
        self.calls.append(("create", step["output"]))
        self.created.append(step)


def test_the_arrows_go_only_where_there_is_a_branch_and_the_place_is_in_the_pages_language():
    two = with_edit_kept({}, "one", [], "two")
    assert isinstance(two, dict)
    three = with_edit_kept(two, "two", [], "three")
    assert isinstance(three, dict)
    props = arrows_props("q", three, "en-US")
    assert props == {"forId": "q", "place": "Branch 3/3", "next": None,
                     "previous": {"name": BRANCH_PREVIOUS, "index": 1, "tooltip": "Previous branch"}}
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


def test_a_chat_opened_from_a_search_shows_and_saves_the_branch_holding_the_words():
    import asyncio

    from chainlit.context import init_http_context

    from app.ui.question_branches import open_on_searched_branch

    layer = RecordingLayer(update_key="id")
    calls, created = layer.calls, layer.created
    barge = {"type": "assistant_message", "name": "Assistant", "output": "A lighthouse barge.",
             "metadata": {"kind": "answer"}}

    def thread():
        branches = [{"text": "Boats?", "after": [barge]}, {"text": "Fish?", "after": None}]
        return {"id": "chat", "userId": "u1", "elements": [{"id": "e", "forId": "a"}, {"id": "f", "forId": "q"}],
                "steps": [{"id": "q", "type": "user_message", "name": "local", "output": "Fish?",
                           "metadata": {"branches": branches, "branch": 1}},
                          {"id": "a", "type": "assistant_message", "name": "Assistant", "output": "Trout.",
                           "metadata": {"kind": "answer"}}]}

    async def opened_for(words):
        init_http_context(thread_id="chat")  # the chat being resumed, as Chainlit's socket handler has it
        opened = thread()
        await open_on_searched_branch(opened, layer, words)
        return opened

    for words in ((), ("trout",), ("heron",)):  # no search, a word shown, a word nowhere: as it was
        assert asyncio.run(opened_for(words)) == thread() and calls == []
    opened = asyncio.run(opened_for(("lighthouse",)))
    # Saved as an arrow saves a switch: the question first, then the coming branch is stored, then the leaving one goes
    # (a stop in between leaves a branch twice, never none).
    assert calls == [("update", "q"), ("create", "A lighthouse barge."), ("delete", "a")]
    question = opened["steps"][0]
    assert question["output"] == "Boats?" and question["metadata"]["branch"] == 0
    assert question["metadata"]["branches"][1] == {"text": "Fish?", "after": [
        {"type": "assistant_message", "name": "Assistant", "output": "Trout.", "metadata": {"kind": "answer"}}]}
    assert opened["steps"][1:] == created and created[0]["threadId"] == "chat"
    assert (created[0]["type"], created[0]["metadata"]) == ("assistant_message", {"kind": "answer"})
    assert opened["elements"] == [{"id": "f", "forId": "q"}]


def test_a_search_opens_a_branch_nested_in_a_branch_each_switch_further_down():
    import asyncio

    from chainlit.context import init_http_context

    from app.ui.question_branches import open_on_searched_branch

    layer = RecordingLayer(update_key="output")
    calls = layer.calls

    def message(type_, output, metadata=None):
        return {"type": type_, "name": "x", "output": output, "metadata": metadata or {}}

    inner = {"branches": [{"text": "The red one?", "after": [message("assistant_message", "A lighthouse tender.")]},
                          {"text": "Which one?", "after": None}], "branch": 1}
    hidden = [message("assistant_message", "Barges."), message("user_message", "Which one?", inner),
              message("assistant_message", "The blue one.")]
    thread = {"id": "chat", "steps": [
        {"id": "q", "type": "user_message", "name": "x", "output": "Fish?",
         "metadata": {"branches": [{"text": "Boats?", "after": hidden}, {"text": "Fish?", "after": None}],
                      "branch": 1}},
        {"id": "a", "type": "assistant_message", "name": "x", "output": "Trout.", "metadata": {}}]}

    async def open_it():
        init_http_context(thread_id="chat")
        await open_on_searched_branch(thread, layer, ("lighthouse",))

    asyncio.run(open_it())
    assert [step["output"] for step in thread["steps"]] == ["Boats?", "Barges.", "The red one?",
                                                            "A lighthouse tender."]
    assert calls[:5] == [("update", "Boats?"), ("create", "Barges."), ("create", "Which one?"),
                         ("create", "The blue one."), ("delete", "a")]
    assert calls[5][0] == "update" and calls[5][1] == "The red one?"
    assert calls[6] == ("create", "A lighthouse tender.") and [c[0] for c in calls[7:]] == ["delete"]
    assert thread["steps"][2]["metadata"]["branch"] == 0
