"""What a killed run left: vLLM processes re-parented to PID 1 are named in one line at start, with what they hold
and the command that stops them; other processes, zombies and other users' are left out."""
import logging
from types import SimpleNamespace

import psutil

from app.engine import orphan_guard
from app.engine.orphan_guard import clean_leftovers, is_engine_process


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


# A process left under PID 1 (double fork) that writes its pid to argv[1]; its own session, as vLLM's engine's.
LEFT = ("import os, sys, time\n"
        "if os.fork():\n    os._exit(0)\n"
        "os.setsid()\nopen(sys.argv[1], 'w').write(str(os.getpid()))\ntime.sleep(120)\n")


def left_process(tmp_path, name):
    import subprocess
    import sys
    import time

    pid_file = tmp_path / f"{name}.pid"
    subprocess.run([sys.executable, "-c", LEFT, str(pid_file)], check=True, timeout=30)
    deadline = time.time() + 10
    while not (pid_file.exists() and pid_file.read_text()):
        assert time.time() < deadline
        time.sleep(0.02)
    return psutil.Process(int(pid_file.read_text()))


def record_of(app, *processes, **changed):
    return {"app": app, "processes": [{"pid": p.pid, "started": p.create_time(), "cmdline": " ".join(p.cmdline()),
                                       **changed} for p in processes]}


def test_a_start_ends_only_what_a_dead_apps_record_proves_it_left(tmp_path, caplog):
    """Issue 36 N5: processes a killed app (and its killed watcher) left on this data directory are ended at the
    next start, each proven by its pid and start time, its command line and its parent; a record whose app still
    runs (another app on the same data directory) and a process whose pid or command line do not match stay."""
    import json

    from app.engine.orphan_guard import end_left_processes

    left, other_start, other_cmdline, live_apps = (left_process(tmp_path, n) for n in ("a", "b", "c", "d"))
    dead_app = {"pid": 2**22 + 1, "started": 1.0}  # no such process
    me = psutil.Process()
    records = tmp_path / "records"
    records.mkdir()
    (records / "1.json").write_text(json.dumps(record_of(dead_app, left)))
    (records / "2.json").write_text(json.dumps(record_of(dead_app, other_start, started=1.0)))
    (records / "3.json").write_text(json.dumps(record_of(dead_app, other_cmdline, cmdline="python -m elsewhere")))
    (records / "4.json").write_text(json.dumps(record_of({"pid": me.pid, "started": me.create_time()}, live_apps)))
    (records / "5.json").write_text("{damaged")
    try:
        with caplog.at_level(logging.WARNING, logger="ernie_chat"):
            assert end_left_processes(records) == 1
        assert not left.is_running() or left.status() == psutil.STATUS_ZOMBIE
        assert all(p.is_running() for p in (other_start, other_cmdline, live_apps))
        assert sorted(p.name for p in records.iterdir()) == ["4.json"]  # the running app's record stays
        assert f"left running when it was killed: {left.pid}" in caplog.text
    finally:
        for process in (left, other_start, other_cmdline, live_apps):
            try:
                process.kill()
            except psutil.Error:
                pass
