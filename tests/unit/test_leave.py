"""app.launcher.leave: the process ends with main's code, after the exit handlers ran and the terminal was
flushed; a thread still working (not a daemon) is waited for, as the interpreter's own end would."""
from __future__ import annotations

import subprocess
import sys
import textwrap

from app.settings import PROJECT_ROOT


def run(body: str, tmp_path) -> subprocess.CompletedProcess:
    script = textwrap.dedent(f"""
        import atexit, pathlib, sys, threading
        sys.path.insert(0, {str(PROJECT_ROOT)!r})
        from app.launcher import leave
        out = pathlib.Path({str(tmp_path)!r})
    """) + textwrap.dedent(body)
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)


def test_the_exit_handlers_run_and_what_was_printed_arrives(tmp_path):
    done = run("""
        atexit.register(lambda: (out / "handler-ran").write_text("yes"))
        print("said before leaving", end="")  # no newline: still in the buffer when leave is called
        leave(3)
    """, tmp_path)
    assert done.returncode == 3 and done.stdout == "said before leaving"
    assert (out_file := tmp_path / "handler-ran").exists() and out_file.read_text() == "yes"


def test_a_working_thread_is_waited_for(tmp_path):
    done = run("""
        go = threading.Event()
        def work():
            go.wait()
            (out / "thread-finished").write_text("yes")
        threading.Thread(target=work).start()  # not a daemon: the interpreter's end waits for it
        threading.Timer(0.2, go.set).start()
        leave(4)
    """, tmp_path)
    assert done.returncode == 4 and (tmp_path / "thread-finished").exists()
