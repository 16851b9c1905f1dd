"""The upload ledger's rules (app/guards/uploads.py): what counts, what is taken off, and the line that refuses."""
from app.guards.uploads import MIB, UploadLedger, UploadLimits


def ledger() -> UploadLedger:
    return UploadLedger(UploadLimits(files_per_session=2, mib_per_session=3, files_per_user=3, mib_per_user=4))


def test_uploads_still_arriving_count_and_one_that_failed_is_taken_off():
    book = ledger()
    book.arriving("tab", "alice", MIB)
    book.arriving("tab", "alice", MIB)
    assert "this chat tab has 2 files uploaded; at most 2 (--max-uploads-per-session, 1 to 10000)" in \
        book.refusal("tab", "alice", 1)
    book.arrived("tab", MIB, None)  # refused by Chainlit: not kept, not counted
    assert book.refusal("tab", "alice", 1) is None


def test_bytes_count_per_tab_and_over_the_users_tabs_but_not_other_users():
    book = ledger()
    book.arriving("tab1", "alice", 2 * MIB)
    book.arrived("tab1", 2 * MIB, "file-1")
    assert "--max-upload-mb-per-session, 1 to 1048576" in book.refusal("tab1", "alice", 2 * MIB)
    book.arriving("tab2", "alice", 2 * MIB)
    assert "your open chat tabs have 4.0 MiB uploaded" in book.refusal("tab3", "alice", 1)
    assert book.refusal("tab4", "bob", 2 * MIB) is None


def test_a_closed_tab_gives_its_files_for_deleting_and_frees_the_share():
    book = ledger()
    book.arriving("tab", "alice", MIB)
    book.arrived("tab", MIB, "file-1")
    assert book.session_ended("tab") == ["file-1"]
    book.arrived("tab", MIB, "late")  # an upload that ended after its tab closed is not kept in the books
    assert book.session_ended("tab") == []
