"""Issue 35 item 5: a later question gets the passages for itself from a document an earlier turn sent in part."""
from app.documents import passages
from app.documents.followup import PASSAGES_OF, as_sent, needing_passages
from app.documents.prompt import Fit, fit_documents, render_turn

TORQUE = "What torque are the green valve's bolts tightened to?"


def words(texts):
    return [len(t.split()) for t in texts]


def guide() -> dict:
    lines = [f"Section {n}: the pump runs on a schedule and needs oil every week." for n in range(1, 401)]
    lines[49] = "Torque: the green valve's bolts are tightened to 35 newton metres."
    lines[349] = "Warning: the reset password for the blue pump is ORCHID-42."
    return {"name": "guide.txt", "kind": "text", "text": "\n".join(lines)}


def chunk_with(text: str) -> int:
    return next(c.index for c in passages.chunk(guide()["text"]) if text in c.text)


def test_a_question_about_a_part_not_sent_fits_the_document_again_once():
    first = {**guide(), "used": [chunk_with("ORCHID-42")]}
    whole = {"name": "a.txt", "text": "short"}
    earlier_passages = {"name": "guide.txt", "text": "[lines 1-9] ...", PASSAGES_OF: True}
    found = needing_passages([[whole, first], [earlier_passages], [dict(first)]], TORQUE)
    assert [(d["name"], "used" in d, d[PASSAGES_OF]) for d in found] == [("guide.txt", False, True)]
    assert found[0]["text"] == guide()["text"]  # the whole text, for this question's own passages


def test_a_question_the_sent_passages_answer_or_that_matches_nothing_adds_nothing():
    first = {**guide(), "used": [chunk_with("35 newton metres")]}
    assert needing_passages([[first]], TORQUE) == []  # its best passage is in the chat already
    assert needing_passages([[first]], "thanks!") == []  # no passage matches: the prompt stays short
    assert needing_passages([[{**guide(), "used": None}]], TORQUE) == []  # sent whole


def test_a_follow_up_gets_its_own_passages_and_keeps_only_them():
    [document] = needing_passages([[{**guide(), "used": [chunk_with("ORCHID-42")]}]], TORQUE)
    [fit] = fit_documents([document], TORQUE, 600, words)
    assert fit.used and fit.passages > len(fit.used) and fit.passages_left_out == fit.passages - len(fit.used)
    kept = as_sent(document, fit)
    assert "35 newton metres" in kept["text"] and len(kept["text"]) < len(document["text"]) // 4
    assert kept[PASSAGES_OF] and "used" not in kept and "page_starts" not in kept
    assert kept["text"] == passages.joined(passages.chunk(document["text"]), fit.used)
    assert kept["text"] in render_turn(TORQUE, [kept])  # rendered whole from then on


def test_no_room_keeps_nothing_and_the_turn_renders_without_it():
    [document] = needing_passages([[{**guide(), "used": [chunk_with("ORCHID-42")]}]], TORQUE)
    kept = as_sent(document, Fit("guide.txt", 5000, 10, used=[]))
    assert kept["used"] == [] and kept["text"] == ""
    assert render_turn("and?", [kept]) == "and?"


def test_a_new_attachment_is_left_as_apply_made_it():
    document = {**guide(), "used": [1, 2]}
    assert as_sent(document, Fit("guide.txt", 5000, 900, used=[1, 2])) is document
