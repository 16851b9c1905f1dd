"""Give the memory the app freed back to the system (glibc's ``malloc_trim``).

glibc keeps freed memory in its arenas for reuse, and hands back only what lies at the top of each heap: after a
burst of large, short-lived buffers (a flood of 1-MB socket messages, uploads, documents' texts) the app's RSS stayed
where the burst took it (bench/load_run.py, 2026-12-06). Trimming once a minute costs milliseconds; elsewhere than
glibc (musl, macOS) there is nothing to call and nothing is done.
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


def give_back_free_memory() -> bool:
    """Return free pages of every arena to the system; False where the C library has no malloc_trim."""
    libc = _libc()
    if libc is None:
        return False
    libc.malloc_trim(0)
    return True
