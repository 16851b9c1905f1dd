"""Document work in a short-lived process of its own: a hostile file can neither hang the app nor bloat it.

The app runs ``python -m app.documents.worker`` per job, sends the request as JSON on stdin and reads one JSON
answer on stdout. Two jobs: reading a file's text (``read_in_worker``), and fitting a message's documents into the
context (``fit_in_worker``; app/documents/fitting.py), which tokenizes them whole and passage by passage: in the
app's own process that grew it by gigabytes that it kept (issue 36, N9). The child caps its own address space
(resource.RLIMIT_AS) and CPU time before it starts; the parent kills it at the wall-clock limit. Either way the chat
gets one line.
"""
from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import sys
from pathlib import Path
from typing import Any, Optional

from app.documents.limits import EXTRACT_MEMORY_BYTES, EXTRACT_SECONDS, MIB, Kind
from app.engine.queueing import FairGate
from app.errors import DocumentRefused

log = logging.getLogger("ernie_chat.documents")
ROOT = Path(__file__).resolve().parents[2]
# Workers one user has at once, whatever the number of their chats and tabs: each may take a core and
# EXTRACT_MEMORY_BYTES, beside the engine. One more is kept for everyone else: the users waiting take turns
# (app/engine/queueing.py), and another user's small file starts at once instead of waiting for the end of one
# user's slow 300-page PDF (on two cores it waited behind one: 7.8 -> 15.2 s median in bench/load_run.py).
MAX_WORKERS_PER_USER = max(1, (os.cpu_count() or 2) // 2)
_WORKER_SLOTS = FairGate(MAX_WORKERS_PER_USER + 1, per_owner=MAX_WORKERS_PER_USER)


async def read_in_worker(path: Path, name: str, kind: Kind, max_chars: int, seconds: float = EXTRACT_SECONDS,
                         memory_bytes: int = EXTRACT_MEMORY_BYTES, owner: Optional[str] = None) -> dict[str, Any]:
    """The file's text as ``{"text", "page_starts", "truncated"}``; raises DocumentRefused. ``owner``: the user it
    is read for (their turn among the users waiting for a worker)."""
    request = {"job": "read", "path": str(path), "name": name, "kind": kind.value, "max_chars": max_chars}
    async with _WORKER_SLOTS.slot(owner=owner):
        return await _run(request, name, seconds, memory_bytes)


async def fit_in_worker(documents: list[dict[str, Any]], question: str, room: int, tokenizer_file: Path,
                        seconds: float = EXTRACT_SECONDS, memory_bytes: int = EXTRACT_MEMORY_BYTES,
                        owner: Optional[str] = None) -> list[dict[str, Any]]:
    """app/documents/prompt.py's ``fit_documents`` run in a worker with the tokenizer saved in ``tokenizer_file``:
    the fits as dicts; raises DocumentRefused (named by the documents' names) when the worker fails."""
    request = {"job": "fit", "documents": documents, "question": question, "room": room,
               "tokenizer_file": str(tokenizer_file)}
    async with _WORKER_SLOTS.slot(owner=owner):
        return await _run(request, ", ".join(str(d.get("name")) for d in documents), seconds, memory_bytes)


async def _run(job: dict[str, Any], name: str, seconds: float, memory_bytes: int) -> Any:
    request = json.dumps({**job, "memory_bytes": memory_bytes, "seconds": seconds}).encode()
    # One thread for the tokenizer: its thread pool would take every core, and reserve memory per thread that
    # counts against the address-space cap.
    env = {**os.environ, "TOKENIZERS_PARALLELISM": "false", "RAYON_NUM_THREADS": "1"}
    child = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "app.documents.worker", cwd=ROOT, stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, start_new_session=True, env=env)
    try:
        out, err = await asyncio.wait_for(child.communicate(request), seconds)
    except asyncio.TimeoutError:
        raise DocumentRefused("too_slow", name, seconds=int(seconds)) from None
    finally:
        if child.returncode is None:  # its whole process group: whatever a parser may have started goes too
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.pid, signal.SIGKILL)
            await child.wait()
    try:
        answer = json.loads(out)
    except ValueError:
        # No answer: the worker died outside the parser's errors (main() answers those): the memory cap hit while
        # importing or inside C code, or the CPU-time cap. Only the exit status is logged, never the file's text.
        log.warning("reading %s failed: worker exit %s, %d bytes on stderr", name, child.returncode, len(err))
        raise DocumentRefused("too_much_memory", name, limit=memory_bytes // MIB) from None
    if "refused" in answer:
        refused = answer["refused"]
        raise DocumentRefused(refused["reason"], name, **refused["values"])
    return answer["ok"]


def _cap_resources(memory_bytes: int, seconds: float) -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    cpu = int(seconds) + 1
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))


def _extract(request: dict[str, Any]) -> dict[str, Any]:
    from app.documents.extract import extract  # a failure here (the cap too small to import) is a crash: see _run

    found = extract(Path(request["path"]), request["name"], Kind(request["kind"]), request["max_chars"])
    return {"text": found.text, "page_starts": found.page_starts, "truncated": found.truncated}


def _fit(request: dict[str, Any]) -> list[dict[str, Any]]:
    from app.documents.fit_job import fit_with_tokenizer_file

    return fit_with_tokenizer_file(request["documents"], request["question"], request["room"],
                                   Path(request["tokenizer_file"]))


def main() -> int:
    request = json.loads(sys.stdin.buffer.read())
    _cap_resources(request["memory_bytes"], request["seconds"])
    try:
        answer: dict[str, Any] = {"ok": _fit(request) if request.get("job") == "fit" else _extract(request)}
    except DocumentRefused as refused:
        answer = {"refused": {"reason": refused.reason, "values": refused.values}}
    except MemoryError:
        answer = {"refused": {"reason": "too_much_memory", "values": {"limit": request["memory_bytes"] // MIB}}}
    except Exception as err:  # noqa: BLE001 - any other parser failure is a file that cannot be read, said in one line
        answer = {"refused": {"reason": "corrupt", "values": {"kind": request.get("kind", "text").upper(),
                                                              "detail": type(err).__name__}}}
    sys.stdout.buffer.write(json.dumps(answer, ensure_ascii=False).encode())  # UTF-8 whatever the locale
    return 0


if __name__ == "__main__":
    sys.exit(main())
