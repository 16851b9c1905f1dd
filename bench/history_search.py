"""Sidebar search over 1,000 chats (issue 12: < 100 ms), on SQLite and optionally a real PostgreSQL server.

    python bench/history_search.py [--chats 1000] [--messages 20] [--runs 50] [--postgres]

Fills a fresh database through the app's own data layer (the same writes the UI makes), then times
``list_threads`` as the sidebar calls it (first page of 20): the plain list (the baseline, what opening the
sidebar costs) and searches for an English word, a Chinese word, and a word found nowhere (the worst
case: every message is read); then searches of several words (issue 24: every word must occur in the chat,
in any order), up to the cap of 16 words. Each search is also timed, in the same run, as the app ran it
before issue 24 (the whole text one substring) and, for one word, as the first version did (LIKE). Prints a
Markdown table for docs/benchmarks.md.
"""
from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from chainlit.context import init_http_context  # noqa: E402
from chainlit.types import Pagination, ThreadFilter  # noqa: E402
from chainlit.user import User  # noqa: E402

from app.history import HistoryStore, prepare_database  # noqa: E402
from app.history.database import DatabaseLocation  # noqa: E402

WORDS_EN = ["weather", "river", "engine", "quantum", "garden", "history", "window", "market", "letter", "planet",
            "music", "bridge", "summer", "coffee", "station", "mountain"]
WORDS_ZH = ["天气", "河流", "引擎", "花园", "历史", "窗户", "市场", "信件", "行星", "音乐", "桥梁", "夏天", "咖啡",
            "车站", "山峰"]
NEEDLE_EN, NEEDLE_ZH = "zeppelin", "量子纠缠"  # each in 1% of the chats, in a late message, never in a title
NEEDLE_FIRST = "dirigible"  # in the first message of those same chats
ABSENT = "xylophone"  # in no chat


def sentence(rng: random.Random) -> str:
    words = [rng.choice(WORDS_EN) for _ in range(20)] + [rng.choice(WORDS_ZH) for _ in range(15)]
    rng.shuffle(words)
    return " ".join(words)  # ~200 characters, like a short chat message


async def fill(store: HistoryStore, chats: int, messages: int, rng: random.Random) -> str:
    user = await store.layer.create_user(User(identifier="bench"))
    init_http_context(user=user)
    for n in range(chats):
        thread_id = str(uuid.uuid4())
        for m in range(messages):
            text = sentence(rng)
            if m == messages - 1 and n % 100 == 7:
                text += f" {NEEDLE_EN} {NEEDLE_ZH}"
            if m == 0 and n % 100 == 7:
                text += f" {NEEDLE_FIRST}"
            kind = "user_message" if m % 2 == 0 else "assistant_message"
            store.layer.writer.submit(store.layer._step_write({
                "id": str(uuid.uuid4()), "threadId": thread_id, "type": kind, "name": kind, "output": text,
                "createdAt": f"2026-12-03T10:{m // 60:02d}:{m % 60:02d}.000Z"}), "bench")
        await store.layer.update_thread(thread_id, name=f"chat {n}", user_id=user.id)
        if n % 100 == 99:  # the writer keeps at most 10,000 waiting writes; past that it counts them as lost
            await store.layer.writer.drain(600)
    await store.layer.writer.drain(600)
    from sqlalchemy import func, select

    from app.history.schema import steps

    async with store.layer.engine.connect() as conn:
        stored = (await conn.execute(select(func.count()).select_from(steps))).scalar()
    if stored != chats * messages:
        raise SystemExit(f"only {stored:,} of {chats * messages:,} messages were stored")
    return user.id


async def timed(store: HistoryStore, user_id: str, search: str | None, runs: int) -> tuple[list[float], int]:
    found = 0
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        page = await store.layer.list_threads(Pagination(first=20), ThreadFilter(userId=user_id, search=search))
        times.append((time.perf_counter() - start) * 1000)
        found = len(page.data)
    return times, found


async def timed_like(store: HistoryStore, user_id: str, search: str, runs: int) -> tuple[list[float], int]:
    """The first version's query, for comparison in the same run: lower(text) LIKE '%words%'."""
    from sqlalchemy import and_, exists, func, or_, select

    from app.history.data_layer import _like_pattern
    from app.history.schema import steps, threads

    pattern = _like_pattern(search.lower())
    query = (select(threads).where(threads.c.user_id == user_id, or_(
        func.lower(threads.c.name).like(pattern, escape="\\"),
        exists().where(and_(steps.c.thread_id == threads.c.id,
                            func.lower(steps.c.search_text).like(pattern, escape="\\")))))
             .order_by(threads.c.updated_at.desc(), threads.c.id.desc()).limit(21))
    times, found = [], 0
    for _ in range(runs):
        start = time.perf_counter()
        async with store.layer.engine.connect() as conn:
            found = len((await conn.execute(query)).all()[:20])
        times.append((time.perf_counter() - start) * 1000)
    return times, found


async def timed_phrase(store: HistoryStore, user_id: str, search: str, runs: int) -> tuple[list[float], int]:
    """The app before issue 24, for comparison in the same run: the same call, with the whole search text as
    one substring (found only as typed: "keeper lighthouse" missed a chat about a lighthouse keeper)."""
    from unittest import mock

    with mock.patch("app.history.data_layer._search_words", lambda text: [text.strip().lower()]):
        return await timed(store, user_id, search, runs)


# (what is searched, the search); None: the plain list
SEARCHES = [
    ("no search (baseline: the sidebar's first page)", None),
    (f"English word in 1% of chats ({NEEDLE_EN})", NEEDLE_EN),
    (f"Chinese word in 1% of chats ({NEEDLE_ZH})", NEEDLE_ZH),
    ("English word in every chat (weather)", "weather"),
    (f"a word in no chat (worst case: every message read) ({ABSENT})", ABSENT),
    (f"2 words in 1% of chats, reverse order, one message ({NEEDLE_ZH} {NEEDLE_EN})", f"{NEEDLE_ZH} {NEEDLE_EN}"),
    (f"2 words in 1% of chats, first and last message ({NEEDLE_EN} {NEEDLE_FIRST})", f"{NEEDLE_EN} {NEEDLE_FIRST}"),
    ("2 words in every chat (river weather)", "river weather"),
    (f"a word in every chat, a word in no chat (weather {ABSENT})", f"weather {ABSENT}"),
    (f"16 words (the cap): 15 in every chat, 1 in no chat ({ABSENT}, the longest: looked for first)",
     " ".join(WORDS_EN[:8] + WORDS_ZH[:7] + [ABSENT])),
    ("16 words (the cap): 15 in every chat, 1 in no chat (短, the shortest: looked for last)",
     " ".join(WORDS_EN[:8] + WORDS_ZH[:6] + ["短"] + WORDS_ZH[6:7])),
]


async def bench(location: DatabaseLocation, label: str, args) -> list[str]:
    await prepare_database(location)
    store = HistoryStore.open(location)
    try:
        started = time.perf_counter()
        user_id = await fill(store, args.chats, args.messages, random.Random(12))
        filled = time.perf_counter() - started
        rows = []
        for name, search in SEARCHES:
            ways = [("all words (app)", timed)]
            if search:
                ways.append(("one phrase (before issue 24)", timed_phrase))
            if search and len(search.split()) == 1:
                ways.append(("LIKE (first version)", timed_like))
            for way, measure in ways:
                await measure(store, user_id, search, 3)  # warm the cache, as a second keystroke would
                times, found = await measure(store, user_id, search, args.runs)
                times.sort()
                rows.append(f"| {label} | {name} | {way} | {found} | {statistics.median(times):.1f} | "
                            f"{times[int(len(times) * 0.95) - 1]:.1f} | {times[-1]:.1f} |")
        size = location.sqlite_file.stat().st_size / 2**20 if location.sqlite_file else None
        print(f"{label}: filled {args.chats} chats x {args.messages} messages in {filled:.1f} s"
              + (f"; database {size:.1f} MiB" if size else ""), file=sys.stderr)
        return rows
    finally:
        await store.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chats", type=int, default=1000)
    parser.add_argument("--messages", type=int, default=20)
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--postgres", action="store_true", help="Also on a PostgreSQL server (tests/postgres.py).")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "chats.db"
        rows += asyncio.run(bench(DatabaseLocation(f"sqlite+aiosqlite:///{path}", path), "SQLite", args))
    if args.postgres:
        from tests.postgres import create_database, postgres_server

        with postgres_server() as base:
            url = asyncio.run(create_database(base))
            rows += asyncio.run(bench(DatabaseLocation(url), "PostgreSQL 15", args))
    print("| database | search | query | chats found (page of 20) | median ms | p95 ms | max ms |")
    print("|---|---|---|---|---|---|---|")
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
