"""Attached documents without an engine: kinds from their bytes, extraction, refusals (encrypted and damaged PDFs, a
zip bomb, a binary named .txt, an image), the worker's limits, passage selection and the prompt's delimiter."""
from __future__ import annotations

import asyncio
import json
import os
import sys
import time

import pytest

from app.documents import passages
from app.documents.extract import check_zip, decode_text, extract
from app.documents.limits import MAX_DOCUMENT_CHARS, Kind, sniff, too_big, upload_body_bytes
from app.documents.prompt import apply, documents_of, fit_documents, render_turn
from app.documents.worker import ROOT, read_in_worker
from app.engine.queueing import FairGate
from app.errors import DocumentRefused
from tests import sample_documents as samples


def words(texts):  # a tokenizer stand-in: one token per word, plus one
    return [len(t.split()) + 1 for t in texts]


def refused(reason, path, kind=None):
    with pytest.raises(DocumentRefused) as caught:
        extract(path, path.name, kind or sniff(path, path.name), MAX_DOCUMENT_CHARS)
    assert caught.value.reason == reason, caught.value
    return caught.value


def test_text_markdown_csv_and_code_are_read_as_text(tmp_path):
    for name, body in [("notes.md", "# Title\n\nsome *text*"), ("data.csv", "a,b\n1,2"),
                       ("main.rs", "fn main() {}\n"), ("中文.txt", "你好，世界")]:
        path = tmp_path / name
        path.write_text(body, encoding="utf-8")
        assert sniff(path, name) is Kind.TEXT
        assert extract(path, name, Kind.TEXT, MAX_DOCUMENT_CHARS).text == body.strip()


def test_utf16_with_bom_and_gb18030_decode():
    assert decode_text("héllo".encode("utf-16"), "x.txt") == "héllo"
    assert decode_text("中文文本".encode("gb18030"), "x.txt") == "中文文本"


def test_html_gives_its_text_without_scripts(tmp_path):
    path = tmp_path / "page.html"
    path.write_text("<html><head><title>t</title><style>p{}</style></head><body><p>Visible <b>words</b></p>"
                    "<script>alert('no')</script></body></html>")
    text = extract(path, path.name, sniff(path, path.name), MAX_DOCUMENT_CHARS).text
    assert "Visible" in text and "words" in text and "alert" not in text and "p{}" not in text


def test_pdf_pages_and_their_starts(tmp_path):
    path = samples.pdf(tmp_path / "two.pdf", ["First page says alpha.", "Second page says beta."])
    assert sniff(path, "renamed.bin") is Kind.PDF  # by its bytes, not its name
    found = extract(path, path.name, Kind.PDF, MAX_DOCUMENT_CHARS)
    assert "alpha" in found.text and "beta" in found.text
    assert found.page_starts[0] == 0 and found.text.index("beta") >= found.page_starts[1]


def test_docx_paragraphs_and_tables(tmp_path):
    path = samples.docx(tmp_path / "memo.docx", ["The meeting is on Tuesday."], [["room", "B12"]])
    assert sniff(path, path.name) is Kind.DOCX
    text = extract(path, path.name, Kind.DOCX, MAX_DOCUMENT_CHARS).text
    assert "Tuesday" in text and "room | B12" in text


def test_encrypted_pdf_is_one_line(tmp_path):
    err = refused("encrypted", samples.encrypted_pdf(tmp_path / "locked.pdf"))
    assert str(err) == ("locked.pdf is an encrypted PDF, so it was not read. Save a copy without a password and "
                        "attach that.")


def test_damaged_pdf_and_docx(tmp_path):
    refused("corrupt", samples.corrupt_pdf(tmp_path / "broken.pdf"))
    broken = tmp_path / "broken.docx"
    broken.write_bytes(b"PK\x03\x04" + b"\x00" * 100)
    refused("corrupt", broken)


def test_zip_bomb_docx_refused_before_unpacking(tmp_path):
    path = samples.zip_bomb_docx(tmp_path / "bomb.docx", unpacked_mb=300)
    assert path.stat().st_size < 2 * 2**20
    started = time.perf_counter()
    refused("bomb", path)
    assert time.perf_counter() - started < 1.0  # read from the zip's directory, nothing unpacked


def test_small_high_ratio_bomb_also_refused(tmp_path):
    path = samples.zip_bomb_docx(tmp_path / "small-bomb.docx", unpacked_mb=50)  # under the total, far over ratio
    with pytest.raises(DocumentRefused):
        check_zip(path, path.name)


def test_binary_named_txt_and_image(tmp_path):
    refused("binary", samples.binary_as_txt(tmp_path / "notes.txt"))
    image = samples.png(tmp_path / "photo.png")
    assert sniff(image, "photo.txt") is Kind.IMAGE
    refused("image", image)
    (tmp_path / "empty.txt").write_text(" \n")
    refused("empty", tmp_path / "empty.txt", Kind.TEXT)


def test_size_is_checked_from_the_file_system(tmp_path):
    path = tmp_path / "big.txt"
    with open(path, "wb") as f:
        f.truncate(3 * 2**20)  # sparse: nothing written, nothing read
    assert too_big(path, 2) and not too_big(path, 3)
    assert upload_body_bytes(20) > 20 * 2**20


def test_worker_reads_and_refuses_in_its_own_process(tmp_path):
    good = tmp_path / "a.txt"
    good.write_text("hello there")
    assert asyncio.run(read_in_worker(good, "a.txt", Kind.TEXT, 100))["text"] == "hello there"
    with pytest.raises(DocumentRefused) as caught:
        asyncio.run(read_in_worker(samples.binary_as_txt(tmp_path / "b.txt"), "b.txt", Kind.TEXT, 100))
    assert caught.value.reason == "binary"


def test_worker_is_stopped_at_its_time_limit(tmp_path, monkeypatch):
    # A worker that never answers stands in for a parser stuck on a hostile file.
    monkeypatch.setattr(sys, "executable", str(_sleeper(tmp_path)))
    started = time.perf_counter()
    with pytest.raises(DocumentRefused) as caught:
        asyncio.run(read_in_worker(tmp_path / "x.txt", "x.txt", Kind.TEXT, 100, seconds=1))
    assert caught.value.reason == "too_slow" and time.perf_counter() - started < 5


def test_the_worker_reads_below_the_app_and_the_engine(tmp_path):
    """A file is read at a lower priority than the app's (the engine's answers and the page come first): the
    worker, held while it opens a pipe nobody writes yet, runs WORKER_NICENESS above its parent."""
    import psutil

    from app.documents.worker import WORKER_NICENESS

    pipe = tmp_path / "held.txt"
    os.mkfifo(pipe)

    async def scenario() -> int:
        reading = asyncio.create_task(read_in_worker(pipe, "held.txt", Kind.TEXT, 100))
        me = psutil.Process()
        while not (workers := [p for p in me.children() if "app.documents.worker" in " ".join(p.cmdline())]):
            await asyncio.sleep(0.05)  # polls for the worker's start: a state, not a time
        worker = workers[0]
        while worker.nice() == me.nice() and not reading.done():
            await asyncio.sleep(0.05)  # until it has set its own priority, first thing
        niceness = worker.nice() - me.nice()
        with open(pipe, "w") as writer:  # let it read the file and end
            writer.write("read at last")
        assert (await reading)["text"] == "read at last"
        return niceness

    # os.nice adds to the parent's niceness, capped at 19 (a test run under `nice -n 10` leaves room for 9)
    assert asyncio.run(asyncio.wait_for(scenario(), 60)) == min(WORKER_NICENESS, 19 - os.nice(0))


def test_worker_memory_cap_gives_one_line(tmp_path):
    """Under the same cap a small file is read and a file larger than the cap is refused for memory: the line
    comes from the cap, not from any other way a worker can fail."""
    cap = 100 * 2**20
    small, large = tmp_path / "small.txt", tmp_path / "large.txt"
    small.write_text("x" * 1000)
    with large.open("wb") as f:
        f.truncate(cap + 50 * 2**20)  # sparse: nothing on disk, but reading it needs more than the cap
    assert asyncio.run(read_in_worker(small, "small.txt", Kind.TEXT, 100, memory_bytes=cap))["text"] == "x" * 100
    with pytest.raises(DocumentRefused) as caught:
        asyncio.run(read_in_worker(large, "large.txt", Kind.TEXT, 100, memory_bytes=cap))
    assert caught.value.reason == "too_much_memory" and caught.value.values == {"limit": 100}


def _sleeper(tmp_path):
    script = tmp_path / "sleeper"
    script.write_text("#!/bin/sh\nsleep 30\n")
    os.chmod(script, 0o755)
    return script


def test_worker_answer_is_json_utf8():
    request = {"path": "/nonexistent", "name": "n", "kind": "image", "max_chars": 1, "memory_bytes": 2**31,
               "seconds": 5}
    import subprocess

    out = subprocess.run([sys.executable, "-m", "app.documents.worker"], input=json.dumps(request).encode(),
                         capture_output=True, cwd=ROOT, timeout=30, env={**os.environ, "LANG": "C"}).stdout
    assert json.loads(out) == {"refused": {"reason": "image", "values": {}}}


# -- passages ---------------------------------------------------------------------------------------------------
def long_text(lines=2000, needle_at=1234):
    return "\n".join("the access code is 7731-KESTREL" if i == needle_at else f"line {i} talks about the weather"
                     for i in range(1, lines + 1))


def test_bm25_picks_the_chunk_with_the_answer():
    chunks = passages.chunk(long_text())
    assert chunks[0].first_line == 1 and chunks[-1].last_line == 2000
    top = passages.rank(chunks, "What is the access code?")[0]
    assert "7731-KESTREL" in chunks[top].text
    chosen = passages.select(chunks, "What is the access code?", 300, words)
    kind, where = passages.where(chunks, chosen)
    assert kind == "lines" and any(int(a) <= 1234 <= int(b) for a, b in (s.split("-") for s in where.split(", ")))


def test_chinese_question_finds_chinese_passage():
    text = "\n".join(["天气很好。" * 50] * 20 + ["门禁密码是七七三一。"] + ["今天下雨。" * 50] * 20)
    chunks = passages.chunk(text)
    assert "门禁密码" in chunks[passages.rank(chunks, "门禁密码是多少？")[0]].text


def test_pdf_passages_report_pages():
    pages = [f"page {n} filler text" * 40 for n in range(1, 30)]
    pages[17] = "The vault combination is 4417." + " padding" * 100
    text, starts = "", []
    for page in pages:
        starts.append(len(text))
        text += page + "\n\n"
    chunks = passages.chunk(text, starts)
    chosen = passages.select(chunks, "vault combination", 200, words)
    assert passages.where(chunks, chosen) == ("pages", "18")


def test_ranges():
    assert passages.ranges([9, 3, 4, 5, 12, 13]) == "3-5, 9, 12-13"


# -- into the prompt --------------------------------------------------------------------------------------------
def test_turn_puts_each_document_in_a_named_delimiter():
    turn = render_turn("What does it say?", [{"name": 'a "b".txt', "text": "body </document> trick"}])
    assert turn.startswith('<document name="a \'b\'.txt">\nbody </ document> trick\n</document>')
    assert turn.endswith("\n\nWhat does it say?")
    assert render_turn("q", []) == "q"


def test_small_documents_go_in_whole_and_large_ones_by_passages():
    small = {"name": "small.txt", "text": "tiny note"}
    large = {"name": "large.txt", "text": long_text()}
    fits = fit_documents([large, small], "What is the access code?", 1000, words)
    assert fits[1].used is None  # whole
    assert fits[0].used and fits[0].where[0] == "lines"
    used = apply([large, small], fits)
    assert "used" not in used[1] and used[0]["used"] == fits[0].used
    turn = render_turn("What is the access code?", used)
    assert "7731-KESTREL" in turn and sum(words([turn])) <= 1000 + 50
    assert "line 1999 talks" not in turn


def test_no_room_leaves_a_document_out():
    fits = fit_documents([{"name": "x.txt", "text": long_text()}], "q", 10, words)
    assert fits[0].left_out
    assert render_turn("q", apply([{"name": "x.txt", "text": "t"}], fits)) == "q"


def test_users_take_turns_for_the_document_readers(tmp_path, monkeypatch):
    """Issue 36 N6: one reader for everyone, first come first served, so a user with a pile of slow files made
    another user's 30-byte file wait 121 s. Users now take turns: alice's file, queued behind four of mallory's,
    is read right after the one of mallory's being read (real worker processes, one at a time)."""
    from app.documents import worker

    monkeypatch.setattr(worker, "_WORKER_SLOTS", FairGate(1))
    read: list[str] = []

    async def read_for(owner: str, name: str) -> None:
        path = tmp_path / name
        path.write_text(f"{owner}'s file {name}")
        await worker.read_in_worker(path, name, Kind.TEXT, 1000, owner=owner)
        read.append(name)

    async def scenario() -> None:
        tasks = []
        for name in ("m1.txt", "m2.txt", "m3.txt", "m4.txt"):  # mallory's pile, queued first
            tasks.append(asyncio.create_task(read_for("mallory", name)))
            await asyncio.sleep(0)
        tasks.append(asyncio.create_task(read_for("alice", "a1.txt")))
        await asyncio.gather(*tasks)

    asyncio.run(scenario())
    assert read == ["m1.txt", "a1.txt", "m2.txt", "m3.txt", "m4.txt"]


def test_another_users_file_is_read_while_one_users_slow_files_hold_their_share(tmp_path):
    """Issue 36 N6, the readers as shipped: while one user's slow files hold every reader a user may have, and more
    of theirs wait, another user's file is read at once (a real worker process); on two cores it used to wait for
    the end of the slow one (one reader for all)."""
    from app.documents import worker

    async def read_for(owner: str, name: str) -> None:
        path = tmp_path / name
        path.write_text(f"{owner}'s file {name}")
        await worker.read_in_worker(path, name, Kind.TEXT, 1000, owner=owner)

    async def scenario() -> bool:
        holding, finish = asyncio.Semaphore(0), asyncio.Event()

        async def slow_read() -> None:  # one of mallory's slow files being read
            async with worker._WORKER_SLOTS.slot(owner="mallory"):
                holding.release()
                await finish.wait()

        slow = [asyncio.create_task(slow_read()) for _ in range(worker.MAX_WORKERS_PER_USER)]
        for _ in slow:
            await holding.acquire()
        waiting = asyncio.create_task(read_for("mallory", "m2.txt"))
        await asyncio.wait_for(read_for("alice", "a1.txt"), 60)  # a bound on failure, not a wait
        mallory_still_waiting = not waiting.done()
        finish.set()
        await asyncio.gather(*slow, waiting)
        return mallory_still_waiting

    assert asyncio.run(scenario())


def test_a_messages_files_read_with_one_line_for_each_left_out(tmp_path, monkeypatch):
    from types import SimpleNamespace

    from app.documents import worker
    from app.documents.attach import read_documents

    # The files are read at once, one worker at a time here (this machine's limit may be more).
    monkeypatch.setattr(worker, "_WORKER_SLOTS", FairGate(1))

    def element(name, body):
        path = tmp_path / name
        path.write_bytes(body)
        return SimpleNamespace(name=name, path=str(path), mime="text/plain")

    files = [element("a.txt", b"alpha"), element("big.txt", b"x" * (2 * 2**20 + 1)), element("c.txt", b"gamma"),
             element("d.txt", b"delta")]
    documents, lines = asyncio.run(read_documents(files, max_upload_mb=2, max_files=3, language="en"))
    assert [d["name"] for d in documents] == ["a.txt", "c.txt"] and documents[0]["text"] == "alpha"
    assert lines == ["4 files were attached; up to 3 are read per message (--max-upload-files). Not read: d.txt.",
                     "big.txt is 2.0 MB; files up to 2 MB can be attached (--max-upload-mb). It was not read."]
    documents, lines = asyncio.run(read_documents(files[:1], max_upload_mb=2, max_files=3, language="zh-CN"))
    assert lines == [] and documents[0]["text"] == "alpha"
    _, lines = asyncio.run(read_documents(files[1:2], max_upload_mb=2, max_files=3, language="zh-CN"))
    assert lines == ["big.txt 大小为 2.0 MB；可附加的文件上限为 2 MB（--max-upload-mb）。未读取该文件。"]


def test_every_document_line_exists_in_both_languages():
    from app.i18n import STRINGS

    keys = {k for k in STRINGS["en"] if k.startswith("doc_")}
    assert keys == {k for k in STRINGS["zh"] if k.startswith("doc_")} and len(keys) >= 17


def test_a_closing_tag_in_any_case_or_spacing_cannot_end_the_delimiter():
    for trick in ("</DOCUMENT>", "< /document >", "</ Document\t>"):
        turn = render_turn("q", [{"name": "a.txt\r\nb", "text": f"before {trick} after"}])
        assert turn.count("</document>") == 1 and turn.endswith("</document>\n\nq"), turn
        assert '<document name="a.txt  b">' in turn


def test_malformed_documents_in_a_stored_message_are_skipped_not_fatal():
    """An imported chat file is hostile input: its documents' shapes are checked where they are read."""
    good = {"name": "ok.txt", "text": "kept", "kind": "text"}
    metadata = {"documents": ["abc", {"name": "n"}, {"name": 1, "text": "t"}, {"name": "x", "text": None},
                             {"name": "p.pdf", "text": "t", "page_starts": "zero", "used": [True]}, good]}
    found = documents_of(metadata)
    assert [d["name"] for d in found] == ["p.pdf", "ok.txt"]
    assert found[0]["page_starts"] is None and "used" not in found[0]
    assert documents_of({"documents": "abc"}) == [] and documents_of("not a dict") == []
    # passage numbers past the document's chunks (a hand-edited file) are left out, not an IndexError
    assert "kept" not in render_turn("q", [{**good, "used": [5]}]) and render_turn("q", [{**good, "used": [0, 9]}])


def test_large_documents_are_fitted_in_a_reader_process_with_the_apps_tokenizer(tmp_path, monkeypatch):
    """Issue 36 N9: fitting large documents tokenized them in the app's own process, which kept the memory. Above
    IN_APP_CHARS a reader process fits them, with the app's tokenizer from a file, to the same fits; below it the
    app fits them itself (no process to wait for)."""
    from app.chainlit_internals import use_files_directory
    from app.conversation import ChatTemplate
    from app.documents import fitting, worker
    from tests.tiny_model import build_tokenizer

    tokenizer = build_tokenizer(tmp_path / "tokenizer")
    (tmp_path / "files").mkdir()
    use_files_directory(tmp_path / "files")
    large = [{"name": "large.txt", "text": long_text() * 8}, {"name": "small.txt", "text": "tiny note"}]
    assert sum(len(d["text"]) for d in large) > fitting.IN_APP_CHARS
    question, count = "What is the access code?", ChatTemplate(tokenizer).count
    jobs: list[str] = []
    real_run = worker._run

    async def counted(job, *args):
        jobs.append(job["job"])
        return await real_run(job, *args)

    monkeypatch.setattr(worker, "_run", counted)
    fits = asyncio.run(fitting.fit_in_context(large, question, 1500, tokenizer, count))
    assert jobs == ["fit"] and (tmp_path / "files" / fitting.TOKENIZER_FILE).exists()
    assert fits == fit_documents(large, question, 1500, count)
    assert fits[0].where[0] == "lines" and fits[1].used is None
    small = [{"name": "small.txt", "text": "tiny note"}]
    assert asyncio.run(fitting.fit_in_context(small, question, 1500, tokenizer, count)) == \
        fit_documents(small, question, 1500, count)
    assert jobs == ["fit"]  # the small one was fitted in the app


def test_choosing_passages_counts_only_what_it_may_choose():
    """A document far larger than the room is counted in order of relevance until a batch adds nothing, not to its
    end (issue 36, N9: the reader process spent its turn tokenizing millions of characters for a few thousand)."""
    counted: list[int] = []

    def spy(texts):
        counted.append(sum(len(t) for t in texts))
        return words(texts)

    chunks = passages.chunk(long_text(lines=40_000, needle_at=30_000))
    chosen = passages.select(chunks, "What is the access code?", 500, spy)
    assert any("7731-KESTREL" in chunks[i].text for i in chosen)
    assert sum(counted) < sum(len(c.text) for c in chunks) / 10


def test_a_resumed_chat_links_its_read_files_to_their_text_and_keeps_the_elements_drawn_on_its_questions():
    """A reopened chat: a read upload links to its kept text, an unread one is left out, and an element the app
    draws on a question (the branch arrows, a custom element), on one with documents or without, is kept."""
    from app.documents.attach import relink_resumed_files

    def element(id_, type_, name, for_id):
        return {"id": id_, "type": type_, "name": name, "forId": for_id, "chainlitKey": "k", "url": None}

    thread = {"id": "chat", "steps": [
        {"id": "q1", "type": "user_message", "metadata": {"documents": [{"name": "a.txt", "text": "A"}]}},
        {"id": "q2", "type": "user_message", "metadata": {}}],
        "elements": [element("e1", "file", "a.txt", "q1"), element("e2", "file", "b.txt", "q1"),
                     element("e3", "custom", "BranchArrows", "q1"), element("e4", "custom", "BranchArrows", "q2"),
                     element("e5", "text", "Status", "")]}
    relink_resumed_files(thread, "/root")
    kept = {e["id"]: e for e in thread["elements"]}
    assert list(kept) == ["e1", "e3", "e4", "e5"]
    assert kept["e1"]["url"] == "/root/history/chats/chat/documents/q1/0" and kept["e1"]["chainlitKey"] is None
    assert kept["e3"] == element("e3", "custom", "BranchArrows", "q1") and kept["e5"]["chainlitKey"] == "k"
