"""Keep the app's memory close to what it uses: few malloc arenas and large blocks on mmap (glibc's ``mallopt``),
and the memory it freed given back to the system (glibc's ``malloc_trim``).

glibc keeps freed memory in its arenas for reuse, and hands back only what lies at the top of each heap: after a
burst of large, short-lived buffers (a flood of 1-MB socket messages, uploads, documents' texts) the app's RSS stayed
where the burst took it (bench/load_run.py, 2026-12-06). Trimming once a minute costs milliseconds; elsewhere than
glibc (musl, macOS) there is nothing to call and nothing is done.

glibc also gives each new thread an arena of its own, up to 8 per core, and freed memory stays in the arena of the
thread that used it; the app's threads (the server's, the engine client's, ``asyncio.to_thread``'s) each kept some.
Two arenas held the RSS 120 s after a hostile load run at +5.7% of its start instead of +9.2% (bench/load_run.py
--sessions 8 --minutes 1.5 --heap-watch 15, freed memory kept in the arenas 27 MiB instead of 74), the usual
setting for threaded servers (MALLOC_ARENA_MAX=2); the GIL lets one thread allocate at a time anyway.

glibc serves a large block (from 128 KiB) with mmap, which goes back to the system when freed, but each such free
raises that threshold to the freed block's size (up to 32 MiB): after the first multi-megabyte document text or
socket message, blocks of that size come from the arenas instead and stay there, fragmenting them. A fixed threshold
(mallopt's M_MMAP_THRESHOLD, which also ends that raising) keeps them on mmap: in a 10-session load run the freed
memory kept in the arenas stayed at 1-4 MiB instead of 7-35, and the RSS after it was +6.0% of its start instead of
+7.2% (docs/benchmarks.md, the load run).
"""
from __future__ import annotations

import ctypes
import ctypes.util
import functools
from typing import Any, Optional


@functools.lru_cache(maxsize=1)
def _libc() -> Optional[Any]:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return libc if hasattr(libc, "malloc_trim") else None
    except OSError:
        return None


# mallopt's parameter numbers (malloc.h)
M_MMAP_THRESHOLD = -3
M_ARENA_MAX = -8
ARENAS = 2
MMAP_THRESHOLD = 128 * 1024  # glibc's own starting value, kept from now on


def tune_malloc(arenas: int = ARENAS, mmap_threshold: int = MMAP_THRESHOLD) -> bool:
    """At most ``arenas`` malloc arenas for the threads started from now on, and blocks from ``mmap_threshold``
    bytes up always on mmap; False where there is no glibc."""
    libc = _libc()
    return (libc is not None and libc.mallopt(M_ARENA_MAX, arenas) == 1
            and libc.mallopt(M_MMAP_THRESHOLD, mmap_threshold) == 1)


def give_back_free_memory() -> bool:
    """Return free pages of every arena to the system; False where the C library has no malloc_trim."""
    libc = _libc()
    if libc is None:
        return False
    libc.malloc_trim(0)
    return True
