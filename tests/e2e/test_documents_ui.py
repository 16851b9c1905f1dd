"""Attached documents in a real browser (issue 23), tiny ERNIE behind `python launch.py`: a .txt, a PDF and a DOCX
attached with Chainlit's upload button and asked about, with the prompt the engine counted equal to the question
plus each file's text in its <document> delimiter; bad files (encrypted and damaged PDFs, a zip-bomb DOCX, a binary
named .txt, an image) one line each while the question is still answered; a document larger than the context
answered from its passages; a long paste turned into a file; and the chat reopened after a restart with its
document back in the engine's prompt. Uploads from another origin, or over --max-upload-mb, are refused."""
from __future__ import annotations

import json
import re
import socket
import sqlite3
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from app.conversation import ChatTemplate
from app.documents.extract import extract
from app.documents.limits import MAX_DOCUMENT_CHARS, sniff
from app.documents.prompt import render_turn
from tests import sample_documents as samples
from tests.support.app_process import ROOT, LaunchedApp, get
from tests.support.metrics import prompt_tokens
from tests.support.page import attach, open_sidebar, send, wait_chat_opened, wait_stats

pytestmark = pytest.mark.timeout(600)
FLAGS = ("--max-tokens", "16", "--max-upload-files", "8", "--max-upload-mb", "2")
NOTICES = '[data-step-type="assistant_message"]'


class Served:
    """The app under test, restartable on the same data directory (the restart test runs last)."""

    def __init__(self, model_dir: Path, tmp: Path) -> None:
        self.model_dir, self.tmp, self.data = model_dir, tmp, tmp / "data"
        self.app = self._start("first")

    def _start(self, name: str) -> LaunchedApp:
        folder = self.tmp / name
        folder.mkdir()
        app = LaunchedApp(self.model_dir, folder, "--data-dir", str(self.data), *FLAGS)
        app.wait_http()
        app.wait_ready()
        return app

    def restart(self) -> None:
        self.stop()
        self.app = self._start("second")

    def stop(self) -> None:
        self.app.stop()
        self.app.kill()


@pytest.fixture(scope="module")
def served(tiny_model_dir, tmp_path_factory):
    holder = Served(tiny_model_dir, tmp_path_factory.mktemp("documents"))
    try:
        yield holder
    finally:
        holder.stop()


@pytest.fixture(scope="module")
def template(tiny_model_dir):
    from transformers import AutoTokenizer

    return ChatTemplate(AutoTokenizer.from_pretrained(tiny_model_dir))


@pytest.fixture
def open_page(browser, served):
    contexts = []

    def open_it(path="/"):
        context = browser.new_context(locale="en-US", viewport={"width": 1280, "height": 900})
        contexts.append(context)
        page = context.new_page()
        page.goto(served.app.url + path)
        wait_chat_opened(page)
        return page

    yield open_it
    for context in contexts:
        context.close()


def expected_prompt(template, question: str, *paths: Path) -> int:
    documents = [{"name": p.name, "text": extract(p, p.name, sniff(p, p.name), MAX_DOCUMENT_CHARS).text}
                 for p in paths]
    return len(template.encode([{"role": "user", "content": render_turn(question, documents)}]))


def notices(page) -> list[str]:
    return [text.strip() for text in page.locator(NOTICES).all_inner_texts()]


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("files")
    text = folder / "notes.txt"
    text.write_text("Shopping list: apples, pears, 12 eggs.\nThe boat leaves at 7:45 from pier 3.\n")
    return {
        "txt": text,
        "pdf": samples.pdf(folder / "report.pdf", ["Quarterly report. Revenue rose 12 percent.",
                                                    "The access code printed on page two is 7731-KESTREL."]),
        "docx": samples.docx(folder / "memo.docx", ["Memo: the meeting moved to Thursday."], [["room", "B12"]]),
        "encrypted": samples.encrypted_pdf(folder / "locked.pdf"),
        "corrupt": samples.corrupt_pdf(folder / "broken.pdf"),
        "bomb": samples.zip_bomb_docx(folder / "bomb.docx"),
        "binary": samples.binary_as_txt(folder / "program.txt"),
        "image": samples.png(folder / "photo.png"),
    }


def test_txt_pdf_and_docx_attached_and_asked_reach_the_engine(open_page, served, template, files):
    page = open_page()
    question = "What do these files say?"
    attach(page, files["txt"], files["pdf"], files["docx"])
    before = prompt_tokens(served.app)
    send(page, question)
    prompt, *_ = wait_stats(page, 1)
    expected = expected_prompt(template, question, files["txt"], files["pdf"], files["docx"])
    # The stats line counts the files' text, and the engine's own counter got exactly that prompt.
    assert int(prompt) == expected, (prompt, expected)
    assert prompt_tokens(served.app) - before == expected
    assert expected > len(template.encode([{"role": "user", "content": question}])) + 40
    user_message = page.locator('[data-step-type="user_message"]').last
    for name in ("notes.txt", "report.pdf", "memo.docx"):  # each file is shown with the message
        user_message.get_by_text(name).wait_for(timeout=10000)


def test_the_page_gets_its_upload_limits_from_the_flags(open_page):
    page = open_page()
    features = page.evaluate("""async () => (await (await fetch('/project/settings?language=en-US')).json())
                                .features.spontaneous_file_upload""")
    assert features["enabled"] and features["max_size_mb"] == 2 and features["max_files"] == 8, features


def test_bad_files_get_one_line_each_and_the_question_is_still_answered(open_page, served, template, files):
    page = open_page()
    bad = [files[k] for k in ("encrypted", "corrupt", "bomb", "binary", "image")]
    attach(page, files["txt"], *bad)
    send(page, "When does the boat leave?")
    prompt, *_ = wait_stats(page, 1)
    assert int(prompt) == expected_prompt(template, "When does the boat leave?", files["txt"])  # the good one read
    lines = [n for n in notices(page) if not re.search(r"prompt \d+ tokens", n)]
    assert lines == [
        "locked.pdf is an encrypted PDF, so it was not read. Save a copy without a password and attach that.",
        "broken.pdf could not be read as a PDF: the file is damaged (PdfStreamError).",
        "bomb.docx would unpack to more than 200 MB or too many parts (a zip bomb?), so it was not read.",
        "program.txt is not text (it holds binary data), so it was not read. Attach text, Markdown, code, CSV, "
        "JSON, HTML, PDF or DOCX.",
        "photo.png is an image, and the model reads text only. It was not read.",
    ], lines
    page.locator('[data-step-type="user_message"]').get_by_text("When does the boat leave?").wait_for()


def test_only_bad_files_and_no_text_shows_just_their_lines(open_page, files):
    page = open_page()
    attach(page, files["image"])
    page.click("#chat-submit")
    page.get_by_text("photo.png is an image").wait_for(timeout=30000)
    page.locator('[data-step-type="user_message"] img').wait_for()  # the picture stays with the message
    assert len(notices(page)) == 1, notices(page)  # no "your message is empty" on top, and no answer


def test_document_larger_than_the_context_is_answered_from_its_passages(open_page, served, tmp_path):
    big = tmp_path / "manual.txt"
    lines = [f"Section {n}: the pump runs on a regular schedule and needs oil every week." for n in range(1, 1601)]
    lines[1199] = "Warning: the reset password for the blue pump is ORCHID-42."
    big.write_text("\n".join(lines))
    page = open_page()
    attach(page, big)
    send(page, "What is the reset password for the blue pump?")
    prompt, *_ = wait_stats(page, 1, timeout=120)
    line = next(n for n in notices(page) if n.startswith("manual.txt is"))
    tokens, room, used, total, spans, left = passages_line(line, "manual.txt")
    assert tokens > 4096 > room and int(prompt) <= 4096
    assert 0 < used < total and left == total - used  # how many passages went in, and how many did not
    assert any(a <= 1200 <= b for a, b in spans), spans  # the line with the answer was among those used
    # The passages keep to the room they were given: the answer's length is not cut to make them fit.
    assert not [n for n in notices(page) if n.startswith("Answer length capped")], notices(page)


PASSAGES_LINE = re.compile(r"(.+) is ([\d,]+) tokens, more than the ([\d,]+) tokens of room left in the context: "
                           r"the (\d+) of its (\d+) passages most relevant to your question are used \(lines (.+)\); "
                           r"(\d+) are left out\. A later question about another part gets its own\.")


def passages_line(line: str, name: str) -> tuple[int, int, int, int, list[tuple[int, int]], int]:
    """A passages notice's numbers: tokens, room, passages used, passages in all, line spans used, left out."""
    found = PASSAGES_LINE.fullmatch(line)
    assert found and found[1] == name, line
    spans = [tuple(map(int, s.split("-"))) if "-" in s else (int(s), int(s)) for s in found[6].split(", ")]
    return (int(found[2].replace(",", "")), int(found[3].replace(",", "")), int(found[4]), int(found[5]), spans,
            int(found[7]))


def test_a_follow_up_question_gets_the_passages_for_itself(open_page, served, template, tmp_path):
    """Issue 35 item 5: a follow-up question about another part of a document sent in part was answered from the
    first question's passages. Now it gets its own: the notice names them, they are kept with its message, and the
    engine's prompt is that turn with them (the first turn, with its own passages, no longer fits beside it)."""
    big = tmp_path / "pump-guide.txt"
    lines = [f"Section {n}: the pump runs on a regular schedule and needs oil every week." for n in range(1, 1601)]
    lines[1199] = "Warning: the reset password for the blue pump is ORCHID-42."
    lines[199] = "Torque: the green valve's bolts are tightened to 35 newton metres."
    big.write_text("\n".join(lines))
    page = open_page()
    attach(page, big)
    send(page, "What is the reset password for the blue pump?")
    wait_stats(page, 1, timeout=120)
    first = passages_line(next(n for n in notices(page) if n.startswith("pump-guide.txt is")), "pump-guide.txt")
    assert not any(a <= 200 <= b for a, b in first[4]), first  # the torque line was not among the first passages
    before = prompt_tokens(served.app)
    send(page, "What torque are the green valve's bolts tightened to?")
    prompt, *_ = wait_stats(page, 2, timeout=120)
    lines_now = [n for n in notices(page) if n.startswith("pump-guide.txt is")]
    assert len(lines_now) == 2, lines_now
    second = passages_line(lines_now[1], "pump-guide.txt")
    assert any(a <= 200 <= b for a, b in second[4]), second  # this question's passages hold its answer
    # Kept with the second message: only the passages it was given, not the whole file again.
    thread = thread_id_of(page, "What is the reset password")
    stored = documents_stored(served.data / "chats.db", thread)
    kept = stored[1]
    assert len(kept) == 1 and kept[0]["passages_of"] and "35 newton metres" in kept[0]["text"]
    assert len(kept[0]["text"]) < big.stat().st_size // 4 and "ORCHID-42" in stored[0][0]["text"]
    # The engine read the second turn with those passages.
    expected = len(template.encode([{"role": "user", "content": render_turn(
        "What torque are the green valve's bolts tightened to?", kept)}]))
    assert int(prompt) == expected and prompt_tokens(served.app) - before == expected


def test_a_document_left_out_of_a_later_prompt_is_named(open_page, served, template, tmp_path):
    """Two documents of over half the context each: the second question's prompt leaves the first turn out, and
    the notice names the document that went with it. The engine's prompt is the second turn alone."""
    first, second = tmp_path / "pump-manual.txt", tmp_path / "valve-manual.txt"
    for path, part in ((first, "pump"), (second, "valve")):
        line = f"The {part} needs a check every week, and its log is kept in the blue binder."
        per_line = len(template.encode([{"role": "user", "content": line + "\n" + line}])) - \
            len(template.encode([{"role": "user", "content": line}]))
        path.write_text("\n".join([line] * (2300 // per_line)))
        assert 2100 < expected_prompt(template, "", path) < 4096 - 16 - 100, expected_prompt(template, "", path)
    page = open_page()
    attach(page, first)
    send(page, "When is the pump checked?")
    wait_stats(page, 1, timeout=120)
    attach(page, second)
    before = prompt_tokens(served.app)
    send(page, "When is the valve checked?")
    prompt, *_ = wait_stats(page, 2, timeout=120)
    expected = expected_prompt(template, "When is the valve checked?", second)
    assert int(prompt) == expected and prompt_tokens(served.app) - before == expected
    line = next(n for n in notices(page) if n.startswith("The chat is longer than the model's context"))
    assert line.endswith("the oldest 2 message(s) are left out of what the model sees. They stay on screen. With "
                         "them the model no longer sees pump-manual.txt: attach a file again to ask about it."), line


def test_long_paste_becomes_an_attached_file(open_page, served, template, browser):
    page = open_page()
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=served.app.url)
    # ~3,000 characters: over the 2,500 of a long paste, and (~2,500 tokens) whole in the tiny model's context
    pasted = "\n".join(f"Log line {n}: service healthy, latency {n % 50} ms" for n in range(70))
    page.evaluate("text => navigator.clipboard.writeText(text)", pasted)
    page.click("#chat-input")
    with page.expect_response(lambda r: r.request.method == "POST" and "/project/file" in r.url) as upload:
        page.keyboard.press("Control+V")
    assert upload.value.status == 200
    assert page.input_value("#chat-input") == ""  # the box stays readable: the text went into a file
    page.fill("#chat-input", "Summarise the log.")
    page.click("#chat-submit")
    prompt, *_ = wait_stats(page, 1)
    name = re.search(r"pasted-\d{8}-\d{6}\.txt", page.locator('[data-step-type="user_message"]').inner_text())
    assert name, page.locator('[data-step-type="user_message"]').inner_text()
    document = [{"name": name[0], "text": pasted}]
    assert int(prompt) == len(template.encode([{"role": "user", "content": render_turn("Summarise the log.",
                                                                                        document)}]))
    # A short paste stays text in the box.
    page.evaluate("text => navigator.clipboard.writeText(text)", "short text")
    page.click("#chat-input")
    page.keyboard.press("Control+V")
    page.wait_for_function("() => document.querySelector('#chat-input').value === 'short text'")


def test_a_file_dropped_on_the_chat_is_attached(open_page, template):
    page = open_page()
    text = "Dropped note: the spare key is under the blue pot."
    files = page.evaluate_handle("""text => { const files = new DataTransfer();
        files.items.add(new File([text], 'dropped.md', {type: 'text/markdown'})); return files; }""", text)
    with page.expect_response(lambda r: r.request.method == "POST" and "/project/file" in r.url) as upload:
        page.dispatch_event("#message-composer", "dragenter", {"dataTransfer": files})
        page.dispatch_event("#message-composer", "drop", {"dataTransfer": files})  # bubbles to the chat's dropzone
    assert upload.value.status == 200
    send(page, "Where is the key?")
    prompt, *_ = wait_stats(page, 1)
    assert int(prompt) == len(template.encode([{"role": "user", "content": render_turn(
        "Where is the key?", [{"name": "dropped.md", "text": text}])}]))


def _post_upload(app, body: bytes, headers: dict) -> int:
    request = urllib.request.Request(app.url + "/project/file?session_id=x", data=body, method="POST",
                                     headers={"Content-Type": "multipart/form-data; boundary=b", **headers})
    try:
        with urllib.request.urlopen(request, timeout=30) as reply:
            return reply.status
    except urllib.error.HTTPError as err:
        return err.code


def test_uploads_from_another_origin_or_over_the_limit_are_refused(served):
    small = b'--b\r\nContent-Disposition: form-data; name="file"; filename="a.txt"\r\n\r\nhi\r\n--b--\r\n'
    assert _post_upload(served.app, small, {"Origin": "http://evil.example"}) == 403
    assert _post_upload(served.app, small, {"Origin": served.app.url}) == 401  # past the guard: Chainlit wants a login
    # Over --max-upload-mb 2: refused from the declared length, before any of the body is sent.
    with socket.create_connection(("127.0.0.1", served.app.port), timeout=10) as conn:
        conn.sendall(b"POST /project/file?session_id=x HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                     b"Content-Type: multipart/form-data; boundary=b\r\nContent-Length: %d\r\n\r\n" % (3 * 2**20))
        reply = b"".join(iter(lambda: conn.recv(65536), b"")).decode()  # to the end: the server closes
    assert reply.startswith("HTTP/1.1 413") and "(--max-upload-mb)" in reply, reply[:300]


def test_chat_reopened_after_a_restart_keeps_its_document_in_the_prompt(open_page, served, template, files):
    page = open_page()
    question = "What is the access code?"
    attach(page, files["pdf"])
    send(page, question)
    prompt1, answer1, _, _ = wait_stats(page, 1)
    assert int(prompt1) == expected_prompt(template, question, files["pdf"])
    thread_id = thread_id_of(page, question)
    page.context.close()
    db = served.data / "chats.db"
    stored = documents_stored(db, thread_id)
    assert stored[0][0]["name"] == "report.pdf" and "7731-KESTREL" in stored[0][0]["text"]
    assert oct(db.stat().st_mode & 0o777) == "0o600" and oct(served.data.stat().st_mode & 0o777) == "0o700"
    assert "7731-KESTREL" not in served.app.log_file.read_text()  # file contents never reach the log

    served.restart()
    page = open_page(f"/thread/{thread_id}")
    page.get_by_text(question).first.wait_for(timeout=15000)
    before = prompt_tokens(served.app)
    send(page, "And again?")
    prompt2, *_ = wait_stats(page, 2)
    # The engine got the document again: the new prompt holds the first turn (the PDF's text) and its answer.
    assert int(prompt2) >= int(prompt1) + int(answer1), (prompt1, answer1, prompt2)
    assert prompt_tokens(served.app) - before == int(prompt2)

    # The file shown with the reopened message links to its kept text (the uploaded copy went with the old process).
    cookie = {"Cookie": "; ".join(f"{c['name']}={c['value']}" for c in page.context.cookies())}
    link = page.locator('[data-step-type="user_message"] a', has_text="report.pdf").first
    link.wait_for(timeout=10000)
    href = link.get_attribute("href")
    assert href.startswith(f"/history/chats/{thread_id}/documents/"), href
    code, text = get(served.app.url + href, headers=cookie)
    assert code == 200 and text == stored[0][0]["text"]
    assert get(served.app.url + href)[0] == 401  # no login, no document

    # Export: a line per file in Markdown, the text in JSON; import brings it back; deleting the chat removes it.
    code, markdown = get(f"{served.app.url}/history/chats/{thread_id}/export.md", headers=cookie)
    assert code == 200 and "- attached: report.pdf (pdf, " in markdown and "7731-KESTREL" not in markdown
    code, body = get(f"{served.app.url}/history/chats/{thread_id}/export.json", headers=cookie)
    exported = json.loads(body)
    assert exported["messages"][0]["documents"][0]["name"] == "report.pdf"
    assert "7731-KESTREL" in json.dumps(exported["steps"])
    exported_file = served.tmp / "chat.json"
    exported_file.write_text(body, encoding="utf-8")
    other = served.tmp / "imported"
    imported = subprocess.run([sys.executable, "launch.py", "import", "--data-dir", str(other), str(exported_file)],
                              cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert imported.returncode == 0, imported.stderr
    assert documents_stored(other / "chats.db", thread_id)[0][0]["text"] == stored[0][0]["text"]

    open_sidebar(page)
    row = page.locator(f"#thread-{thread_id}")
    row.hover()
    row.locator("#thread-options").click(force=True)
    page.get_by_role("menuitem", name="Delete").click()
    page.get_by_role("alertdialog").get_by_role("button", name="Confirm").click()
    row.wait_for(state="detached", timeout=10000)
    assert documents_stored(db, thread_id) == []  # (that the bytes leave the file: tests/unit/test_history_data_layer)


def documents_stored(db: Path, thread_id: str) -> list:
    with sqlite3.connect(db) as conn:
        return [json.loads(d)["metadata"].get("documents") for (d,) in conn.execute(
            "select data from steps where thread_id = ? and type = 'user_message' order by position", (thread_id,))]


def thread_id_of(page, title: str) -> str:
    """The chat's id, from its entry in the history sidebar (element id "thread-<id>")."""
    open_sidebar(page)
    found = page.wait_for_function(
        """q => { for (const e of document.querySelectorAll('[id^="thread-"]')) {
              if (/^thread-[0-9a-f-]{36}$/.test(e.id) && e.textContent.includes(q)) return e.id; } return null; }""",
        arg=title, timeout=15000)
    return found.json_value().removeprefix("thread-")
