"""Answer versions in a long chat (issue 32, "Done when": a bench row): the time to open a chat of 200 messages
whose every answer keeps 5 versions, next to the same chat without versions, and the time to switch the newest
answer's version (on the page, and until the database holds it), on SQLite and on PostgreSQL, in Chromium.

    python -m bench.tree_open [--out FILE.json] [--rounds 3] [--pairs 100] [--versions 5]
                              [--databases sqlite,postgresql]

Two chats are written as our own JSON export (app/history/export.py ``to_json``, read back by
app/history/importers.py ``from_ernie_chat``): --pairs question/answer pairs owned by the local user, every answer
400-800 characters of made-up prose (paragraphs, a list or a code block now and then) with its stats line as the
app writes it. In the versions chat each answer keeps --versions versions (metadata ``versions`` and ``shown``,
app/history/messages.py), the newest one shown, as after Regenerate pressed 4 times; the baseline chat is the same
messages with only the shown text. For each database (SQLite: the app's chats.db in a fresh --data-dir;
PostgreSQL: a server of Debian's package started as the tests do, tests/postgres.py) both files go in with
``python launch.py import`` and the app is launched with the tiny test model (tests/tiny_model.py). Then
--rounds rounds, each in a fresh Chromium context per measure:
1. open /thread/<id> until the last message (the newest answer) is visible: the baseline chat, then the versions
   chat (interleaved, so the machine's load changes hit both);
2. in the versions chat just opened, click ◀ under the newest answer (app/ui/answer_versions.py): the time until
   the page shows the previous version's text and "Version 4/5", and until the database row of that answer holds
   ``shown`` = 3 (polled every 10 ms from a thread, from the click on; sqlite3 read-only or asyncpg). ▶ then puts
   version 5 back (waited for on the page and in the database, not timed) for the next round.
Prints a markdown table (medians of the rounds) and writes every run to --out as JSON.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Optional

from tests.support.app_process import ROOT, running_app
from tests.support.page import CHROMIUM_ARGS
from tests.tiny_model import build

VOCABULARY = ("the model answer token cache memory request engine prompt context layer weight batch stream chat page "
         "server database question version branch river city water light sound time system value order result "
         "reason number method example detail change point world simple small large first second quick often "
         "usually because while since after before every other each which where that this with from into over "
         "under about between through during without within around against")
WORDS = VOCABULARY.split()
STATS = "`prompt {prompt} tokens` · `answer {tokens} tokens` · `first token {ttft:.2f} s` · `{tps:.1f} tokens/s`"


def stamp(when: datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def prose(rng: random.Random, low: int, high: int) -> str:
    """Made-up answer text of ``low``-``high`` characters: paragraphs of sentences, now and then a list or a code
    block (the page renders Markdown, so an answer's shape costs as much as its length)."""
    target = rng.randint(low, high)
    parts: list[str] = []
    size = 0
    while size < target:
        kind = rng.random()
        if kind < 0.15 and parts:
            part = "\n".join(f"- {' '.join(rng.choices(WORDS, k=rng.randint(3, 7)))}" for _ in range(3))
        elif kind < 0.25 and parts:
            part = "```python\n" + "\n".join(f"{rng.choice(WORDS)}_{n} = {rng.choice(WORDS)}({n})"
                                            for n in range(rng.randint(2, 4))) + "\n```"
        else:
            sentences = [" ".join(rng.choices(WORDS, k=rng.randint(6, 14))).capitalize() + "."
                         for _ in range(rng.randint(2, 4))]
            part = " ".join(sentences)
        parts.append(part)
        size += len(part) + 2
    return "\n\n".join(parts)[:high].rstrip()


def stats_footer(rng: random.Random, text: str) -> str:
    tokens = max(1, len(text) // 4)
    return "\n\n" + STATS.format(prompt=rng.randint(20, 3000), tokens=tokens, ttft=rng.uniform(0.05, 0.4),
                                 tps=rng.uniform(300, 700))


def chats(pairs: int, versions: int, seed: int = 0) -> tuple[dict, dict, dict]:
    """(the versions chat, the baseline chat, markers): two of our JSON exports with the same --pairs turns, the
    first with ``versions`` versions of every answer (the newest shown), the second with the shown ones only.
    ``markers``: the text that starts each version of the newest answer, and the ids."""
    rng = random.Random(seed)
    base = datetime(2026, 12, 6, 9, 0, tzinfo=timezone.utc)
    tagged, plain = str(uuid.uuid4()), str(uuid.uuid4())
    tag = uuid.uuid4().hex[:8]
    newest = [f"newest-{tag}-v{k + 1}" for k in range(versions)]
    with_versions: list[dict] = []
    without: list[dict] = []
    last_answer_ids = {}
    for i in range(pairs):
        asked_at = stamp(base + timedelta(seconds=60 * i))
        answered_at = stamp(base + timedelta(seconds=60 * i + 5))
        question = prose(rng, 40, 200).split("\n\n")[0] + f" (#{i + 1})"
        kept = []
        for k in range(versions):
            text = prose(rng, 400, 800)
            if i == pairs - 1:  # each version of the newest answer starts with a text of its own, to wait for
                text = f"{newest[k]} {text}"
            kept.append({"text": text, "footer": stats_footer(rng, text)})
        shown = versions - 1
        for chat_id, steps, tree in ((tagged, with_versions, True), (plain, without, False)):
            q_id, a_id = str(uuid.uuid4()), str(uuid.uuid4())
            metadata: dict[str, Any] = {"kind": "answer", "footer": kept[shown]["footer"]}
            if tree:
                metadata.update(versions=kept, shown=shown)
            steps.append({"id": q_id, "threadId": chat_id, "parentId": None, "type": "user_message",
                          "name": "local", "output": question, "createdAt": asked_at, "start": asked_at,
                          "end": asked_at, "streaming": False, "isError": False, "metadata": {}})
            steps.append({"id": a_id, "threadId": chat_id, "parentId": None, "type": "assistant_message",
                          "name": "Assistant", "output": kept[shown]["text"] + kept[shown]["footer"],
                          "createdAt": answered_at, "start": answered_at, "end": answered_at, "streaming": False,
                          "isError": False, "metadata": metadata})
            last_answer_ids[chat_id] = a_id

    def export(chat_id: str, name: str, steps: list[dict]) -> dict:
        return {"format": "ernie-chat/chat-v1", "id": chat_id, "name": name, "created_at": steps[0]["createdAt"],
                "user": "local", "tags": [], "metadata": {}, "messages": [], "steps": steps, "elements": []}

    markers = {"versions_id": tagged, "baseline_id": plain, "newest": newest,
               "answer_id": last_answer_ids[tagged]}
    return (export(tagged, f"{2 * pairs} messages, {versions} versions each", with_versions),
            export(plain, f"{2 * pairs} messages", without), markers)


def import_file(path: Path, db_args: list[str]) -> None:
    result = subprocess.run([sys.executable, "launch.py", "import", str(path), *db_args], cwd=ROOT,
                            capture_output=True, text=True, timeout=600)
    if result.returncode != 0 or "imported: chat" not in result.stdout:
        raise RuntimeError(f"import {path.name} failed:\n{result.stdout}\n{result.stderr}")
    print("  " + result.stdout.strip().splitlines()[-1], flush=True)


def sqlite_shown(db: Path, step_id: str) -> Callable[[], Optional[int]]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10, check_same_thread=False)

    def read() -> Optional[int]:
        row = conn.execute("select data from steps where id = ?", (step_id,)).fetchone()
        return (json.loads(row[0]).get("metadata") or {}).get("shown") if row else None
    return read


class ShownWatch:
    """Polls the answer's stored ``shown`` every 10 ms in a thread of its own, from ``start()``; ``seconds``: the
    time from ``start()`` until it first read ``want``."""

    def __init__(self, database: str, where: str, step_id: str) -> None:
        self.database, self.where, self.step_id = database, where, step_id

    def read_once(self) -> Optional[int]:
        return self._run(lambda read: read())

    def _run(self, body: Callable[[Callable[[], Optional[int]]], Any]) -> Any:
        if self.database == "sqlite":
            return body(sqlite_shown(Path(self.where), self.step_id))

        async def main() -> Any:
            import asyncpg

            conn = await asyncpg.connect(self.where.replace("postgresql+asyncpg://", "postgresql://"))
            loop = asyncio.get_running_loop()

            def read() -> Optional[int]:
                row = asyncio.run_coroutine_threadsafe(
                    conn.fetchval("select data from steps where id = $1", self.step_id), loop).result()
                return (json.loads(row).get("metadata") or {}).get("shown") if row else None
            try:
                return await asyncio.to_thread(body, read)
            finally:
                await conn.close()
        return asyncio.run(main())

    def start(self, want: int, timeout: float = 120) -> None:
        self.seconds: Optional[float] = None
        self.ready = threading.Event()

        def poll(read: Callable[[], Optional[int]]) -> None:
            read()  # connected and warm before the click
            self.ready.set()
            self._go.wait()
            t0 = time.perf_counter()
            while time.perf_counter() - t0 < timeout:
                if read() == want:
                    self.seconds = time.perf_counter() - t0
                    return
                time.sleep(0.01)

        self._go = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(poll,), daemon=True)
        self.thread.start()
        if not self.ready.wait(30):
            raise RuntimeError("the database poller did not connect")

    def go(self) -> None:
        self._go.set()

    def result(self, timeout: float = 130) -> float:
        self.thread.join(timeout)
        if self.seconds is None:
            raise RuntimeError(f"the database never held the new shown for answer {self.step_id}")
        return self.seconds


def open_chat(browser, url: str, thread_id: str, marker: str):
    """A fresh context on /thread/<id>; (page, seconds until ``marker``, the last message's start, is visible)."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    t0 = time.perf_counter()
    page.goto(f"{url}/thread/{thread_id}")
    page.get_by_text(marker).wait_for(state="visible", timeout=180_000)
    return page, time.perf_counter() - t0


def place(page, shown: int, count: int):
    return page.get_by_role("button", name=f"Version {shown}/{count}", exact=True)


def switch(page, watch: ShownWatch, label: str, marker: str, shown: int, count: int) -> dict[str, float]:
    """Click the arrow ``label``; seconds until the page shows ``marker`` (text_s), then "Version shown/count" as
    well (shown_s), and until the database holds ``shown`` - 1 (saved_s)."""
    arrow = page.get_by_role("button", name=label, exact=True)
    arrow.wait_for(state="visible", timeout=60_000)
    watch.start(shown - 1)
    t0 = time.perf_counter()
    watch.go()
    arrow.click()
    page.get_by_text(marker).wait_for(state="visible", timeout=120_000)
    text_s = time.perf_counter() - t0
    place(page, shown, count).wait_for(state="visible", timeout=120_000)
    return {"text_s": text_s, "shown_s": time.perf_counter() - t0, "saved_s": watch.result()}


def measure(url: str, where: str, database: str, markers: dict, rounds: int, versions: int) -> list[dict]:
    from playwright.sync_api import sync_playwright

    newest = markers["newest"]
    watch = ShownWatch(database, where, markers["answer_id"])
    runs = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        try:
            for n in range(1, rounds + 1):
                run: dict[str, Any] = {"database": database, "round": n}
                # Which chat opens first alternates from round to round: the first page of a round paid more.
                for chat in ("baseline", "versions") if n % 2 else ("versions", "baseline"):
                    page, run[f"open_{chat}_s"] = open_chat(browser, url, markers[f"{chat}_id"], newest[-1])
                    if chat == "versions":
                        place(page, versions, versions).wait_for(state="visible", timeout=60_000)
                        flip = switch(page, watch, "◀", newest[-2], versions - 1, versions)
                        run.update({f"switch_{key}": value for key, value in flip.items()})
                        # Back to the newest version for the next round, on the page and in the database (not
                        # timed).
                        switch(page, watch, "▶", newest[-1], versions, versions)
                    page.context.close()
                run["load_1min"] = os.getloadavg()[0]
                runs.append(run)
                print(f"  round {n}: open baseline {run['open_baseline_s']:.2f} s, versions "
                      f"{run['open_versions_s']:.2f} s; switch: text {run['switch_text_s']:.2f} s, text and place "
                      f"{run['switch_shown_s']:.2f} s, saved {run['switch_saved_s']:.2f} s "
                      f"(load {run['load_1min']:.2f})", flush=True)
        finally:
            browser.close()
    if watch.read_once() != versions - 1:
        raise RuntimeError("the newest version is not the one stored as shown after the rounds")
    return runs


def run_database(database: str, tmp: Path, model: Path, files: list[Path], markers: dict, rounds: int,
                 versions: int, pg_base: Optional[str]) -> list[dict]:
    data_dir = tmp / f"data-{database}"
    data_dir.mkdir()
    if database == "sqlite":
        db_args = ["--data-dir", str(data_dir)]
        where = str(data_dir / "chats.db")
    else:
        from tests.postgres import create_database

        assert pg_base is not None
        where = asyncio.run(create_database(pg_base))
        db_args = ["--data-dir", str(data_dir), "--database-url", where]
    print(f"{database}: importing", flush=True)
    for path in files:
        import_file(path, db_args)
    app_tmp = tmp / f"app-{database}"
    app_tmp.mkdir()
    started = time.time()
    with running_app(model, app_tmp, *db_args) as app:
        print(f"{database}: app ready after {time.time() - started:.1f} s", flush=True)
        return measure(app.url, where, database, markers, rounds, versions)


def table(runs: list[dict], pairs: int, versions: int, rounds: int) -> str:
    lines = [f"| database | chat | open s median ({rounds} runs) | switch s to shown | "
             "switch s to saved |", "|---|---|---|---|---|"]
    names = {"sqlite": "SQLite", "postgresql": "PostgreSQL"}
    for database in dict.fromkeys(r["database"] for r in runs):
        mine = [r for r in runs if r["database"] == database]
        med = lambda key, mine=mine: statistics.median(r[key] for r in mine)  # noqa: E731
        spread = lambda key, mine=mine: " / ".join(f"{r[key]:.2f}" for r in mine)  # noqa: E731
        lines.append(f"| {names[database]} | {2 * pairs} messages, no versions | **{med('open_baseline_s'):.2f}** "
                     f"({spread('open_baseline_s')}) | - | - |")
        lines.append(f"| {names[database]} | {2 * pairs} messages, {versions} versions each "
                     f"| **{med('open_versions_s'):.2f}** ({spread('open_versions_s')}) "
                     f"| **{med('switch_shown_s'):.2f}** ({spread('switch_shown_s')}) "
                     f"| **{med('switch_saved_s'):.2f}** ({spread('switch_saved_s')}) |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="write every run here as JSON")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--pairs", type=int, default=100, help="question/answer pairs in each chat")
    parser.add_argument("--versions", type=int, default=5, help="versions of every answer (2-10)")
    parser.add_argument("--databases", default="sqlite,postgresql")
    args = parser.parse_args()
    databases = [d.strip() for d in args.databases.split(",") if d.strip()]
    if not set(databases) <= {"sqlite", "postgresql"} or not 2 <= args.versions <= 10:
        parser.error("--databases takes sqlite and postgresql; --versions 2 to 10")

    tmp = Path(tempfile.mkdtemp(prefix="tree-open-"))
    tagged, plain, markers = chats(args.pairs, args.versions)
    files = []
    for chat, name in ((tagged, "versions.json"), (plain, "baseline.json")):
        path = tmp / name
        path.write_text(json.dumps(chat, ensure_ascii=False, indent=1))
        files.append(path)
        print(f"{name}: {path.stat().st_size / 1024:.0f} KiB", flush=True)
    model = build(tmp / "model")
    runs: list[dict] = []
    for database in databases:
        if database == "postgresql":
            from tests.postgres import postgres_server

            with postgres_server() as base:
                runs += run_database(database, tmp, model, files, markers, args.rounds, args.versions, base)
        else:
            runs += run_database(database, tmp, model, files, markers, args.rounds, args.versions, None)
    print()
    print(table(runs, args.pairs, args.versions, args.rounds))
    if args.out:
        args.out.write_text(json.dumps({"pairs": args.pairs, "versions": args.versions, "rounds": args.rounds,
                                        "files_kib": {p.name: round(p.stat().st_size / 1024) for p in files},
                                        "runs": runs}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
