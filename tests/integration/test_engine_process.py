"""vLLM runs in the app's engine process (issue 34): started at launch, the parent of vLLM's engine core, and when it
dies the app starts another, with nothing of the dead one left running, and answers again."""
import time

import httpx
import psutil
import pytest

from app.engine.orphan_guard import ENGINE_PROCESS_MODULE
from tests.support.app_process import alive, get, running_app
from tests.support.metrics import prompt_tokens

pytestmark = pytest.mark.timeout(300)


def engine_process_of(app) -> psutil.Process:
    found = [p for p in psutil.Process(app.proc.pid).children() if ENGINE_PROCESS_MODULE in " ".join(p.cmdline())]
    assert len(found) == 1, f"engine processes under the app: {found}"
    return found[0]


def ask(app, text: str) -> dict:
    body = {"messages": [{"role": "user", "content": text}], "max_tokens": 8}
    reply = httpx.post(app.url + "/v1/chat/completions", json=body, timeout=60)
    assert reply.status_code == 200, reply.text
    return reply.json()


def test_the_engine_core_runs_below_the_engine_process_which_comes_back_after_a_kill(tiny_model_dir, tmp_path):
    with running_app(tiny_model_dir, tmp_path) as app:
        first = engine_process_of(app)
        below = first.children(recursive=True)
        assert [p for p in below if p.name().startswith("VLLM")], "vLLM's engine core is not below the engine process"
        assert not [p for p in psutil.Process(app.proc.pid).children() if p.name().startswith("VLLM")], \
            "vLLM's engine core is the app's own child: AsyncLLM runs in the app"
        ask(app, "hello")

        first.kill()
        deadline = time.time() + 120
        while time.time() < deadline:
            code, _ = get(app.url + "/readyz")
            if code == 200 and engine_process_of(app).pid != first.pid:
                break
            time.sleep(0.2)
        else:
            pytest.fail(f"not ready again after the engine process was killed: {app.readyz()}")
        gone_by = time.time() + 10
        while [p for p in below if alive(p)] and time.time() < gone_by:
            time.sleep(0.1)
        assert not [f"{p.pid} {p.name()}" for p in below if alive(p)], "the dead engine process's children run on"
        assert "the engine process ended" in app.log_file.read_text()

        before = prompt_tokens(app)  # the new engine's own count: it reads the question
        answer = ask(app, "hello again")
        assert prompt_tokens(app) - before == answer["usage"]["prompt_tokens"] > 0
