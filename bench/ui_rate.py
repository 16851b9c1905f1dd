"""What the user sees vs what the engine makes: text rate on the page against the engine's, in one run.

    python -m bench.ui_rate [--model DIR] [--intervals 50,0] [--rounds 2] [--out results.jsonl]

Launches `python launch.py` (greedy, the real SmolLM2-135M-Instruct from tests/real_model.py unless
--model is given) once per --stream-interval-ms value, opens the chat in Chromium and asks each question.
For every answer it records, inside the page, when each piece of text appeared (a MutationObserver on
the answer, `performance.now()`), and reads the engine's own numbers for that request from the app's
/metrics (vLLM's histograms; questions run one at a time, so each delta is one request):

- rendered chars/s: the answer's characters / (last character on the page - first character on the page)
- engine chars/s: the same characters / vLLM's decode time (first token to last token)
- send -> first WebSocket message with streamed text, as the page's JavaScript receives it
- send -> first character on the page (from the click on send) vs vLLM's time to first token; between
  them, the app's own time to first token from its stats line (10 ms steps) splits the difference into
  the app's engine path (app TTFT - engine TTFT) and the rest (page -> server -> handler, server -> page)

Goals (issue 14): rendered >= 95% of the engine's rate; first character within engine TTFT + 50 ms.
"""
from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

from tests.support.app_process import get, running_app
from tests.support.metrics import metric_value
from tests.support.page import CHROMIUM_ARGS

QUESTIONS = ["Show me how to reverse a string in Python.", "List three fruits.",
             "Write a Python function that checks if a number is prime.", "Write a short poem about the sea."]
STATS = re.compile(r"(prompt|提示) \d+ (tokens|个 token)")
# The app's own time to first token (handler start -> first text from the engine host), from the stats line.
APP_TTFT = re.compile(r"first token ([\d.]+) s")
ENGINE_SERIES = ["vllm:time_to_first_token_seconds_sum", "vllm:time_to_first_token_seconds_count",
                 "vllm:request_decode_time_seconds_sum", "vllm:generation_tokens_total"]

# The click on send and every change of the newest answer's text, timed by the page's own clock.
RECORD_JS = """() => { window.__events = []; window.__sent = null; window.__frames = [];
  document.querySelector('#chat-submit').addEventListener('click', () => { window.__sent = performance.now(); },
                                                          {capture: true});
  new MutationObserver(() => { const m = document.querySelectorAll('[data-step-type="assistant_message"]');
    if (!m.length) return;
    const t = m[m.length - 1].innerText, last = window.__events[window.__events.length - 1];
    if (!last || last[1] !== t) window.__events.push([performance.now(), t]); })
  .observe(document.body, {subtree: true, childList: true, characterData: true}); }"""


# When each streamed piece reached the page's JavaScript (a WebSocket message carrying Chainlit's
# "stream_start", which brings the first piece, or "stream_token"), on the page's clock: separates
# "late from the server" from "late to render".
FRAMES_JS = """(() => { const Original = window.WebSocket; window.__frames = [];
  function Timed(...args) { const ws = new Original(...args);
    ws.addEventListener('message', e => { if (typeof e.data === 'string' && /"stream_(start|token)"/.test(e.data))
      window.__frames.push(performance.now()); });
    return ws; }
  Timed.prototype = Original.prototype;
  Object.assign(Timed, {CONNECTING: 0, OPEN: 1, CLOSING: 2, CLOSED: 3});
  window.WebSocket = Timed; })();"""


def engine_numbers(url: str) -> dict[str, float]:
    text = get(url + "/metrics")[1]
    return {name: metric_value(text, name) for name in ENGINE_SERIES}


def measure_answer(page, url: str, question: str, timeout: float = 300) -> dict:
    before = engine_numbers(url)
    page.evaluate(RECORD_JS)
    page.fill("#chat-input", question)
    page.click("#chat-submit")
    deadline = time.time() + timeout
    while time.time() < deadline:
        events = page.evaluate("window.__events")
        if events and STATS.search(events[-1][1]):
            break
        time.sleep(0.1)
    else:
        raise TimeoutError(f"no finished answer for {question!r}")
    sent = page.evaluate("window.__sent")
    frames = [t for t in page.evaluate("window.__frames") if t >= sent]
    final = STATS.split(events[-1][1])[0].rstrip(" `\n")
    # The text as it grew (the stats line removed); the last character is on the page when it is whole.
    shown = [(t, STATS.split(text)[0].rstrip(" `\n")) for t, text in events]
    first_char = next(t for t, text in shown if text.strip())
    last_char = next(t for t, text in shown if text == final)
    time.sleep(0.5)  # vLLM records a request's histograms when it finishes; let the scrape catch up
    after = engine_numbers(url)
    delta = {k: after[k] - before[k] for k in ENGINE_SERIES}
    if delta["vllm:time_to_first_token_seconds_count"] != 1:
        raise RuntimeError(f"expected one engine request per question, metrics moved by {delta}")
    chars = len(final)
    app_ttft_ms = float(APP_TTFT.search(events[-1][1]).group(1)) * 1000
    decode_s = delta["vllm:request_decode_time_seconds_sum"]
    render_s = (last_char - first_char) / 1000
    return {"question": question, "chars": chars, "tokens": delta["vllm:generation_tokens_total"],
            "engine_ttft_ms": round(delta["vllm:time_to_first_token_seconds_sum"] * 1000, 1),
            "app_ttft_ms": app_ttft_ms, "send_to_first_frame_ms": round(frames[0] - sent, 1) if frames else None,
            "send_to_last_frame_ms": round(frames[-1] - sent, 1) if frames else None,
            "send_to_first_char_ms": round(first_char - sent, 1), "send_to_last_char_ms": round(last_char - sent, 1),
            "engine_decode_s": round(decode_s, 3), "render_s": round(render_s, 3),
            "engine_chars_per_s": round(chars / decode_s, 1) if decode_s else None,
            "rendered_chars_per_s": round(chars / render_s, 1) if render_s else None,
            "updates_on_page": len(events)}


def run_interval(model: Path, interval: int, rounds: int, browser) -> list[dict]:
    rows = []
    with tempfile.TemporaryDirectory() as tmp, \
            running_app(model, Path(tmp), "--temperature", "0", "--max-tokens", "256", "--max-model-len", "2048",
                        "--stream-interval-ms", str(interval)) as app:
        for round_no in range(rounds):
            for question in QUESTIONS:
                context = browser.new_context(viewport={"width": 1280, "height": 900})
                context.add_init_script(FRAMES_JS)
                page = context.new_page()
                page.goto(app.url + "/")
                page.wait_for_selector("#chat-input", timeout=30000)
                page.locator("#side-view-content").get_by_text("ready").wait_for(timeout=30000)
                row = {"stream_interval_ms": interval, "round": round_no + 1, **measure_answer(page, app.url, question)}
                print(json.dumps(row, ensure_ascii=False), flush=True)
                rows.append(row)
                context.close()
    return rows


def summary(rows: list[dict]) -> dict:
    ratios = [r["rendered_chars_per_s"] / r["engine_chars_per_s"] for r in rows
              if r["rendered_chars_per_s"] and r["engine_chars_per_s"]]
    lags = [r["send_to_first_char_ms"] - r["engine_ttft_ms"] for r in rows]
    return {"stream_interval_ms": rows[0]["stream_interval_ms"], "answers": len(rows),
            "engine_chars_per_s": statistics.median(r["engine_chars_per_s"] for r in rows),
            "rendered_chars_per_s": statistics.median(r["rendered_chars_per_s"] for r in rows),
            "rendered_vs_engine_median": round(statistics.median(ratios), 3),
            "rendered_vs_engine_min": round(min(ratios), 3),
            "engine_ttft_ms": statistics.median(r["engine_ttft_ms"] for r in rows),
            "app_ttft_ms": statistics.median(r["app_ttft_ms"] for r in rows),
            "send_to_first_frame_ms": statistics.median(r["send_to_first_frame_ms"] or 0 for r in rows),
            "send_to_first_char_ms": statistics.median(r["send_to_first_char_ms"] for r in rows),
            "first_char_lag_ms_median": round(statistics.median(lags), 1), "first_char_lag_ms_max": round(max(lags), 1),
            "rate_goal_met": min(ratios) >= 0.95, "first_char_goal_met": max(lags) <= 50}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="model directory (default: SmolLM2-135M-Instruct from tests/real_model.py)")
    parser.add_argument("--intervals", default="50,0", help="--stream-interval-ms values to compare, in one run")
    parser.add_argument("--rounds", type=int, default=2, help="passes over the questions per interval")
    parser.add_argument("--out", help="write every answer's row and the summaries here (JSON lines)")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    from tests.real_model import cached

    model = Path(args.model) if args.model else cached()
    rows, summaries = [], []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        for interval in (int(v) for v in args.intervals.split(",")):
            interval_rows = run_interval(model, interval, args.rounds, browser)
            rows += interval_rows
            summaries.append(summary(interval_rows))
            print(json.dumps({"summary": summaries[-1]}), flush=True)
        browser.close()
    if args.out:
        with open(args.out, "w") as out:
            for row in rows + [{"summary": s} for s in summaries]:
                out.write(json.dumps(row, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
