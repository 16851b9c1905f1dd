"""Nothing of the app outlives it: `kill -9` of the app while it answers leaves no vLLM process running (they were
re-parented to PID 1 and kept 4.6 GB and a core busy), and the next start removes the files folder it left."""
import contextlib
import subprocess
import sys
import threading
import time

import httpx
import psutil
import pytest

from app.engine.orphan_guard import FILES_PREFIX
from tests.support.app_process import LaunchedApp, alive, engine_processes, get
from tests.support.metrics import metric_value

pytestmark = pytest.mark.timeout(300)


def long_answer(url: str) -> None:
    body = {"messages": [{"role": "user", "content": "Tell me a long story."}], "max_tokens": 3000,
            "stream": True}
    try:
        with httpx.stream("POST", url + "/v1/chat/completions", json=body, timeout=120) as r:
            for _ in r.iter_lines():
                pass
    except httpx.HTTPError:  # the app is killed under it
        pass


def test_kill_9_while_answering_leaves_no_engine_process_and_the_next_start_cleans_up(tiny_model_dir, tmp_path):
    env = {"TMPDIR": str(tmp_path)}  # where the app keeps its files folder
    for run in ("first", "second"):
        (tmp_path / run).mkdir()
    first = LaunchedApp(tiny_model_dir, tmp_path / "first", env=env)
    second = None
    try:
        first.wait_http()
        first.wait_ready()
        engines = engine_processes(first.proc.pid)
        assert engines, "no vLLM process found under the app"
        threading.Thread(target=long_answer, args=(first.url,), daemon=True).start()
        deadline = time.time() + 30
        while metric_value(get(first.url + "/metrics")[1], "vllm:num_requests_running") < 1:
            assert time.time() < deadline, "the answer never started"
            time.sleep(0.05)
        folders = list(tmp_path.glob(f"{FILES_PREFIX}{first.proc.pid}-*"))
        assert len(folders) == 1

        first.proc.kill()
        first.proc.wait(10)
        deadline = time.time() + 10
        while any(alive(p) for p in engines) and time.time() < deadline:
            time.sleep(0.1)
        assert not [p.pid for p in engines if alive(p)], "engine processes outlived the killed app"
        assert folders[0].exists()  # a killed process removes nothing itself

        second = LaunchedApp(tiny_model_dir, tmp_path / "second", env=env)
        second.wait_http()
        assert not folders[0].exists()
        log = (tmp_path / "second" / "llm.log").read_text()
        assert "removed 1 files folder(s) left by earlier runs" in log
        assert get(second.url + "/healthz")[0] == 200
    finally:
        first.kill()
        if second is not None:
            second.stop()
            second.kill()


def test_kill_9_while_the_engine_process_starts_leaves_nothing(tiny_model_dir, tmp_path):
    """Issue 36 N5: killed in its engine's first seconds, the app left the engine process (not yet named
    VLLM::EngineCore: it takes the name once its imports are done) and multiprocessing's resource tracker under
    PID 1. Killed now while the engine process is still unnamed, the app leaves no process behind."""
    import psutil

    from app.engine.orphan_guard import POLL_SECONDS, is_engine_process

    app = LaunchedApp(tiny_model_dir, tmp_path)
    try:
        app.wait_http()
        deadline, seen_since = time.time() + 120, None
        while True:  # the spawned engine process, seen by the watcher (two of its polls) and still unnamed
            assert time.time() < deadline, "no engine process started"
            starting = [p for p in psutil.Process(app.proc.pid).children(recursive=True)
                        if "multiprocessing.spawn" in " ".join(p.cmdline())]
            if starting and seen_since is None:
                seen_since = time.time()
            if seen_since is not None and time.time() - seen_since >= 2 * POLL_SECONDS:
                break
            time.sleep(0.05)
        ours = [p for p in psutil.Process(app.proc.pid).children(recursive=True)
                if "app.engine.orphan_guard" not in " ".join(p.cmdline())]
        assert [p for p in starting if not is_engine_process(p.name(), " ".join(p.cmdline()))], \
            "the engine process was named before the kill: this run does not test an unnamed one"
        app.proc.kill()
        app.proc.wait(10)
        deadline = time.time() + 10
        while any(alive(p) for p in ours) and time.time() < deadline:
            time.sleep(0.1)
        left = [f"{p.pid} {p.name()} {' '.join(p.cmdline())[:80]}" for p in ours if alive(p)]
        assert not left, f"outlived the killed app: {left}"
    finally:
        app.kill()


# A process that only looks like a left engine: vLLM's process name, under PID 1 (double fork), not this data dir's.
LOOKALIKE = ("import os, sys, time, setproctitle\n"
             "if os.fork():\n    os._exit(0)\n"
             "os.setsid()\nsetproctitle.setproctitle('VLLM::EngineCore')\n"
             "open(sys.argv[1], 'w').write(str(os.getpid()))\ntime.sleep(600)\n")


def lookalike(tmp_path) -> psutil.Process:
    pid_file = tmp_path / "lookalike.pid"
    subprocess.run([sys.executable, "-c", LOOKALIKE, str(pid_file)], check=True, timeout=30)
    deadline = time.time() + 10
    while not pid_file.exists() or not pid_file.read_text():
        assert time.time() < deadline, "the look-alike process did not start"
        time.sleep(0.05)
    process = psutil.Process(int(pid_file.read_text()))
    assert process.name().startswith("VLLM")
    return process


def test_killed_with_its_watcher_the_app_leaves_an_engine_process_that_ends_by_itself(tiny_model_dir, tmp_path):
    """Issue 34: vLLM runs in the app's engine process, which ends its engines and itself when the app's socket
    closes, however the app went: even a kill of the app and its watcher together (the OOM killer) leaves nothing."""
    app = LaunchedApp(tiny_model_dir, tmp_path)
    below = []
    try:
        app.wait_ready()
        below = psutil.Process(app.proc.pid).children(recursive=True)
        assert engine_processes(app.proc.pid), "no engine process under the app"
        for process in below:
            if "app.engine.orphan_guard" in " ".join(process.cmdline()):
                process.kill()
        app.proc.kill()
        app.proc.wait(10)
        deadline = time.time() + 20
        while [p for p in below if alive(p)] and time.time() < deadline:
            time.sleep(0.1)
        assert not [f"{p.pid} {p.name()}" for p in below if alive(p)], "processes outlived the killed app"
    finally:
        for process in below:
            with contextlib.suppress(psutil.Error):
                process.kill()
        app.kill()


def test_a_start_ends_what_a_killed_app_and_watcher_left_on_its_data_dir_only(tiny_model_dir, tmp_path):
    """Issue 36 N5: killed together with its watcher (a kill of both, the OOM killer), the app left its engine
    processes running, and the next start only named them. Now the next start on the same data directory ends
    them, proven from the dead app's record; a process that only looks like one (vLLM's name, under PID 1) stays.
    The engine process would end by itself (the test above), so here it and vLLM's processes are stopped first
    (SIGSTOP), as processes that cannot react would be (stuck in a driver call, swapped out)."""
    import signal

    from app.engine.orphan_guard import POLL_SECONDS

    data = tmp_path / "data"
    for run in ("first", "second"):
        (tmp_path / run).mkdir()
    first = LaunchedApp(tiny_model_dir, tmp_path / "first", "--data-dir", str(data))
    second, other, left = None, None, []
    try:
        first.wait_http()
        first.wait_ready()
        below = psutil.Process(first.proc.pid).children(recursive=True)
        watchers = [p for p in below if "app.engine.orphan_guard" in " ".join(p.cmdline())]
        left = [p for p in below if p not in watchers]
        assert watchers and engine_processes(first.proc.pid), "no watcher or no engine process under the app"
        time.sleep(4 * POLL_SECONDS)  # the watcher has noted (and recorded) them
        for process in left:
            process.send_signal(signal.SIGSTOP)
        for process in watchers:
            process.kill()
        first.proc.kill()
        first.proc.wait(10)
        time.sleep(2)
        assert [p for p in left if alive(p)], "nothing was left running: this run does not test a start's cleanup"
        other = lookalike(tmp_path)

        second = LaunchedApp(tiny_model_dir, tmp_path / "second", "--data-dir", str(data))
        second.wait_http()
        still = [f"{p.pid} {p.name()}" for p in left if alive(p)]
        assert not still, f"the second start left them running: {still}"
        assert alive(other), "a process that only has vLLM's name was ended"
        log = (tmp_path / "second" / "llm.log").read_text()
        assert "that an earlier run on this data directory left running when it was killed" in log
    finally:
        for process in [*left, *([other] if other else [])]:
            with contextlib.suppress(psutil.Error):
                process.kill()
        first.kill()
        if second is not None:
            second.stop()
            second.kill()
