"""`python launch.py users add|list|remove` as a person types it: one line for each outcome."""
import subprocess
import sys

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
