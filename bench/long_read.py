"""A long document on the CPU build (issue 35 item 2): how soon the page shows that the engine is reading, and the
time to the first token, for this checkout and an older one, in one run (the same machine, model and documents).

    python -m bench.long_read --base DIR [--model DIR] [--reps 3] [--out FILE]

``--base``: an older checkout (``git archive f9ee3fd | tar -x -C DIR``). Both checkouts are launched (SmolLM2-135M
of tests/real_model.py by default, float32, an 8,192-token context) and asked in turns, ``--reps`` times each, in a
new chat with a ~7,000-token text file (the same one for both, another one each turn: a document an app read
before would come from its prefix cache), in headless Chromium. Per answer: seconds from the click on send to the
first progress line on the page, to the reading line with the token count, to the first answer character, and the
first token as the stats line says (the app's own clock, from the answer's start to the engine's first token).
Prints a Markdown table last.
"""
from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from pathlib import Path

from tests.support.app_process import ROOT, LaunchedApp
from tests.support.page import CHROMIUM_ARGS, STATS_EN, attach, wait_chat_opened

QUESTION = "Which crew checked the copper near the willow?"
WORDS = ("harbour", "lantern", "copper", "meadow", "signal", "granite", "orchard", "ferry", "beacon", "willow",
         "quarry", "thistle", "compass", "saddle", "juniper", "anchor", "pepper", "candle", "marble", "falcon")
# the first answer character: an answer step holding text that is no progress line ("Reading logbook-0.txt…", a
# notice, or the answer's "Reading your message: ...")
FIRST_ANSWER = """[...document.querySelectorAll('[data-step-type="assistant_message"]')]
    .some(e => e.innerText.trim() && !/^Reading (logbook|your message)/.test(e.innerText.trim()))"""
# Watches the page from the click on send: the first progress line ("Reading logbook.txt…" while the file is read,
# then the answer's "Reading your message: ..." while the engine reads), and the first answer character.
WATCH = """firstAnswer => { window.__t = {}; const answered = new Function('return ' + firstAnswer);
    new MutationObserver(() => {
        const text = document.body.innerText, at = performance.now();
        if (!window.__t.progress && /Reading (logbook|your message)/.test(text)) window.__t.progress = at;
        if (!window.__t.reading && text.includes('Reading your message')) {
            window.__t.reading = at; window.__t.line = text.match(/Reading your message[^\\n]*/)[0]; }
        if (!window.__t.answer && answered()) window.__t.answer = at;
    }).observe(document.body, {childList: true, subtree: true, characterData: true});
    window.__t0 = performance.now(); document.querySelector('#chat-submit').click(); }"""


def document(path: Path, first: int, sentences: int = 266) -> Path:
    """~7,000 tokens (SmolLM2's tokenizer); ``first`` makes each one different from its first line on."""
    lines = [f"Note {n}: the {WORDS[n % 20]} near the {WORDS[(n * 7) % 20]} was checked by crew {n % 13} at "
             f"{n % 24:02d}:{(n * 11) % 60:02d}." for n in range(first, first + sentences)]
    path.write_text("\n".join(lines) + "\n")
    return path


def ask(browser, app: LaunchedApp, doc: Path) -> dict:
    context = browser.new_context(locale="en-US", viewport={"width": 1280, "height": 900})
    try:
        page = context.new_page()
        page.goto(app.url + "/")
        wait_chat_opened(page)
        attach(page, doc)
        page.fill("#chat-input", QUESTION)
        # Times taken in the page (performance.now from the click), so polling from here adds nothing to them.
        page.evaluate(WATCH, FIRST_ANSWER)
        page.wait_for_function("() => !!window.__t.answer", timeout=600000)
        page.wait_for_function("p => new RegExp(p).test(document.body.innerText)", arg=STATS_EN.pattern,
                               timeout=600000)
        stats = STATS_EN.search(page.inner_text("body"))
        times = page.evaluate("""() => { const s = at => at ? (at - window.__t0) / 1000 : null;
            return {progress: s(window.__t.progress), reading: s(window.__t.reading), answer: s(window.__t.answer),
                    line: window.__t.line || null}; }""")
        return {"prompt_tokens": int(stats[1]), "first_token_stats_s": float(stats[3]),
                "first_progress_s": times["progress"], "reading_line_s": times["reading"],
                "first_answer_char_s": times["answer"], "first_line": times["line"]}
    finally:
        context.close()


def launch(root: Path, model: Path, tmp: Path) -> LaunchedApp:
    app = LaunchedApp(model, tmp, "--dtype", "float32", "--max-model-len", "8192", "--max-tokens", "16", root=root)
    app.wait_http(120)
    app.wait_ready(600)
    return app


def median(runs: list[dict], key: str) -> str:
    values = [r[key] for r in runs if r[key] is not None]
    return f"{statistics.median(values):.2f} s" if values else "none"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", type=Path, required=True)
    parser.add_argument("--model", type=Path)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    from tests.real_model import cached

    model = args.model or cached()
    with sync_playwright() as p, tempfile.TemporaryDirectory() as tmp:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        apps = {}
        try:
            for name, root in (("before", args.base), ("after", ROOT)):  # both up, idle while the other answers
                (Path(tmp) / name).mkdir()
                apps[name] = launch(root, model, Path(tmp) / name)
            results = {name: [] for name in apps}
            for i in range(args.reps):  # in turns, so both meet the same load on a shared machine
                for name, app in apps.items():  # the same document for both: each app has a prefix cache of its own
                    results[name].append(ask(browser, app, document(Path(tmp) / f"logbook-{i}.txt", first=1000 * i)))
        finally:
            for app in apps.values():
                app.stop()
                app.kill()
            browser.close()
    if args.out:
        args.out.write_text(json.dumps(results, indent=2))
    print(json.dumps(results, indent=2))
    print("\n| checkout | prompt tokens | first progress line (page) | reading line with tokens (page) | "
          "first answer character (page) | first token (stats line) |\n|---|---|---|---|---|---|")
    for name, runs in results.items():
        print(f"| {name} | {', '.join(str(r['prompt_tokens']) for r in runs)} | {median(runs, 'first_progress_s')} | "
              f"{median(runs, 'reading_line_s')} | {median(runs, 'first_answer_char_s')} | "
              f"{median(runs, 'first_token_stats_s')} |")


if __name__ == "__main__":
    main()
