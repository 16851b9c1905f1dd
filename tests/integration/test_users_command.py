"""`python launch.py users add|list|remove` as a person types it: one line for each outcome."""
import subprocess
import sys
import time
from pathlib import Path

from tests.conftest import ROOT


def run_launch(*args, stdin="", data_dir):
    return subprocess.run([sys.executable, "launch.py", "users", *args, "--data-dir", str(data_dir)], cwd=ROOT,
                          input=stdin, capture_output=True, text=True, timeout=60)


def test_the_users_command_adds_lists_and_removes(tmp_path):
    added = run_launch("add", "alice", stdin="a-good-secret\n", data_dir=tmp_path)
    assert added.returncode == 0, added.stderr
    listed = run_launch("list", data_dir=tmp_path)
    assert listed.stdout.startswith("alice\tadded ") and "1 user(s)" in listed.stderr
    bad = run_launch("add", "bob", stdin="short\n", data_dir=tmp_path)
    assert bad.returncode == 2 and bad.stderr == "error: the secret has 5 characters; it needs 8 to 1,024\n"
    wrong = run_launch("frobnicate", data_dir=tmp_path)
    assert wrong.returncode == 2 and "not a users command; usage:" in wrong.stderr
    assert run_launch("remove", "alice", data_dir=tmp_path).returncode == 0
    assert run_launch("list", data_dir=tmp_path).stdout == ""



def blocked_reading_stdin(pid: int) -> bool:
    """Whether the process sits in read(0, ...): Linux's /proc/PID/syscall names the call and its first argument."""
    try:
        return Path(f"/proc/{pid}/syscall").read_text().split()[:2] == ["0", "0x0"]
    except (OSError, IndexError):
        return False


def test_users_added_at_once_all_land(tmp_path):
    """Issue 36 N4: six `users add` at once left 2-5 users in users.json (each read the file, added its user to its
    copy and wrote it over the others'). Here eight wait for their secret on stdin, and get it at the same moment."""
    assert run_launch("add", "first", stdin="first-secret\n", data_dir=tmp_path).returncode == 0
    running = [subprocess.Popen([sys.executable, "launch.py", "users", "add", f"user{n}", "--data-dir", str(tmp_path)],
                                cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True) for n in range(8)]
    deadline = time.monotonic() + 120
    while not all(blocked_reading_stdin(p.pid) for p in running):  # each has checked the name, asks for a secret
        assert time.monotonic() < deadline and all(p.poll() is None for p in running)
        time.sleep(0.05)
    for p in running:
        p.stdin.write("a-good-secret\n")
        p.stdin.flush()
    results = [p.communicate(timeout=120) for p in running]
    assert [p.returncode for p in running] == [0] * 8, results
    listed = run_launch("list", data_dir=tmp_path)
    names = sorted(line.split("\t")[0] for line in listed.stdout.splitlines())
    assert names == ["first"] + [f"user{n}" for n in range(8)]
