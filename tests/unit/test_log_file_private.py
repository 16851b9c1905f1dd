"""The log file names chats' titles, users and errors: 0600 whatever the umask, an older 0644 file included;
a device or pipe given as --log-file is left as it is."""
import os
import stat

from app.private_files import keep_private


def test_a_new_and_an_old_log_file_become_private(tmp_path):
    old_umask = os.umask(0o022)
    try:
        new, old = tmp_path / "new.log", tmp_path / "old.log"
        old.write_text("from an earlier version\n")
        old.chmod(0o644)
        for log_file in (new, old):
            keep_private(log_file)
            assert stat.S_IMODE(log_file.stat().st_mode) == 0o600
        assert old.read_text() == "from an earlier version\n"  # kept, not truncated
    finally:
        os.umask(old_umask)


def test_a_device_is_not_changed(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo, 0o644)
    keep_private(fifo)
    assert stat.S_IMODE(fifo.stat().st_mode) == 0o644
