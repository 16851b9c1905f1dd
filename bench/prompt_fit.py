"""How long fitting a long chat into the context takes, before and after the linear rewrite (issue 16).

Two parts, both on this machine's CPU with the tiny test model's real tokenizer and chat template:

1. The function alone: ``app.conversation.fit_to_context`` against the old algorithm (re-render the whole
   chat after each dropped pair; kept below as the baseline, run in the same process) for N user/assistant
   turns. The baseline runs in a child process with a time limit, since at 100,000 turns it does not finish.
2. The app: six /v1 requests of 1,000 turns at once and a plain "hi" beside them (the "hi" once waited
   40 s), a request of 100,000 messages, and SIGTERM while such requests run (the process once did not
   exit in 65 s).

    python -m bench.prompt_fit --turns 1000,100000 [--app]
"""
from __future__ import annotations

import argparse
import json
import multiprocessing
import signal
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

from app.conversation import MIN_ANSWER_TOKENS, ChatTemplate, fit_to_context
from tests.support.app_process import LaunchedApp


def fit_quadratic(system_prompt, history, user_text, max_model_len, max_tokens, template):
    """The algorithm before the rewrite (for comparison only): re-renders everything per dropped pair."""
    system = [{"role": "system", "content": system_prompt}] if system_prompt.strip() else []
    new = [{"role": "user", "content": user_text}]
    dropped = 0
    while True:
        kept = history[dropped:]
        ids = template.encode(system + kept + new)
        if max_model_len - len(ids) >= max_tokens or not kept:
            return ids
        dropped += 2 if len(kept) >= 2 else 1


def chat_of(turns: int) -> list[dict[str, str]]:
    history = []
    for i in range(turns):
        history += [{"role": "user", "content": f"question number {i}: what about the sea?"},
                    {"role": "assistant", "content": f"answer number {i}: the sea is wide and deep."}]
    return history


def _timed_fit(which: str, model_dir: str, turns: int, queue) -> None:
    from transformers import AutoTokenizer

    template = ChatTemplate(AutoTokenizer.from_pretrained(model_dir))
    history = chat_of(turns)
    fit = fit_to_context if which == "linear" else fit_quadratic
    started = time.perf_counter()
    fit("", history, "and now?", 4096, 512, template)
    queue.put(time.perf_counter() - started)


def time_fit(which: str, model_dir: str, turns: int, limit_s: float) -> str:
    queue = multiprocessing.get_context("spawn").Queue()
    child = multiprocessing.get_context("spawn").Process(target=_timed_fit, args=(which, model_dir, turns, queue))
    child.start()
    child.join(limit_s)
    if child.is_alive():
        child.kill()
        return f"> {limit_s:.0f} s (stopped)"
    return f"{queue.get():.3f} s"


def post(url: str, body: dict, timeout: float = 300) -> tuple[int, float]:
    request = urllib.request.Request(url + "/v1/chat/completions", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    started = time.perf_counter()
    try:
        with urllib.request.urlopen(request, timeout=timeout) as reply:
            reply.read()
            code = reply.status
    except urllib.error.HTTPError as err:
        code = err.code
    return code, time.perf_counter() - started


def app_part(model_dir: str) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="prompt-fit-"))
    app = LaunchedApp(Path(model_dir), tmp)
    try:
        app.wait_ready()
        big = {"messages": chat_of(1000)[:-1] + [{"role": "user", "content": "and now?"}], "max_tokens": 16}
        results: list[tuple[int, float]] = []
        threads = [threading.Thread(target=lambda: results.append(post(app.url, big))) for _ in range(6)]
        for thread in threads:
            thread.start()
        time.sleep(0.2)
        hi = post(app.url, {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 16})
        for thread in threads:
            thread.join()
        print(f"| six requests of 1,000 turns at once | {', '.join(f'{s:.2f} s' for _, s in sorted(results))} "
              f"(HTTP {sorted({c for c, _ in results})}) |")
        print(f"| a plain 'hi' beside them | {hi[1]:.2f} s (HTTP {hi[0]}) |")
        huge = {"messages": chat_of(50_000)[:-1] + [{"role": "user", "content": "and now?"}]}
        code, took = post(app.url, huge)
        print(f"| one request of 100,000 messages | HTTP {code} after {took:.2f} s |")
        threads = [threading.Thread(target=post, args=(app.url, big), daemon=True) for _ in range(6)]
        for thread in threads:
            thread.start()
        time.sleep(0.5)
        took = app.stop(signal.SIGTERM, timeout=60)
        print(f"| SIGTERM with six such requests running -> exit | {took:.1f} s (exit code {app.proc.returncode}) |")
    finally:
        app.kill()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="model dir (default: build the tiny test model)")
    parser.add_argument("--turns", default="1000,100000")
    parser.add_argument("--limit", type=float, default=120.0, help="seconds before the baseline is stopped")
    parser.add_argument("--app", action="store_true", help="also measure through a launched app")
    args = parser.parse_args()
    model_dir = args.model
    if not model_dir:
        from tests.tiny_model import build

        model_dir = str(build(Path(tempfile.mkdtemp(prefix="tiny-"))))
    print(f"min answer tokens {MIN_ANSWER_TOKENS}; context 4096, answer 512\n")
    print("| turns (user + assistant pairs) | before: re-render per dropped pair | after: linear |")
    print("|---|---|---|")
    for turns in (int(t) for t in args.turns.split(",")):
        before = time_fit("quadratic", model_dir, turns, args.limit)
        after = time_fit("linear", model_dir, turns, args.limit)
        print(f"| {turns:,} | {before} | {after} |")
    if args.app:
        print("\n| through the app (after) | result |\n|---|---|")
        app_part(model_dir)


if __name__ == "__main__":
    main()
