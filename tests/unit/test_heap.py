"""app.heap: the app's threads share at most ARENAS malloc arenas (counted by glibc's own malloc_info), where
without the limit each new thread took one of its own; and a large block freed does not move the next ones of its
size off mmap (glibc's mallinfo2), where without the fixed threshold it did."""
from __future__ import annotations

import subprocess
import sys
import textwrap

from app.settings import PROJECT_ROOT

COUNT_ARENAS = textwrap.dedent(f"""
    import ctypes, re, sys, tempfile, threading
    sys.path.insert(0, {str(PROJECT_ROOT)!r})
    from app.heap import tune_malloc
    if sys.argv[1] == "limited":
        assert tune_malloc()
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


ON_MMAP_AFTER_A_FREE = textwrap.dedent(f"""
    import ctypes, sys
    sys.path.insert(0, {str(PROJECT_ROOT)!r})
    from app.heap import tune_malloc
    if sys.argv[1] == "tuned":
        assert tune_malloc()
    class MallInfo2(ctypes.Structure):
        _fields_ = [(name, ctypes.c_size_t) for name in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                                          "fsmblks", "uordblks", "fordblks", "keepcost")]
    libc = ctypes.CDLL("libc.so.6")
    libc.malloc.restype = ctypes.c_void_p
    libc.mallinfo2.restype = MallInfo2
    size = 4 << 20  # a document's text
    libc.free(ctypes.c_void_p(libc.malloc(size)))  # glibc raises its threshold to this size here, untuned
    block = libc.malloc(size)
    print(libc.mallinfo2().hblkhd >= size)  # the second block is on mmap
    libc.free(ctypes.c_void_p(block))
""")


def test_a_large_block_stays_on_mmap_after_one_of_its_size_was_freed():
    def on_mmap(mode: str) -> bool:
        done = subprocess.run([sys.executable, "-c", ON_MMAP_AFTER_A_FREE, mode], capture_output=True, text=True,
                              timeout=60)
        assert done.returncode == 0, done.stderr
        return done.stdout.strip() == "True"

    assert on_mmap("tuned") and not on_mmap("untuned")
