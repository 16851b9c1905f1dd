"""`python launch.py` as a user runs it: real Chainlit server, real CPU engine, tiny model."""
import os
import re
import signal
import socket
import subprocess
import sys

import psutil
import pytest

from tests.support.app_process import ROOT, LaunchedApp, free_port, get
from tests.support.metrics import metric_value
from tests.support.page import CHROMIUM_ARGS, status_panel_text

pytestmark = pytest.mark.timeout(600)


def test_lifecycle_loading_ready_check_metrics_and_clean_exit(tiny_model_dir, tmp_path):
    """HTTP within 3 s, loading shown in the page, ready + marker, check in all three states, SIGINT exit.

    Run on a pseudo-terminal, as from a user's shell: the start shows a progress bar there.
    """
    from playwright.sync_api import sync_playwright

    app = LaunchedApp(tiny_model_dir, tmp_path, terminal=True)
    try:
        http_after = app.wait_http(timeout=30)  # how fast: bench/start_bench.py; here: that it answers while loading
        code, body = app.readyz()
        assert code == 503 and body["state"] in ("loading", "warming") and not body["ready"]
        assert 1 <= body["step"] <= body["steps"] == 4 and body["starting_seconds"] >= 0
        loading_check = app.check()
        assert loading_check.returncode == 1 and "not ready: loading" in loading_check.stdout

        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
            page = browser.new_page()
            page.goto(app.url + "/")
            page.wait_for_selector("#chat-input", timeout=30000)
            status_panel_text(page, "Engine:", "loading", " of 4 · ")  # "▰▰▱▱ step 2 of 4 · 3 s"
            ready_after = app.wait_ready()
            page.get_by_text("ready in").wait_for(timeout=15000)  # the panel redraws by itself
            browser.close()

        code, body = app.readyz()
        assert code == 200 and body["ready"] and body["state"] == "ready"
        ready_check = app.check()
        assert ready_check.returncode == 0 and ready_check.stdout.startswith("ready:")
        log_text = app.log_file.read_text()
        assert "Engine started." in log_text
        # The log times the start from launch: the web server, then each step
        assert re.search(r"web server starts \d+\.\ds after launch", log_text)
        assert re.search(r"engine loading \[3/4\] at \d+\.\ds: loading the model", log_text)
        # The terminal showed the start as a bar, step by step, ending full ...
        terminal = app.output()
        assert "starting [3/4] loading the model into the engine" in terminal and "2/4 steps" in terminal
        assert "ready: ready in" in terminal and "4/4 steps" in terminal
        # ... with vLLM's INFO and WARNING lines kept off it (a quiet terminal: nothing there asks the user to
        # act), and in the log file instead, from its engine process too.
        assert "Initializing a V1 LLM engine" not in terminal
        # Nor the engine worker's own weight-loading bar, nor Chainlit's "Translated markdown file for en-US not
        # found" for each page of a UI language (chainlit_en-US.md and chainlit_zh-CN.md exist).
        assert "Loading safetensors checkpoint shards" not in terminal and "Translated markdown" not in terminal
        noisy = [line for line in terminal.splitlines() if "WARNING" in line or "Warning" in line]
        assert not noisy, noisy
        assert any("Initializing a V1 LLM engine" in line and "[EngineCore" in line for line in log_text.splitlines())
        code, metrics = get(app.url + "/metrics")
        assert code == 200 and "vllm:num_requests_running" in metrics
        assert metric_value(metrics, "ernie_chat_engine_state") == 1
        assert metric_value(metrics, 'ernie_chat_engine_state{state="ready"}') == 1
        print(f"launch->HTTP {http_after:.2f}s, launch->ready {ready_after:.1f}s")

        children = app.descendants()
        assert children, "vLLM's engine process should be a child"
        app.stop(signal.SIGINT, timeout=60)
        assert app.proc.returncode == 0
        # Right at the parent's exit: every engine process is gone, not even a zombie left to PID 1.
        alive = [pid for pid in children if psutil.pid_exists(pid)]
        assert not alive, f"engine processes left behind: {[(p, psutil.Process(p).status()) for p in alive]}"
        assert "leaked shared_memory" not in app.output() and "resource_tracker" not in app.output()
        gone_check = app.check()
        assert gone_check.returncode == 1 and "not running" in gone_check.stdout
    finally:
        app.kill()


def test_port_in_use_is_one_line(tiny_model_dir):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        r = subprocess.run([sys.executable, "launch.py", "--model", str(tiny_model_dir), "--port", str(port)],
                           cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and f"127.0.0.1:{port}" in r.stderr and "--port" in r.stderr
    assert "Traceback" not in r.stderr and r.stderr.strip().count("\n") == 0


@pytest.mark.parametrize("model, words", [
    ("nobody/no-such-model", "not in the local cache and offline mode is on"),
    ("/nonexistent/dir", "invalid setting --model = '/nonexistent/dir': no such directory"),
])
def test_a_model_that_is_not_there_is_one_line_before_anything_starts(tmp_path, model, words):
    """Known before start, so told like a bad --port: one line on stderr, exit 2, no server, no log lines
    (it once started the server, logged 7 lines and printed the error 4 times on stdout, exit 1)."""
    r = subprocess.run([sys.executable, "launch.py", "--model", model, "--offline", "--port", str(free_port()),
                        "--log-file", str(tmp_path / "llm.log")],
                       cwd=ROOT, capture_output=True, text=True, timeout=180,
                       env={**os.environ, "HF_HOME": str(tmp_path / "hf")})
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.startswith("error: ") and words in r.stderr and r.stderr.strip().count("\n") == 0
    assert not (tmp_path / "llm.log").exists()  # nothing was started


def test_without_the_hub_a_model_to_download_is_one_line_before_anything_starts(tmp_path):
    """Like --offline: it was the UI's address, two failures and three shutdown lines, then the error."""
    r = subprocess.run([sys.executable, "launch.py", "--port", str(free_port()),
                        "--log-file", str(tmp_path / "llm.log")],
                       cwd=ROOT, capture_output=True, text=True, timeout=180,
                       env={**os.environ, "HF_HOME": str(tmp_path / "hf"), "HF_ENDPOINT": "http://127.0.0.1:9"})
    assert r.returncode == 2 and r.stdout == "" and r.stderr.strip().count("\n") == 0, r.stderr
    assert r.stderr.startswith("error: cannot reach the model hub at http://127.0.0.1:9 to download "
                               "baidu/ERNIE-4.5-0.3B-PT")
    assert not (tmp_path / "llm.log").exists()  # nothing was started


def test_a_start_that_fails_for_good_is_one_line_on_stderr(tiny_model_dir, tmp_path):
    """Found only once the engine tries (here: an architecture vLLM does not know)."""
    import json
    import shutil

    broken = tmp_path / "model"
    shutil.copytree(tiny_model_dir, broken)
    config = json.loads((broken / "config.json").read_text())
    (broken / "config.json").write_text(json.dumps({**config, "architectures": ["NoSuchModelForCausalLM"]}))
    r = subprocess.run([sys.executable, "launch.py", "--model", str(broken), "--port", str(free_port()),
                        "--log-file", str(tmp_path / "llm.log")],
                       cwd=ROOT, capture_output=True, text=True, timeout=240)
    errors = [line for line in (r.stdout + r.stderr).splitlines() if "error" in line.lower()]
    assert r.returncode == 2, r.stdout + r.stderr
    assert len(errors) == 1 and errors[0].startswith("error: ") and errors[0] in r.stderr, errors
    assert "Traceback" not in r.stdout + r.stderr


def test_exposed_without_auth_is_refused(tiny_model_dir):
    r = subprocess.run([sys.executable, "launch.py", "--model", str(tiny_model_dir), "--host", "0.0.0.0",
                        "--port", str(free_port())], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "--auth-token" in r.stderr and "--insecure-no-auth" in r.stderr


def test_launch_exits_2_with_one_line_and_no_traceback():
    result = subprocess.run([sys.executable, "launch.py", "--port", "0"], cwd=ROOT, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 2
    assert result.stderr.strip().count("\n") == 0 and "Traceback" not in result.stderr
    assert result.stderr.startswith("error: invalid setting --port")
