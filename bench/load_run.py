"""Load run (issue 36's done-when): chat sessions against the real app for some minutes, first without and then with
one hostile session, in one invocation; do the others' answers slow down, is a write lost, does the memory come back?

    python -m bench.load_run [--sessions 20] [--minutes 5] [--settle 120] [--out FILE.json]

Builds the tiny model (tests/tiny_model.py) and launches the app (LaunchedApp, tests/support/) with a login per
session. ``--sessions`` - 1 users chat through Chainlit's socket as the page does, one tab each: a question, its
answer, a pause of 1-3 s; every third question carries a small file. In the second phase the last session is
hostile and does all of this at once, for the whole phase: metadata floods (messages whose metadata carries 20,000
"documents", N1/N12), upload floods (24 files of 1 MiB at once to its tab, N7), a login flood (wrong secrets from 20
addresses, four at a time each, N3), and slow files (messages with 5 PDFs of 300 pages, N6/N9). Reported per phase:
the others' answer latency (sent -> answer finished, median and p95), the writes lost (questions and finished answers
that chats.db does not hold as they were sent and shown), and the app process's RSS at start and ``--settle`` s
after the last session closed. The JSON report goes to ``--out`` (and stdout); a Markdown table is printed last.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import random
import re
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import Optional

import httpx
import psutil

from bench.documents import make_pdf
from bench.history_load import chainlit_root_with_session_timeout, heap_table, heap_watch_env
from bench.soak import tree_rss
from tests.support.app_process import LaunchedApp
from tests.support.chat_socket import socket_connect, upload_request

MIB = 2**20
SECRET = "a-load-run-secret-{}"
HOSTILE = "mallory"
FLOOD_DOCUMENTS = 20_000  # the attack pass's metadata flood (N1)
STATS = re.compile(r"`prompt [\d,]+ tokens`")  # the stats line under a finished answer, as the socket carries it


def percentile(values: list[float], share: float) -> Optional[float]:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * share))]


class Tab:
    """One chat tab of one user: Chainlit's socket, its own chat, and what it sent and was shown."""

    def __init__(self, app: LaunchedApp, client: httpx.AsyncClient) -> None:
        self.app, self.client = app, client
        self.thread, self.session = str(uuid.uuid4()), str(uuid.uuid4())
        self.events: list = []
        self.sio = None
        self.sent: dict[str, str] = {}  # question id -> text
        self.finished: dict[str, str] = {}  # answer id -> its shown text, once its stats line came

    async def open(self) -> Tab:
        self.sio = await socket_connect(self.app, self.client, self.thread, self.events, session_id=self.session)
        return self

    async def close(self) -> None:
        if self.sio is not None:
            await self.sio.disconnect()

    def _answers(self) -> None:
        for name, data in self.events:
            if (name in ("new_message", "update_message") and isinstance(data, dict)
                    and data.get("type") == "assistant_message" and STATS.search(data.get("output") or "")):
                self.finished[data["id"]] = data["output"]
        self.events.clear()

    async def upload(self, name: str, body: bytes) -> httpx.Response:
        return await self.client.post(**upload_request(self.session, name, body))

    async def send(self, text: str, files: tuple[tuple[str, bytes], ...] = (), metadata: Optional[dict] = None,
                   wait_s: float = 300) -> Optional[float]:
        """Send a question (with ``files`` uploaded first); seconds until its answer finished (None: not in time)."""
        references = []
        for name, body in files:
            answer = await self.upload(name, body)
            if answer.status_code == 200:
                references.append({"id": answer.json()["id"]})
        self._answers()
        before = len(self.finished)
        message_id = str(uuid.uuid4())
        started = time.monotonic()
        await self.sio.emit("client_message", {"message": {
            "id": message_id, "threadId": self.thread, "type": "user_message", "name": "user", "output": text,
            "createdAt": time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime()),
            "metadata": metadata or {"location": self.app.url}}, "fileReferences": references})
        self.sent[message_id] = text
        while time.monotonic() - started < wait_s:
            await asyncio.sleep(0.05)
            self._answers()
            if len(self.finished) > before:
                return time.monotonic() - started
        return None


async def login(app: LaunchedApp, user: str) -> httpx.AsyncClient:
    client = httpx.AsyncClient(base_url=app.url, timeout=300)
    answer = await client.post("/login", data={"username": user, "password": SECRET.format(user)})
    assert answer.status_code == 200, answer.text
    return client


async def chat(tab: Tab, number: int, stop: asyncio.Event, latencies: list[float], missed: list[str],
               with_file: list[float]) -> None:
    """A user chatting until ``stop``: questions with their answers, a small file with every third."""
    rng = random.Random(number)
    count = 0
    while not stop.is_set():
        count += 1
        text = f"session {number} question {count} {uuid.uuid4().hex[:8]}: what is a KV cache?"
        files = ((f"notes-{count}.txt", f"note {count} of session {number}: the code is {rng.randint(0, 9999)}"
                  .encode() * 20),) if count % 3 == 0 else ()
        seconds = await tab.send(text, files)
        if seconds is None:
            missed.append(text)
        else:
            latencies.append(seconds)
            if files:
                with_file.append(seconds)  # these wait for a document reader too
        await asyncio.sleep(rng.uniform(1, 3))


async def metadata_flood(tab: Tab, stop: asyncio.Event) -> None:
    documents = [{"name": f"d{i}.txt", "kind": "text", "text": "x"} for i in range(FLOOD_DOCUMENTS)]
    while not stop.is_set():
        await tab.send("flood", metadata={"documents": documents, "kind": "answer"}, wait_s=30)


async def upload_flood(tab: Tab, stop: asyncio.Event, counts: dict) -> None:
    body = b"x" * MIB
    while not stop.is_set():
        answers = await asyncio.gather(*(tab.upload(f"flood-{n}.txt", body) for n in range(24)),
                                       return_exceptions=True)
        for answer in answers:
            key = str(answer.status_code) if isinstance(answer, httpx.Response) else type(answer).__name__
            counts[key] = counts.get(key, 0) + 1
        await asyncio.sleep(1)


async def login_flood(app: LaunchedApp, stop: asyncio.Event, counts: dict) -> None:
    async def one_address(address: str) -> None:
        async with httpx.AsyncClient(base_url=app.url, timeout=120,
                                     transport=httpx.AsyncHTTPTransport(local_address=address)) as client:
            async def worker() -> None:
                while not stop.is_set():
                    try:
                        status = str((await client.post("/login", data={"username": "user01",
                                                                        "password": "not-the-secret"})).status_code)
                    except httpx.HTTPError as err:
                        status = type(err).__name__
                    counts[status] = counts.get(status, 0) + 1

            await asyncio.gather(*(worker() for _ in range(4)))

    await asyncio.gather(*(one_address(f"127.0.2.{i}") for i in range(1, 21)))


async def slow_files(app: LaunchedApp, client: httpx.AsyncClient, pdf: bytes, stop: asyncio.Event,
                     tabs: list[Tab]) -> None:
    """Messages with 5 large PDFs, each from a new tab (a tab holds 50 files), closed after its answer."""
    while not stop.is_set():
        tab = await Tab(app, client).open()
        tabs.append(tab)
        try:
            await tab.send("summarise these", tuple((f"big-{n}.pdf", pdf) for n in range(5)), wait_s=180)
        finally:
            await tab.close()


async def hostile(url: str, seconds: float, pdf: bytes) -> dict:
    """The hostile session's four attacks at once for ``seconds``; what it sent and what it got."""
    app = SimpleNamespace(url=url)
    mallory = await login(app, HOSTILE)
    stop = asyncio.Event()
    flood_tab, upload_tab = await Tab(app, mallory).open(), await Tab(app, mallory).open()
    tabs = [flood_tab, upload_tab]
    attack: dict = {"uploads": {}, "logins": {}}
    tasks = [asyncio.create_task(metadata_flood(flood_tab, stop)),
             asyncio.create_task(upload_flood(upload_tab, stop, attack["uploads"])),
             asyncio.create_task(login_flood(app, stop, attack["logins"])),
             asyncio.create_task(slow_files(app, mallory, pdf, stop, tabs))]
    await asyncio.sleep(seconds)
    stop.set()
    await asyncio.gather(*tasks, return_exceptions=True)
    for tab in tabs:
        await tab.close()
    await mallory.aclose()
    attack["messages"] = sum(len(tab.sent) for tab in tabs)
    attack["slow_file_messages"] = len(tabs) - 2
    return attack


def hostile_process(url: str, seconds: float, pdf_file: str, out: str) -> None:
    """The hostile session in a process of its own, so that its floods do not take the measuring clients' event
    loop (the answers' times would then count the client's own waiting)."""
    attack = asyncio.run(hostile(url, seconds, Path(pdf_file).read_bytes()))
    used = psutil.Process().cpu_times()
    attack["client_cpu_s"] = round(used.user + used.system, 1)  # on the same cores as the app, as a local attacker
    Path(out).write_text(json.dumps(attack))


def cpu_seconds(pid: int) -> dict[str, float]:
    """CPU seconds the app process and its children (the engine, document readers) have used so far."""
    app = psutil.Process(pid)
    children = 0.0
    for child in app.children(recursive=True):
        try:
            times = child.cpu_times()
            children += times.user + times.system
        except psutil.Error:
            pass
    own = app.cpu_times()  # children_*: those that ended and were waited for (document readers)
    return {"app": own.user + own.system, "children": children + own.children_user + own.children_system}


async def phase(app: LaunchedApp, users: list[str], seconds: float, pdf_file: Optional[Path]) -> dict:
    """The users chatting for ``seconds``; with ``pdf_file``, the hostile session attacking meanwhile."""
    clients = [await login(app, user) for user in users]
    tabs = [await Tab(app, client).open() for client in clients]
    stop = asyncio.Event()
    latencies: list[float] = []
    missed: list[str] = []
    attacker = None
    if pdf_file is not None:
        out = pdf_file.with_suffix(".attack.json")
        attacker = multiprocessing.get_context("spawn").Process(
            target=hostile_process, args=(app.url, seconds, str(pdf_file), str(out)), name="hostile")
        attacker.start()
    with_file: list[float] = []
    tasks = [asyncio.create_task(chat(tab, n + 1, stop, latencies, missed, with_file)) for n, tab in enumerate(tabs)]
    cpu_before = cpu_seconds(app.proc.pid)
    await asyncio.sleep(seconds)
    cpu = {k: round(v - cpu_before[k], 1) for k, v in cpu_seconds(app.proc.pid).items()}
    stop.set()
    await asyncio.gather(*tasks, return_exceptions=True)
    for tab in tabs:
        await tab.close()
    for client in clients:
        await client.aclose()
    for tab in tabs:
        tab._answers()
    attack = {}
    if attacker is not None:
        await asyncio.to_thread(attacker.join, 600)
        attack = json.loads(out.read_text()) if out.exists() else {"error": f"exit {attacker.exitcode}"}
    return {"hostile": attacker is not None, "seconds": seconds, "answers": len(latencies),
            "not_answered_in_time": len(missed),
            "latency_median_s": round(statistics.median(latencies), 2) if latencies else None,
            "latency_p95_s": round(percentile(latencies, 0.95), 2) if latencies else None,
            "with_file_median_s": round(statistics.median(with_file), 2) if with_file else None,
            "with_file_p95_s": round(percentile(with_file, 0.95), 2) if with_file else None,
            "cpu_s": cpu, "attack": attack, "_tabs": tabs}


def lost_writes(db: Path, tabs: list[Tab]) -> dict:
    """What the sessions sent and were shown that chats.db does not hold as it was."""
    with sqlite3.connect(db) as conn:
        stored = {row[0]: json.loads(row[1]).get("output") for row in conn.execute("select id, data from steps")}
    questions = {i: text for tab in tabs for i, text in tab.sent.items()}
    answers = {i: text for tab in tabs for i, text in tab.finished.items()}
    return {"questions_sent": len(questions), "questions_lost": sum(1 for i in questions if i not in stored),
            "questions_changed": sum(1 for i, text in questions.items() if i in stored and stored[i] != text),
            "answers_shown": len(answers), "answers_lost": sum(1 for i in answers if i not in stored),
            "answers_changed": sum(1 for i, text in answers.items() if i in stored and stored[i] != text)}


def app_rss(pid: int) -> int:
    return psutil.Process(pid).memory_info().rss


async def sample(pid: int, timeline: list, started: float) -> None:
    while True:
        timeline.append({"t_s": round(time.monotonic() - started), "app_mib": round(app_rss(pid) / MIB),
                         "tree_mib": round(tree_rss(pid) / MIB)})
        await asyncio.sleep(10)


async def run(app: LaunchedApp, users: list[str], seconds: float, settle: float, pdf_file: Path) -> dict:
    # Warm-up, not counted: every session's first question (with a file), so lazy imports and first-use caches
    # are in the start's figure, as in a running app.
    clients = [await login(app, user) for user in users]
    warm = [await Tab(app, client).open() for client in clients]
    await asyncio.gather(*(tab.send("hello", (("warm.txt", b"a warm-up file"),)) for tab in warm))
    for tab in warm:
        await tab.close()
    for client in clients:
        await client.aclose()
    await asyncio.sleep(10)
    timeline: list = []
    started = time.monotonic()
    sampler = asyncio.create_task(sample(app.proc.pid, timeline, started))
    rss_start, tree_start = app_rss(app.proc.pid), tree_rss(app.proc.pid)
    calm = await phase(app, users, seconds, None)
    attacked = await phase(app, users, seconds, pdf_file)
    await asyncio.sleep(settle)
    rss_after, tree_after = app_rss(app.proc.pid), tree_rss(app.proc.pid)
    sampler.cancel()
    return {"calm": calm, "hostile": attacked, "rss_start_mib": round(rss_start / MIB),
            "rss_after_mib": round(rss_after / MIB), "rss_change_pct": round((rss_after / rss_start - 1) * 100, 1),
            "tree_rss_start_mib": round(tree_start / MIB), "tree_rss_after_mib": round(tree_after / MIB),
            "rss_timeline": timeline}


def table(report: dict) -> str:
    calm, hostile = report["calm"], report["hostile"]
    ratio = lambda key: f"{hostile[key] / calm[key]:.2f}x" if calm[key] and hostile[key] else "-"  # noqa: E731
    rows = [("others' answers", calm["answers"], hostile["answers"], ""),
            ("others' answer latency, median", f"{calm['latency_median_s']} s", f"{hostile['latency_median_s']} s",
             ratio("latency_median_s")),
            ("others' answer latency, p95", f"{calm['latency_p95_s']} s", f"{hostile['latency_p95_s']} s",
             ratio("latency_p95_s")),
            ("others' questions with a file: latency median / p95",
             f"{calm['with_file_median_s']} / {calm['with_file_p95_s']} s",
             f"{hostile['with_file_median_s']} / {hostile['with_file_p95_s']} s", ""),
            ("others' questions not answered in 300 s", calm["not_answered_in_time"], hostile["not_answered_in_time"],
             ""),
            ("writes lost (questions + answers)", calm["lost"]["questions_lost"] + calm["lost"]["answers_lost"],
             hostile["lost"]["questions_lost"] + hostile["lost"]["answers_lost"], ""),
            ("writes stored changed", calm["lost"]["questions_changed"] + calm["lost"]["answers_changed"],
             hostile["lost"]["questions_changed"] + hostile["lost"]["answers_changed"], "")]
    lines = ["| | without the hostile session | with it | with / without |", "|---|---|---|---|"]
    lines += [f"| {a} | {b} | {c} | {d} |" for a, b, c, d in rows]
    lines.append(f"| app RSS: at start / {report['settle_s']:.0f} s after the last session | "
                 f"{report['rss_start_mib']} MiB | {report['rss_after_mib']} MiB | {report['rss_change_pct']:+.1f}% |")
    attack = hostile.get("attack", {})
    if "messages" in attack:
        lines.append(f"| the hostile session sent | - | {attack['messages']} messages ({attack['slow_file_messages']} "
                     f"with 5 PDFs of 300 pages, the rest with 20,000 planted documents each); uploads answered "
                     f"{attack['uploads']}; wrong logins answered {attack['logins']} | |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=20, help="sessions, the hostile one included")
    parser.add_argument("--minutes", type=float, default=5, help="minutes of each phase")
    parser.add_argument("--settle", type=float, default=120, help="seconds after the last session, for the RSS")
    parser.add_argument("--out", type=Path, help="where to write the JSON report")
    parser.add_argument("--session-timeout", type=int, metavar="SECONDS",
                        help="Chainlit's session window (600 s shipped: a closed page's session is kept that long, "
                             "in case it comes back)")
    parser.add_argument("--heap-watch", type=float, metavar="SECONDS",
                        help="sample the heap inside the app and vLLM's processes this often (bench/heap_watch/)")
    args = parser.parse_args()

    from app.accounts import Accounts
    from tests.tiny_model import build

    tmp = Path(tempfile.mkdtemp(prefix="load-run-"))
    data = tmp / "data"
    users = [f"user{n:02d}" for n in range(1, args.sessions)]
    accounts = Accounts(data / "users.json")
    for user in [*users, HOSTILE]:
        accounts.add(user, SECRET.format(user))
    pdf_file = make_pdf(tmp / "big.pdf", 300)
    env = {}
    if args.session_timeout is not None:
        env["CHAINLIT_APP_ROOT"] = str(chainlit_root_with_session_timeout(tmp, args.session_timeout))
    if args.heap_watch:
        env.update(heap_watch_env(tmp / "heap", args.heap_watch))
    app = LaunchedApp(build(tmp / "model"), tmp, "--data-dir", str(data), "--max-tokens", "32", env=env)
    try:
        app.wait_http()
        print(f"app ready after {app.wait_ready():.1f}s", flush=True)
        report = asyncio.run(run(app, users, args.minutes * 60, args.settle, pdf_file))
    finally:
        app.stop()
        app.kill()
    for key in ("calm", "hostile"):
        report[key]["lost"] = lost_writes(data / "chats.db", report[key].pop("_tabs"))
    report.update({"sessions": args.sessions, "minutes": args.minutes, "settle_s": args.settle,
                   "session_timeout_s": args.session_timeout or 600,
                   "command": " ".join(["python -m bench.load_run", *sys.argv[1:]])})
    text = json.dumps(report, indent=1)
    if args.out:
        args.out.write_text(text + "\n")
    print(text)
    print(table(report))
    if args.heap_watch:
        print(heap_table(tmp / "heap", args.heap_watch))
    calm, hostile = report["calm"], report["hostile"]
    lost = sum(report[k]["lost"][f] for k in ("calm", "hostile") for f in ("questions_lost", "answers_lost"))
    slower = max(hostile[k] / calm[k] for k in ("latency_median_s", "latency_p95_s")) if calm["answers"] else 99
    passed = lost == 0 and slower <= 2 and abs(report["rss_change_pct"]) <= 10
    print("LOAD RUN PASSED" if passed else "LOAD RUN FAILED")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
