"""Attached documents do not grow the app's own memory (issue 36, N9: 3 sessions x 5 files peaked at 2,605 MiB and
the app still held 1,829 MiB 12 min after, from about 740 MiB at start: every file was tokenized whole, and each of
its passages again, in the app's own process, to fit it into the context)."""
from __future__ import annotations

import asyncio
import random
import re
import threading
import time
import uuid

import httpx
import psutil
import pytest

from tests.support.app_process import running_app
from tests.support.chat_socket import send_and_wait

pytestmark = pytest.mark.timeout(900)
MIB = 2**20
SESSIONS, FILES = 3, 5
FILE_CHARS = 600_000  # each far over the context: the passages path, as a long report or a book would take
WORDS = ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliett", "kilo",
         "lima", "mike", "november", "oscar", "papa", "quebec", "romeo", "sierra", "tango", "uniform", "victor")


def document(seed: int) -> bytes:
    """Lines of words, different for each file (a real document's shape: lines, words that BM25 can rank)."""
    rng = random.Random(seed)
    lines, size = [], 0
    while size < FILE_CHARS:
        line = " ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 16))) + f" {rng.randint(0, 10**6)}"
        lines.append(line)
        size += len(line) + 1
    return "\n".join(lines).encode()


class PeakRss:
    """The app process's own RSS (not its engine's or readers'), sampled every 0.1 s in a thread."""

    def __init__(self, pid: int) -> None:
        self.process = psutil.Process(pid)
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        while not self._stop.wait(0.1):
            self.peak = max(self.peak, self.process.memory_info().rss)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


async def sessions_with_files(app, client: httpx.Client) -> list[str]:
    async def one(session: int) -> str:
        files = tuple((f"report-{session}-{n}.txt", document(session * FILES + n)) for n in range(FILES))
        return await send_and_wait(app, client, str(uuid.uuid4()), {"output": "where is kilo 4711?"}, files=files,
                                   wait_s=600)

    return await asyncio.gather(*(one(s) for s in range(SESSIONS)))


def test_attached_documents_are_fitted_outside_the_apps_process(tiny_model_dir, tmp_path):
    with running_app(tiny_model_dir, tmp_path, "--max-tokens", "16") as app:
        client = httpx.Client(base_url=app.url, timeout=120)
        client.get("/")  # the page's login cookie for the local user
        asyncio.run(send_and_wait(app, client, str(uuid.uuid4()), {"output": "hello"},
                                  files=(("small.txt", b"a small file"),)))  # the answer path warmed up once
        start = psutil.Process(app.proc.pid).memory_info().rss
        sampler = PeakRss(app.proc.pid)
        try:
            answers = asyncio.run(sessions_with_files(app, client))
        finally:
            sampler.stop()
        time.sleep(10)
        after = psutil.Process(app.proc.pid).memory_info().rss
        client.close()
    grew_peak, grew_after = (sampler.peak - start) / MIB, (after - start) / MIB
    print(f"app RSS: start {start / MIB:.0f} MiB, peak +{grew_peak:.0f}, 10 s after +{grew_after:.0f}")
    # Each answer read its files' passages: the context (4,096 tokens) filled with them, not the question alone.
    prompts = [int(re.search(r"prompt ([\d,]+) tokens", a).group(1).replace(",", "")) for a in answers]
    assert min(prompts) > 2000, answers
    # The texts themselves pass through the app (15 x 0.6 MB, read, kept with the chats): tens of MiB. Here before
    # the change (a 2-core machine): peak +653 MiB, +412 MiB 10 s after; after it +57 and +44.
    assert grew_peak < 250, f"peak {grew_peak:.0f} MiB over the start"
    assert grew_after < 150, f"still {grew_after:.0f} MiB over the start 10 s after"
