"""app.heap: the app's threads share at most ARENAS malloc arenas (counted by glibc's own malloc_info), where
without the limit each new thread took one of its own."""
from __future__ import annotations

import subprocess
import sys
import textwrap

from app.settings import PROJECT_ROOT

COUNT_ARENAS = textwrap.dedent(f"""
    import ctypes, re, sys, tempfile, threading
    sys.path.insert(0, {str(PROJECT_ROOT)!r})
    from app.heap import limit_arenas
    if sys.argv[1] == "limited":
        assert limit_arenas()
    libc = ctypes.CDLL("libc.so.6")
    libc.fopen.restype = ctypes.c_void_p
    libc.malloc.restype = ctypes.c_void_p
    together = threading.Barrier(6)
    def work():
        block = libc.malloc(1 << 16)  # a thread's first malloc picks its arena
        together.wait()  # all alive at once: an ended thread's arena would be handed to the next one
        libc.free(ctypes.c_void_p(block))
    threads = [threading.Thread(target=work) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    with tempfile.NamedTemporaryFile() as out:
        stream = libc.fopen(out.name.encode(), b"w")
        libc.malloc_info(0, ctypes.c_void_p(stream))
        libc.fclose(ctypes.c_void_p(stream))
        print(len(re.findall(r'<heap nr="', open(out.name).read())))
""")


def arenas(mode: str) -> int:
    done = subprocess.run([sys.executable, "-c", COUNT_ARENAS, mode], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return int(done.stdout)


def test_threads_share_at_most_two_arenas_where_each_took_its_own():
    from app.heap import ARENAS

    assert arenas("limited") <= ARENAS < arenas("unlimited")
