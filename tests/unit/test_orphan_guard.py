"""What a killed run left: vLLM processes re-parented to PID 1 are named in one line at start, with what they hold
and the command that stops them; other processes, zombies and other users' are left out."""
import logging
from types import SimpleNamespace

import psutil

from app import orphan_guard
from app.orphan_guard import clean_leftovers, is_engine_process


def fake(pid, name, ppid=1, user="me", rss=2 * 2**30, status=psutil.STATUS_SLEEPING, cmdline=()):
    info = {"name": name, "cmdline": list(cmdline) or [name], "ppid": ppid, "username": user,
            "memory_info": SimpleNamespace(rss=rss), "status": status}
    return SimpleNamespace(pid=pid, info=info)


def test_vllm_processes_are_known_by_their_names():
    assert is_engine_process("VLLM::EngineCor", "VLLM::EngineCore")
    assert is_engine_process("python3", "VLLM::Worker")  # a name not yet changed, the title already
    assert not is_engine_process("python3", "python launch.py --model x")


def test_orphaned_engine_processes_are_named_in_one_line(monkeypatch, tmp_path, caplog):
    monkeypatch.setattr(orphan_guard.tempfile, "gettempdir", lambda: str(tmp_path))
    monkeypatch.setattr(psutil.Process, "username", lambda self: "me")
    processes = [fake(11, "VLLM::EngineCor"), fake(12, "VLLM::Worker", ppid=11),  # the worker's parent lives
                 fake(13, "VLLM::Worker"), fake(14, "VLLM::EngineCor", user="someone else"),
                 fake(15, "VLLM::EngineCor", status=psutil.STATUS_ZOMBIE), fake(16, "bash")]
    monkeypatch.setattr(psutil, "process_iter", lambda attrs: iter(processes))
    with caplog.at_level(logging.INFO, logger="ernie_chat"):
        clean_leftovers()
    assert [r.getMessage() for r in caplog.records] == [
        "2 vLLM process(es) left running by an earlier run that was killed hold 4.0 GiB of memory (and GPU memory, "
        "if any): stop them with: kill 11 13"]


def test_only_the_files_folders_of_gone_apps_are_removed(monkeypatch, tmp_path):
    monkeypatch.setattr(orphan_guard.tempfile, "gettempdir", lambda: str(tmp_path))
    monkeypatch.setattr(psutil, "process_iter", lambda attrs: iter([]))
    gone, running, other = (tmp_path / "ernie-chat-files-999999999-ab", tmp_path / "ernie-chat-files-1-cd",
                            tmp_path / "ernie-chat-files-xy")
    for folder in (gone, running, other):
        folder.mkdir()
    clean_leftovers()
    assert not gone.exists() and running.exists() and other.exists()  # pid 1 lives; no pid: not ours to judge
