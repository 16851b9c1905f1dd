"""An imported chat's message and element ids made unique (app/history/import_ids.py), as a pure rule; the import
command does it against a real database in tests/integration/test_history_transfer.py."""
from app.history.import_ids import file_ids, with_own_ids


def chat(step_ids, elements=()):
    return {"id": "c", "steps": [{"id": i, "parentId": step_ids[n - 1] if n else None, "output": str(n)}
                                 for n, i in enumerate(step_ids)],
            "elements": [{"id": e, "forId": f} for e, f in elements]}


def test_ids_nobody_has_are_kept_as_they_are():
    original = chat(["a", "b"], [("e", "b")])
    assert with_own_ids(original, set(), set()) == original


def test_a_taken_or_repeated_id_gets_a_new_one_and_what_pointed_at_it_follows_the_first():
    kept = with_own_ids(chat(["a", "a", "b", "b"], [("e", "b"), ("e", "a")]), taken_steps={"b"},
                        taken_elements=set())
    ids = [step["id"] for step in kept["steps"]]
    assert ids[0] == "a" and len(set(ids)) == 4 and "b" not in ids
    assert [step["output"] for step in kept["steps"]] == ["0", "1", "2", "3"]
    assert kept["steps"][2]["parentId"] == "a" and kept["steps"][3]["parentId"] == ids[2]
    (first, second) = kept["elements"]
    assert first == {"id": "e", "forId": ids[2]} and second["id"] not in ("e",) and second["forId"] == "a"
    assert file_ids(kept) == (ids, ["e", second["id"]])
