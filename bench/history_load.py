"""History under load (issue 12, item 8): database size and RSS over a soak that writes chats, and the time
to open a chat of 500 messages in Chromium.

    python -m bench.history_load [--minutes 10] [--concurrency 2] [--sample-every 60] [--open-runs 3]
                                 [--session-timeout SECONDS] [--heap-watch]

Builds the tiny test model and launches `python launch.py --data-dir TMP` (its own SQLite database), then:
1. Soak: for --minutes, new chats over Chainlit's websocket as the page makes them (socket.io, the local
   user's login cookie from GET /, the chat settings sent with a random answer length of 16-64 tokens,
   1-3 turns per chat; each chat's socket then disconnects, as a closed tab, or with --clear-session as the
   page's "New chat"). Every --sample-every seconds: chats.db + -wal + -shm on disk and the RSS of the
   app and its engine processes. Fails (exit 1) on any failed chat turn (no final answer, a notice, a
   timeout, a socket error).
2. Open a 500-message chat: 250 user + 250 assistant messages, copied from real soak messages, are written
   through the app's own data layer (HistoryDataLayer on the same database; the socket would need 250
   answered turns), owned by the local user; then Chromium opens /thread/<id> and the time to the last
   message being visible is measured --open-runs times (fresh browser context each), median reported.

--session-timeout runs the app with Chainlit's session window (how long a closed page's session is kept, in
case the tab comes back; 600 s in .chainlit/config.toml) set to SECONDS, from a copy of the project's Chainlit
files. --heap-watch samples the heap inside the app and vLLM's engine processes (bench/heap_watch/) every
--sample-every seconds and prints a table per process: whether memory that grows is held Python objects or
memory the allocator keeps.
"""
from __future__ import annotations

import argparse
import asyncio
import copy
import json
import os
import random
import re
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

import httpx
import psutil
import socketio

from tests.support.app_process import ROOT, running_app
from tests.support.page import CHROMIUM_ARGS
from tests.tiny_model import build

PROMPTS = ["请用三句话解释量子纠缠，要求通俗易懂", "Write a short poem about the sea.", "你好", "What is a KV cache?",
           "Explain recursion to a child.", "列出三种水果。"]
MIB = 2**20


def rss(pid: int) -> tuple[int, int]:
    """(RSS of the app process, RSS of all its descendants: vLLM's engine core and workers)."""
    proc = psutil.Process(pid)
    app = proc.memory_info().rss
    engine = 0
    for child in proc.children(recursive=True):
        try:
            engine += child.memory_info().rss
        except psutil.NoSuchProcess:
            pass
    return app, engine


def db_sizes(data_dir: Path) -> tuple[int, int, int]:
    sizes = []
    for suffix in ("", "-wal", "-shm"):
        path = data_dir / f"chats.db{suffix}"
        sizes.append(path.stat().st_size if path.exists() else 0)
    return tuple(sizes)  # type: ignore[return-value]


def db_counts(db: Path) -> tuple[int, int]:
    """(chats, messages) stored, read from the file (read-only)."""
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10) as conn:
        chats = conn.execute("select count(*) from threads").fetchone()[0]
        messages = conn.execute("select count(*) from steps where type like '%message'").fetchone()[0]
    return chats, messages


def cookie_header(client: httpx.Client) -> str:
    """The local user's login cookie, as the page gets it with its HTML (app/ui/chat_history.py LocalUserCookie)."""
    response = client.get("/")
    response.raise_for_status()
    cookies = "; ".join(f"{name}={value}" for name, value in client.cookies.items() if name.startswith("access_token"))
    if not cookies:
        raise RuntimeError("GET / set no access_token cookie (is history on?)")
    return cookies


class ChatFailed(Exception):
    pass


async def one_chat(url: str, cookie: str, rng: random.Random, stats: dict, clear_session: bool = False) -> None:
    thread_id = str(uuid.uuid4())
    events: list = []
    sio = socketio.AsyncClient(reconnection=False)
    for name in ("new_message", "update_message", "task_end", "chat_settings"):
        sio.on(name, (lambda n: lambda data=None: events.append((n, data)))(name))
    turns = rng.randint(1, 3)
    max_tokens = rng.randint(16, 64)
    done_turns = 0
    try:
        await sio.connect(url, socketio_path="/ws/socket.io", transports=["websocket"], headers={"Cookie": cookie},
                          auth={"sessionId": str(uuid.uuid4()), "threadId": thread_id, "clientType": "webapp",
                                "userEnv": "{}"}, wait_timeout=30)
        await sio.emit("connection_successful")
        # The settings panel comes with the chat's start; send it back with this chat's answer length, as the
        # page does when the user changes the slider.
        inputs = await _wait_for(events, 0, lambda e: e[0] == "chat_settings", 60, "no chat settings")
        values = {w["id"]: w.get("initial") for w in inputs[1]}
        values["max_tokens"] = max_tokens
        await sio.emit("chat_settings_change", values)
        for _turn in range(turns):
            start = len(events)
            t0 = time.perf_counter()
            await sio.emit("client_message", {"message": {
                "id": str(uuid.uuid4()), "threadId": thread_id, "type": "user_message", "name": "local",
                "output": rng.choice(PROMPTS),
                "createdAt": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"},
                "fileReferences": []})
            await _wait_for(events, start, lambda e: e[0] in ("new_message", "update_message")
                            and ((e[1] or {}).get("metadata") or {}).get("footer"), 180, "no final answer")
            await _wait_for(events, start, lambda e: e[0] == "task_end", 60, "no task_end")
            notices = [e[1].get("output") for e in events[start:] if e[0] == "new_message"
                       and ((e[1] or {}).get("metadata") or {}).get("kind") == "notice"]
            if notices:
                raise ChatFailed(f"notice: {notices[0]!r}"[:300])
            stats["latency"].append(time.perf_counter() - t0)
            stats["turns_ok"] += 1
            done_turns += 1
        stats["chats_ok"] += 1
    except Exception as err:  # every failure counts; the run fails on any
        stats["chats_failed"] += 1
        stats["errors"].append(f"chat {thread_id} turn {done_turns + 1}: {type(err).__name__}: {err}"[:400])
    finally:
        if sio.connected:
            if clear_session:  # as the page does on "New chat"; without it, as a closed tab
                await sio.emit("clear_session")
            await sio.disconnect()


async def _wait_for(events: list, start: int, test, timeout: float, what: str):
    deadline = time.time() + timeout
    while time.time() < deadline:
        for event in events[start:]:
            if test(event):
                return event
        await asyncio.sleep(0.05)
    raise ChatFailed(f"{what} within {timeout:.0f} s")


async def sample(pid: int, data_dir: Path, every: float, t0: float, stats: dict, rows: list, stop: asyncio.Event):
    while True:
        app, engine = rss(pid)
        main_db, wal, shm = db_sizes(data_dir)
        chats, messages = await asyncio.to_thread(db_counts, data_dir / "chats.db")
        rows.append({"t_min": (time.time() - t0) / 60, "chats_ok": stats["chats_ok"], "failed": stats["chats_failed"],
                     "db_chats": chats, "db_messages": messages, "db": main_db, "wal": wal, "shm": shm,
                     "app": app, "engine": engine})
        r = rows[-1]
        print(f"  t={r['t_min']:.1f} min  chats ok {r['chats_ok']}  failed {r['failed']}  db {chats} chats/"
              f"{messages} msgs  {(main_db + wal + shm) / MIB:.2f} MiB  RSS app {app / MIB:.0f} engine "
              f"{engine / MIB:.0f} MiB", flush=True)
        try:
            await asyncio.wait_for(stop.wait(), every)
            return
        except asyncio.TimeoutError:
            pass


async def soak(url: str, cookie: str, pid: int, data_dir: Path, minutes: float, concurrency: int,
               every: float, clear_session: bool = False) -> tuple[dict, list]:
    stats = {"chats_ok": 0, "chats_failed": 0, "turns_ok": 0, "latency": [], "errors": []}
    rows: list = []
    rng = random.Random(0)
    stop = asyncio.Event()
    t0 = time.time()
    sampler = asyncio.create_task(sample(pid, data_dir, every, t0, stats, rows, stop))
    end = t0 + minutes * 60

    async def worker() -> None:
        while time.time() < end:
            await one_chat(url, cookie, rng, stats, clear_session)

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    stop.set()
    await sampler
    # The last sample, after the last chat (the sampler may have just taken one)
    if time.time() - t0 - rows[-1]["t_min"] * 60 > 5:
        await sample(pid, data_dir, every, t0, stats, rows, stop)
    return stats, rows


def soak_table(rows: list) -> str:
    lines = ["| t (min) | chats done | failed | chats in db | messages in db | chats.db MiB | -wal MiB | -shm MiB "
             "| db total MiB | RSS app MiB | RSS engine MiB | RSS total MiB |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['t_min']:.1f} | {r['chats_ok']} | {r['failed']} | {r['db_chats']} | {r['db_messages']} "
                     f"| {r['db'] / MIB:.2f} | {r['wal'] / MIB:.2f} | {r['shm'] / MIB:.3f} "
                     f"| {(r['db'] + r['wal'] + r['shm']) / MIB:.2f} | {r['app'] / MIB:.0f} "
                     f"| {r['engine'] / MIB:.0f} | {(r['app'] + r['engine']) / MIB:.0f} |")
    return "\n".join(lines)


async def store_long_chat(data_dir: Path, pairs: int) -> tuple[str, str, float]:
    """Write a chat of 2 * pairs messages through the app's data layer (its writer, one write per step, as the
    app stores them), copied from the soak's real turns; returns (thread id, last message's marker, seconds)."""
    from app.history import HistoryStore
    from app.history.database import DatabaseLocation
    from app.ui.chat_history import LOCAL_USER

    db = data_dir / "chats.db"
    store = HistoryStore.open(DatabaseLocation(f"sqlite+aiosqlite:///{db}", db))
    layer = store.layer
    try:
        user = await layer.get_user(LOCAL_USER)
        if user is None:
            raise RuntimeError("the local user is not in the database (did the soak store any chat?)")
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
            real_ids = [row[0] for row in conn.execute(
                "select id from threads where user_identifier = ? order by created_at limit 50", (LOCAL_USER,))]
        # As the app stores a turn: the user's message, Chainlit's "on_message" run step under it, the answer
        # under the run (the page nests the answer by these parent ids). Copied from real soak turns.
        turns = []
        for tid in real_ids:
            by_id = {s["id"]: s for s in ((await layer.get_thread(tid)) or {}).get("steps", [])}
            for answer in by_id.values():
                run = by_id.get(answer.get("parentId") or "")
                asked = by_id.get((run or {}).get("parentId") or "")
                if answer.get("type") == "assistant_message" and (answer.get("metadata") or {}).get("footer") \
                        and run and run.get("type") == "run" and asked and asked.get("type") == "user_message":
                    turns.append((asked, run, answer))
        if not turns:
            raise RuntimeError("no stored turns (user message, run, answer) to copy from the soak")
        thread_id = str(uuid.uuid4())
        marker = f"last-message-{uuid.uuid4().hex[:12]}"
        base = datetime.now(timezone.utc) - timedelta(hours=2)
        t0 = time.perf_counter()
        await layer.update_thread(thread_id, name=f"{2 * pairs} messages", user_id=user.id)
        for i in range(pairs):
            parent = None
            for j, template in enumerate(turns[i % len(turns)]):
                step = copy.deepcopy(template)
                when = (base + timedelta(seconds=10 * i, milliseconds=j)).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
                step.update(id=str(uuid.uuid4()), threadId=thread_id, parentId=parent, createdAt=when, start=when,
                            end=when)
                step.pop("feedback", None)
                parent = step["id"]
                if j == 0:
                    step["output"] = f"{step.get('output', '')} (#{i + 1})"
                elif j == 2 and i == pairs - 1:
                    step["output"] = f"{marker}\n\n{step.get('output', '')}"
                await layer.store_now(step, user.id)
        await layer.writer.drain(60)
        seconds = time.perf_counter() - t0
    finally:
        await store.close()
    return thread_id, marker, seconds


def open_in_chromium(url: str, thread_id: str, marker: str, runs: int) -> list[dict]:
    from playwright.sync_api import sync_playwright

    results = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        try:
            for _ in range(runs):
                context = browser.new_context(viewport={"width": 1280, "height": 900})
                page = context.new_page()
                t0 = time.perf_counter()
                page.goto(f"{url}/thread/{thread_id}")
                last = page.get_by_text(marker)
                last.wait_for(state="visible", timeout=120_000)
                seconds = time.perf_counter() - t0
                in_view = last.evaluate("e => { const r = e.getBoundingClientRect(); "
                                        "return r.bottom > 0 && r.top < window.innerHeight; }")
                # The user messages end in "(#n)": how many of them the page holds once the last one shows
                users = page.get_by_text(re.compile(r"\(#\d+\)$")).count()
                results.append({"seconds": seconds, "in_view": in_view, "user_messages": users})
                print(f"  opened in {seconds:.2f} s (last message in view: {in_view}, user messages on the page: "
                      f"{users})", flush=True)
                context.close()
        finally:
            browser.close()
    return results


def positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more seconds, not {value}")
    return value


def chainlit_root_with_session_timeout(tmp: Path, seconds: int) -> Path:
    """A copy of the project's Chainlit files (.chainlit/, chainlit*.md) with session_timeout = SECONDS."""
    root = tmp / "chainlit-root"
    shutil.copytree(ROOT / ".chainlit", root / ".chainlit")
    for md in ROOT.glob("chainlit*.md"):
        shutil.copy(md, root / md.name)
    config = root / ".chainlit" / "config.toml"
    text, found = re.subn(r"(?m)^session_timeout = \d+$", f"session_timeout = {seconds}", config.read_text())
    if found != 1:
        raise RuntimeError(f"no 'session_timeout = N' line in {config}")
    config.write_text(text)
    return root


def heap_watch_env(heap_dir: Path, every: float) -> dict[str, str]:
    """The environment that makes the app and its spawned engine processes sample their heap (bench/heap_watch/)
    into ``heap_dir`` every ``every`` seconds."""
    heap_dir.mkdir()
    return {"ERNIE_CHAT_HEAP_WATCH": str(heap_dir), "ERNIE_CHAT_HEAP_WATCH_EVERY": str(every),
            "ERNIE_CHAT_HEAP_WATCH_T0": str(time.time()),
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "bench" / "heap_watch"),
                                                        os.environ.get("PYTHONPATH")]))}


def heap_table(folder: Path, every: float) -> str:
    """One block per process: its first sample, one near every 10 minutes from launch, and its last."""
    lines = []
    for path in sorted(folder.glob("*.jsonl")):
        samples = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        if not samples:
            continue
        shown = [s for i, s in enumerate(samples) if i in (0, len(samples) - 1) or s["t"] % 600 < every]
        mib = lambda s, key: f"{s[key] / MIB:.1f}" if key in s else "-"  # noqa: E731
        lines += [f"\n{path.stem} (t: minutes from launch)\n",
                  "| t (min) | RSS MiB | malloc in use MiB | malloc free MiB | Python blocks | gc objects | sessions "
                  "| chat contexts |", "|---|---|---|---|---|---|---|---|"]
        for s in shown:
            lines.append(f"| {s['t'] / 60:.0f} | {mib(s, 'rss')} | {mib(s, 'malloc_in_use')} | "
                         f"{mib(s, 'malloc_free')} | {s['py_blocks']:,} | {s['gc_objects']:,} | "
                         f"{s.get('sessions', '-')} | {s.get('chat_contexts', '-')} |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10, help="minutes of soak")
    parser.add_argument("--concurrency", type=int, default=2, help="chats in flight at once")
    parser.add_argument("--sample-every", type=float, default=60, help="seconds between samples")
    parser.add_argument("--pairs", type=int, default=250, help="user+assistant pairs in the long chat")
    parser.add_argument("--open-runs", type=int, default=3)
    parser.add_argument("--baseline-pairs", type=int, default=10,
                        help="a short chat opened the same way in the same run, to compare with")
    parser.add_argument("--clear-session", action="store_true",
                        help="end each chat as the page's 'New chat' does (emit clear_session, then disconnect); "
                             "by default it just disconnects, as a closed tab, and Chainlit keeps the session "
                             "for session_timeout (600 s in .chainlit/config.toml) in case the tab comes back")
    parser.add_argument("--session-timeout", type=positive_int, metavar="SECONDS",
                        help="Chainlit's session window for this run (the project's config says 600 s)")
    parser.add_argument("--heap-watch", action="store_true",
                        help="sample the heap inside the app and vLLM's processes (bench/heap_watch/)")
    args = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="history-load-"))
    data_dir = tmp / "data"
    data_dir.mkdir()
    model = build(tmp / "model")
    env: dict[str, str] = {}
    if args.session_timeout is not None:
        env["CHAINLIT_APP_ROOT"] = str(chainlit_root_with_session_timeout(tmp, args.session_timeout))
    heap_dir = tmp / "heap"
    if args.heap_watch:
        env.update(heap_watch_env(heap_dir, args.sample_every))
    started = time.time()
    with running_app(model, tmp, "--data-dir", str(data_dir), env=env) as app:
        print(f"app ready after {time.time() - started:.1f}s; data dir {data_dir}", flush=True)
        with httpx.Client(base_url=app.url, timeout=30) as client:
            cookie = cookie_header(client)
        print(f"soak: {args.minutes} min, {args.concurrency} chats at once, sample every {args.sample_every:.0f} s",
              flush=True)
        stats, rows = asyncio.run(soak(app.url, cookie, app.proc.pid, data_dir, args.minutes, args.concurrency,
                                       args.sample_every, args.clear_session))
        print(f"storing a chat of {2 * args.pairs} messages through the data layer", flush=True)
        thread_id, marker, write_s = asyncio.run(store_long_chat(data_dir, args.pairs))
        with sqlite3.connect(f"file:{data_dir / 'chats.db'}?mode=ro", uri=True) as conn:
            stored = conn.execute("select count(*) from steps where thread_id = ? and type like '%message'",
                                  (thread_id,)).fetchone()[0]
        print(f"  {stored} messages stored in {write_s:.1f} s; opening /thread/{thread_id} in Chromium", flush=True)
        short_id, short_marker, _ = asyncio.run(store_long_chat(data_dir, args.baseline_pairs))
        baseline, opens = [], []
        for _ in range(args.open_runs):  # interleaved: the machine's load changes from minute to minute
            baseline += open_in_chromium(app.url, short_id, short_marker, 1)
            opens += open_in_chromium(app.url, thread_id, marker, 1)
        final_sizes = db_sizes(data_dir)

    lat = sorted(stats["latency"]) or [0.0]
    print("\n## Soak\n")
    print(soak_table(rows))
    print(f"\nchats ok {stats['chats_ok']}, failed {stats['chats_failed']}; turns ok {stats['turns_ok']}; "
          f"turn latency p50 {statistics.median(lat):.2f} s, p95 {lat[max(0, int(len(lat) * 0.95) - 1)]:.2f} s; "
          f"database after the long chat: {sum(final_sizes) / MIB:.2f} MiB")
    print("\n## Open a chat of 500 messages\n")
    print(f"{stored} messages (written through the data layer in {write_s:.1f} s)\n")
    print(f"| run | {2 * args.baseline_pairs} messages: s to last message visible | {stored} messages: s to last "
          "message visible | last message in view | user messages on the page |")
    print("|---|---|---|---|---|")
    for n, (b, r) in enumerate(zip(baseline, opens, strict=True), 1):
        print(f"| {n} | {b['seconds']:.2f} | {r['seconds']:.2f} | {r['in_view']} | {r['user_messages']} |")
    med = lambda rs: statistics.median(r["seconds"] for r in rs)  # noqa: E731
    print(f"| **median** | **{med(baseline):.2f}** | **{med(opens):.2f}** | | |")
    if args.heap_watch:
        print("\n## Heap inside each process (bench/heap_watch/)")
        print(heap_table(heap_dir, args.sample_every))
    for err in stats["errors"][:10]:
        print("ERROR", err)
    failed = stats["chats_failed"] > 0 or stats["chats_ok"] == 0 or stored != 2 * args.pairs
    print("HISTORY LOAD FAILED" if failed else "HISTORY LOAD PASSED")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
