"""The first-run download, for real: huggingface_hub against a local stand-in hub serving the tiny model.

Runs in a subprocess because huggingface_hub reads HF_ENDPOINT once, at import.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.fake_hub import FakeHub
from tests.support.app_process import ROOT

REPO = "baidu/ERNIE-4.5-0.3B-PT"
RESOLVE = """
import json, sys
from app.errors import ModelNotFoundError
from app.model_source import resolve_model
from app.settings import ModelSettings
seen = []
try:
    path = resolve_model(ModelSettings(model=sys.argv[1], download_dir=sys.argv[2], offline=sys.argv[3] == "1"),
                         seen.append)
    print(json.dumps({"path": path, "progress": seen}))
except ModelNotFoundError as err:
    print(json.dumps({"error": str(err), "progress": seen}))
"""


def resolve(tmp: Path, endpoint: str, offline: bool = False, model: str = REPO) -> dict:
    env = {**os.environ, "HF_ENDPOINT": endpoint, "HF_HOME": str(tmp / "hf-home"),
           "HF_HUB_ETAG_TIMEOUT": "2", "HF_HUB_DOWNLOAD_TIMEOUT": "5"}
    env.pop("HF_HUB_OFFLINE", None)
    r = subprocess.run([sys.executable, "-c", RESOLVE, model, str(tmp / "cache"), "1" if offline else "0"],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_first_run_downloads_with_progress_then_offline_uses_the_cache(tiny_model_dir, tmp_path):
    with FakeHub(REPO, tiny_model_dir, chunk_pause_s=0.05) as hub:
        first = resolve(tmp_path, hub.url)
    assert "error" not in first, first
    downloaded = Path(first["path"])
    # Every file vLLM needs arrived intact (the tiny model's own bytes).
    for name in ("config.json", "model.safetensors", "tokenizer.json", "chat_template.jinja"):
        assert (downloaded / name).read_bytes() == (tiny_model_dir / name).read_bytes(), name
    # The status panel and /readyz get the download's progress, ending at 100%.
    progress = first["progress"]
    assert progress[0] == f"downloading {REPO} (first run only)"
    assert any("MB (" in line for line in progress), progress
    assert progress[-1].endswith("(100%)"), progress
    assert any(line.startswith("GET /" + REPO + "/resolve/") for line in hub.requests)

    # Hub gone, offline mode: the same folder comes from the cache, with nothing fetched.
    again = resolve(tmp_path, "http://127.0.0.1:9", offline=True)
    assert again.get("path") == first["path"], again
    assert again["progress"] == ["looking in the local cache"]


def test_offline_without_a_cached_copy_says_what_to_do(tmp_path):
    result = resolve(tmp_path, "http://127.0.0.1:9", offline=True)
    assert "not in the local cache and offline mode is on" in result["error"]
    assert f"python launch.py --model {REPO}" in result["error"]


def test_unknown_repo_on_the_hub_is_one_clear_line(tiny_model_dir, tmp_path):
    with FakeHub(REPO, tiny_model_dir) as hub:
        result = resolve(tmp_path, hub.url, model="baidu/no-such-model")
    assert "error" in result, result
    assert "baidu/no-such-model" in result["error"] and "\n" not in result["error"]


def test_with_a_remote_engine_only_the_tokenizer_is_downloaded(tiny_model_dir, tmp_path):
    """--remote-url: the weights live on the server; this machine fetches the tokenizer and template only."""
    from tests.support.app_process import LaunchedApp

    env = {"HF_HOME": str(tmp_path / "hf-home"), "HF_HUB_ETAG_TIMEOUT": "2", "HF_HUB_DOWNLOAD_TIMEOUT": "5"}
    with FakeHub(REPO, tiny_model_dir) as hub:
        app = LaunchedApp(Path(REPO), tmp_path, "--remote-url", "http://127.0.0.1:9/v1",
                          env={**env, "HF_ENDPOINT": hub.url})
        try:
            assert app.proc.wait(120) != 0  # nothing answers at the remote URL: one line, non-zero exit
        finally:
            app.kill()
    fetched = [line.split("/resolve/")[1] for line in hub.requests if "/resolve/" in line]
    assert any("tokenizer.json" in f for f in fetched) and any("chat_template.jinja" in f for f in fetched)
    assert not any(".safetensors" in f for f in fetched), fetched
    errors = [line for line in app.output().splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "cannot reach the vLLM server at http://127.0.0.1:9/v1" in errors[0]
