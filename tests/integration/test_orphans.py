"""Nothing of the app outlives it: `kill -9` of the app while it answers leaves no vLLM process running (they were
re-parented to PID 1 and kept 4.6 GB and a core busy), and the next start removes the files folder it left."""
import threading
import time

import httpx
import pytest

from app.orphan_guard import FILES_PREFIX
from tests.helpers import LaunchedApp, alive, engine_processes, get, metric_value

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
