"""Serving: when the browser opens by itself, and that it opens once, when ready."""
import pytest

from app.cli import load_settings
from app.engine.status import EngineState, EngineStatus
from app.serve import BrowserOpener, _should_open_browser


@pytest.mark.parametrize("env, flag, terminal, expected", [
    ({"DISPLAY": ":0"}, None, True, True),  # a desktop terminal: open
    ({}, None, True, False),  # no display (ssh, a server): never
    ({"DISPLAY": ":0"}, None, False, False),  # systemd or a log file: never
    ({}, "1", False, True),  # --open wins
    ({"DISPLAY": ":0"}, "0", True, False),  # --no-open wins
])
def test_the_browser_opens_for_a_person_at_a_desktop(monkeypatch, env, flag, terminal, expected):
    for name in ("DISPLAY", "WAYLAND_DISPLAY"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    if flag is not None:
        monkeypatch.setenv("ERNIE_CHAT_OPEN", flag)
    assert _should_open_browser(load_settings(env_file=None), terminal) is expected


def test_a_non_loopback_host_does_not_open_a_browser(monkeypatch):
    monkeypatch.setenv("DISPLAY", ":0")
    settings = load_settings({"host": "0.0.0.0", "insecure_no_auth": True}, env_file=None)
    assert _should_open_browser(settings, True) is False


def test_the_chat_opens_once_when_first_ready(monkeypatch):
    import threading

    opened = []
    monkeypatch.setattr("webbrowser.open", opened.append)
    opener = BrowserOpener("http://127.0.0.1:8000/")
    opener(EngineStatus(state=EngineState.LOADING))
    for state in (EngineState.READY, EngineState.RESTARTING, EngineState.READY):
        opener(EngineStatus(state=state))
    # The opener runs webbrowser in a thread (a slow browser never blocks the engine): wait for every one.
    for thread in threading.enumerate():
        if thread.name == "open-browser":
            thread.join(10)
    assert opened == ["http://127.0.0.1:8000/"]
