"""Heap samples from inside the app and vLLM's engine processes, for bench/history_load.py --heap-watch.

Python imports ``sitecustomize`` at start-up from sys.path; history_load puts this folder first on PYTHONPATH
and sets ERNIE_CHAT_HEAP_WATCH to a folder. Then the app (``launch.py``) and the processes vLLM starts with
the spawn method (``--multiprocessing-fork``: on a CPU its engine core and worker; processes it forks, as on a
GPU, are not sampled) each write one JSON line every ERNIE_CHAT_HEAP_WATCH_EVERY seconds (default 60) to
``<folder>/<role>-<pid>.jsonl`` (role: ``app``, or the name vLLM gives the process, e.g. ``VLLM__Worker``),
with ``t``, seconds since ERNIE_CHAT_HEAP_WATCH_T0 (the launch, one clock for all processes):

- rss: resident memory, what the soak's table shows;
- py_blocks: Python's own allocated object blocks (``sys.getallocatedblocks``), gc_objects: objects the
  collector tracks; both grow when Python objects are kept (a leak in Python code);
- malloc_in_use / malloc_free / malloc_arena: glibc's ``mallinfo2`` (all arenas; glibc >= 2.33, else left out),
  to tell memory in use from freed memory the allocator keeps (Python's own object arenas are mmap'd, not here);
- sqlite_in_use, threads (the app only): SQLite's own allocations (its page caches; ``sqlite3_memory_used``), and
  the process's threads (each may hold a malloc arena);
- sessions / chat_contexts (the app only): Chainlit's live sessions and the chats' message lists it holds.

Nothing here is imported by the app itself. With ERNIE_CHAT_HEAP_TRACE=N the app also traces its allocations
(tracemalloc, N frames each, from the first sample) and rewrites ``app-<pid>-growth.txt`` each sample with the places
that grew most: for a short run only (tracing every allocation slowed the app's first answers past a minute).
With ERNIE_CHAT_HEAP_CENSUS=1 it rewrites ``app-<pid>-census.txt`` with the object types that grew most.
``gc.get_objects()`` lists ~1 million objects under the GIL once a sample (tens of milliseconds): acceptable once a
minute, for a benchmark.
"""
import json
import os
import sys
import threading
import time

_FOLDER = os.environ.get("ERNIE_CHAT_HEAP_WATCH")
_IS_APP = bool(sys.argv) and sys.argv[0].endswith("launch.py")
_IS_ENGINE = "--multiprocessing-fork" in sys.argv


def _sample(mallinfo) -> dict:
    import gc

    with open("/proc/self/statm") as statm:
        rss = int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    row = {"rss": rss, "py_blocks": sys.getallocatedblocks(), "gc_objects": len(gc.get_objects())}
    if mallinfo is not None:
        info = mallinfo()
        row.update(malloc_in_use=info.uordblks + info.hblkhd, malloc_free=info.fordblks, malloc_arena=info.arena)
    if _IS_APP and "_sqlite3" in sys.modules:  # SQLite's own allocations (page caches), not Python's
        import ctypes

        used = ctypes.CDLL("libsqlite3.so.0").sqlite3_memory_used
        used.restype = ctypes.c_int64
        row["sqlite_in_use"] = used()
    if _IS_APP:
        with open("/proc/self/status") as status:
            row["threads"] = int(next(line for line in status if line.startswith("Threads:")).split()[1])
    if _IS_APP and "chainlit.session" in sys.modules:
        from chainlit.chat_context import chat_contexts
        from chainlit.session import ws_sessions_id

        row.update(sessions=len(ws_sessions_id), chat_contexts=len(chat_contexts))
    return row


def _mallinfo():
    """glibc's mallinfo2 (2.33+), or None."""
    import ctypes

    class MallInfo2(ctypes.Structure):
        _fields_ = [(name, ctypes.c_size_t) for name in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                                          "fsmblks", "uordblks", "fordblks", "keepcost")]

    try:
        function = ctypes.CDLL("libc.so.6").mallinfo2
    except (OSError, AttributeError):
        return None
    function.restype = MallInfo2
    return function


def _watch(folder: str, every: float, t0: float) -> None:
    mallinfo = _mallinfo()
    time.sleep(every)
    # vLLM names its processes after they start (VLLM::EngineCore): read the name at the first sample
    with open("/proc/self/comm") as comm:
        role = "app" if _IS_APP else comm.read().strip().replace("/", "_").replace(":", "_")
    trace_frames = int(os.environ.get("ERNIE_CHAT_HEAP_TRACE", "0")) if _IS_APP else 0
    census = _census() if _IS_APP and os.environ.get("ERNIE_CHAT_HEAP_CENSUS") else None
    first = None
    if trace_frames:
        import tracemalloc

        tracemalloc.start(trace_frames)
        first = tracemalloc.take_snapshot()
    with open(os.path.join(folder, f"{role}-{os.getpid()}.jsonl"), "a", buffering=1) as out:
        while True:
            out.write(json.dumps({"t": round(time.time() - t0), **_sample(mallinfo)}) + "\n")
            if census is not None:
                _write_census(os.path.join(folder, f"{role}-{os.getpid()}-census.txt"), census, round(time.time() - t0))
            if first is not None:
                _write_growth(os.path.join(folder, f"{role}-{os.getpid()}-growth.txt"), first, round(time.time() - t0))
            time.sleep(every)


def _census() -> dict:
    """How many objects the collector tracks, per type (module.qualname)."""
    import collections
    import gc

    counts = collections.Counter(f"{type(o).__module__}.{type(o).__qualname__}" for o in gc.get_objects())
    counts.update({f"module {name}": 1 for name in list(sys.modules)})  # what was imported since
    return counts


def _write_census(path: str, first: dict, t: int) -> None:
    """The 40 types whose tracked objects grew most since the first sample."""
    now = _census()
    grown = sorted(((now[key] - first.get(key, 0), key) for key in now), reverse=True)[:40]
    new_modules = sorted(key for key in now if key.startswith("module ") and key not in first)
    with open(path, "w") as out:
        out.write(f"t {t} s\n" + "".join(f"{count:+8d} {key}\n" for count, key in grown)
                  + f"{len(new_modules)} modules imported since the first sample:\n" + "\n".join(new_modules) + "\n")


def _write_growth(path: str, first, t: int) -> None:
    """Where the memory Python allocated since the first sample was allocated (tracemalloc, the top 25 places by
    size); C libraries' own malloc calls are not traced, so a growth seen in malloc_in_use and not here is theirs."""
    import tracemalloc

    now = tracemalloc.take_snapshot()
    traced, _ = tracemalloc.get_traced_memory()
    lines = [f"t {t} s, traced now {traced / 2**20:.1f} MiB"]
    for stat in now.compare_to(first, "traceback")[:25]:
        lines.append(f"\n{stat.size_diff / 2**20:+.2f} MiB in {stat.count_diff:+d} blocks")
        lines += [f"    {frame.filename}:{frame.lineno}" for frame in stat.traceback]
    with open(path, "w") as out:
        out.write("\n".join(lines) + "\n")


if _FOLDER and (_IS_APP or _IS_ENGINE):
    threading.Thread(target=_watch, args=(_FOLDER, float(os.environ.get("ERNIE_CHAT_HEAP_WATCH_EVERY", "60")),
                                          float(os.environ.get("ERNIE_CHAT_HEAP_WATCH_T0", time.time()))),
                     name="heap-watch", daemon=True).start()
