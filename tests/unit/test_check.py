"""`python launch.py check`: the log's last error, of the newest run only."""
from app.check import last_error_line
from app.telemetry import RUN_MARKER


def test_only_the_newest_runs_errors_are_quoted(tmp_path):
    log = tmp_path / "llm.log"
    log.write_text(f"2026-12-03 10:00:00 INFO ernie_chat: {RUN_MARKER} (pid 1)\n"
                   "2026-12-03 10:00:09 ERROR ernie_chat.engine: engine failure: an old crash\n"
                   f"2026-12-03 11:00:00 INFO ernie_chat: {RUN_MARKER} (pid 2)\n"
                   "2026-12-03 11:00:01 INFO ernie_chat.engine: engine loading [3/4]\n")
    assert last_error_line(log) is None
    with open(log, "a") as f:
        f.write("2026-12-03 11:00:05 ERROR ernie_chat.engine: engine failure: this run's\n")
    assert last_error_line(log).endswith("engine failure: this run's")
    assert last_error_line(tmp_path / "missing.log") is None
