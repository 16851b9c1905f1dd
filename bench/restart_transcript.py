"""A chat that survives a restart, recorded as a user sees it (issue 12's closing transcript).

    python -m bench.restart_transcript [--model DIR]

With a real small chat model (SmolLM2-135M-Instruct, tests/real_model.py) and a fresh --data-dir:
start `python launch.py` on a pseudo-terminal, ask a question in Chromium, press Ctrl-C (SIGINT), start
again on the same data, open the chat from the history sidebar, ask a follow-up. Prints what the terminal
showed for each run, what the page showed, and the answers' prompt token counts (the follow-up's prompt
holds the first turn: the engine saw it).
"""
from __future__ import annotations

import argparse
import re
import signal
import tempfile
import time
from pathlib import Path

from tests.support.app_process import LaunchedApp
from tests.support.page import CHROMIUM_ARGS, STATS_EN, send, wait_stats

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def terminal_text(app: LaunchedApp) -> str:
    """The terminal as the user last saw it: escape codes dropped, each run of progress-bar redraws shown once
    (its last state)."""
    lines: list[str] = []
    for raw in app.output().replace("\r\n", "\n").split("\n"):
        for piece in raw.split("\r"):
            line = ANSI.sub("", piece).rstrip()
            if not line:
                continue
            bar = "|" in line and "steps [" in line
            if bar and lines and "|" in lines[-1] and "steps [" in lines[-1]:
                lines[-1] = line
            else:
                lines.append(line)
    return "\n".join("    " + line for line in lines)


def launch(model: Path, data: Path, tmp: Path) -> LaunchedApp:
    app = LaunchedApp(model, tmp, "--data-dir", str(data), "--temperature", "0", terminal=True)
    app.wait_http()
    app.wait_ready()
    return app


def ctrl_c(app: LaunchedApp) -> float:
    started = time.time()
    app.proc.send_signal(signal.SIGINT)
    app.proc.wait(30)
    return time.time() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, help="a chat model directory (default: SmolLM2-135M-Instruct, "
                        "converted once by tests/real_model.py)")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    from tests.e2e.test_history_ui import thread_id_of
    from tests.real_model import cached as cached_real_model
    from tests.support.page import open_sidebar

    model = args.model or cached_real_model()
    tmp = Path(tempfile.mkdtemp(prefix="restart-transcript-"))
    data = tmp / "data"
    first_q, second_q = "What is the capital of France?", "And what is the capital of Germany?"
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        (tmp / "run1").mkdir()
        app = launch(model, data, tmp / "run1")
        page = browser.new_context(locale="en-US", viewport={"width": 1280, "height": 800}).new_page()
        page.goto(app.url + "/")
        page.wait_for_selector("#chat-input", timeout=30000)
        send(page, first_q)
        prompt1, answer1, *_ = wait_stats(page, 1)
        chat_id = thread_id_of(page, first_q)
        first_answer = page.locator('[data-step-type="assistant_message"]').last.inner_text()
        page.context.close()
        exit_s = ctrl_c(app)
        print(f"$ python launch.py --model {model} --data-dir {data} --temperature 0")
        print(terminal_text(app))
        print(f"[page] you: {first_q}")
        print(f"[page] answer: {first_answer.strip()}")
        print(f"[page] stats: prompt {prompt1} tokens, answer {answer1} tokens")
        print(f"[Ctrl-C] exit code {app.proc.returncode} after {exit_s:.1f} s\n")

        (tmp / "run2").mkdir()
        app = launch(model, data, tmp / "run2")
        try:
            page = browser.new_context(locale="en-US", viewport={"width": 1280, "height": 800}).new_page()
            page.goto(app.url + "/")
            page.wait_for_selector("#chat-input", timeout=30000)
            open_sidebar(page)
            page.locator(f"#thread-{chat_id}").get_by_text(first_q).click()
            page.wait_for_function(f"() => location.pathname.endsWith('/thread/{chat_id}')", timeout=10000)
            page.get_by_text(first_q).last.wait_for(timeout=10000)
            shown = page.get_by_text(first_q).count() > 0
            send(page, second_q)
            prompt2, answer2, *_ = wait_stats(page, 2)
            second_answer = page.locator('[data-step-type="assistant_message"]').last.inner_text()
            stats = STATS_EN.findall(page.inner_text("body"))
            page.context.close()
        finally:
            exit_s = ctrl_c(app)
        print(f"$ python launch.py --model {model} --data-dir {data} --temperature 0   # again, same data")
        print(terminal_text(app))
        print(f"[page] sidebar -> '{first_q}' (/thread/{chat_id}); first question shown: {shown}")
        print(f"[page] you: {second_q}")
        print(f"[page] answer: {second_answer.strip()}")
        print(f"[page] stats lines: {stats}")
        print(f"[engine] follow-up prompt {prompt2} tokens >= first prompt {prompt1} + first answer {answer1}: "
              f"{int(prompt2) >= int(prompt1) + int(answer1)}")
        print(f"[Ctrl-C] exit code {app.proc.returncode} after {exit_s:.1f} s")
        browser.close()


if __name__ == "__main__":
    main()
