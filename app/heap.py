"""Keep the app's memory close to what it uses: few malloc arenas (glibc's ``mallopt``), and the memory it freed
given back to the system (glibc's ``malloc_trim``).

glibc keeps freed memory in its arenas for reuse, and hands back only what lies at the top of each heap: after a
burst of large, short-lived buffers (a flood of 1-MB socket messages, uploads, documents' texts) the app's RSS stayed
where the burst took it (bench/load_run.py, 2026-12-06). Trimming once a minute costs milliseconds; elsewhere than
glibc (musl, macOS) there is nothing to call and nothing is done.

glibc also gives each new thread an arena of its own, up to 8 per core, and freed memory stays in the arena of the
thread that used it; the app's threads (the server's, the engine client's, ``asyncio.to_thread``'s) each kept some.
Two arenas held the RSS 120 s after a hostile load run at +5.7% of its start instead of +9.2% (bench/load_run.py
--sessions 8 --minutes 1.5 --heap-watch 15, freed memory kept in the arenas 27 MiB instead of 74), the usual
setting for threaded servers (MALLOC_ARENA_MAX=2); the GIL lets one thread allocate at a time anyway.
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


M_ARENA_MAX = -8  # mallopt's parameter number (malloc.h)
ARENAS = 2


def limit_arenas(arenas: int = ARENAS) -> bool:
    """At most ``arenas`` malloc arenas for the threads started from now on; False where there is no glibc."""
    libc = _libc()
    return libc is not None and libc.mallopt(M_ARENA_MAX, arenas) == 1


def give_back_free_memory() -> bool:
    """Return free pages of every arena to the system; False where the C library has no malloc_trim."""
    libc = _libc()
    if libc is None:
        return False
    libc.malloc_trim(0)
    return True
