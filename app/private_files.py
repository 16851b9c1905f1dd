"""The app's files: where its data directory is, and files only this user may read (folders 0700, files 0600,
whatever the umask).

Chats, their exports, the users file, the log (chat titles, user names) and the page's per-process files are
written here, by this user, on machines other users may share. ``mkdir`` and ``open`` take their mode through the
umask, which only takes bits away, so each helper sets the mode again after creating (a umask such as 0o200 takes
some of ours too). Folders and files that already exist are left as they are (a folder the user chose may be
shared on purpose), except where a helper says it changes them.
"""
from __future__ import annotations

import contextlib
import logging
import os
import stat
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from app.errors import ErnieChatError

if TYPE_CHECKING:
    from app.settings import HistorySettings

log = logging.getLogger("ernie_chat.files")

PRIVATE_FOLDER_MODE = 0o700
PRIVATE_FILE_MODE = 0o600
APP_DIR_NAME = "ernie-chat"


def default_data_dir() -> Path:
    """The user data directory (platformdirs: ~/.local/share/ernie-chat on Linux)."""
    from platformdirs import user_data_dir

    return Path(user_data_dir(APP_DIR_NAME, appauthor=False))


def data_folder(settings: HistorySettings) -> Path:
    """The data directory: --data-dir, else the user data directory."""
    return (settings.data_dir or default_data_dir()).expanduser().resolve()


def make_private_folder(folder: Path, own: bool = False) -> None:
    """Create ``folder`` and any missing folder above it 0700. One that exists is left as it is, unless ``own``:
    the app's default data directory, made 0700 even when an earlier version created it 0755."""
    missing = []
    for candidate in (folder, *folder.parents):
        if candidate.exists() or candidate.is_symlink():
            break
        missing.append(candidate)
    for candidate in reversed(missing):
        with contextlib.suppress(FileExistsError):  # made meanwhile by another process: not ours to change
            candidate.mkdir(mode=PRIVATE_FOLDER_MODE)
            os.chmod(candidate, PRIVATE_FOLDER_MODE)
    if own and not missing and folder.is_dir() and not folder.is_symlink():
        mode = stat.S_IMODE(folder.stat().st_mode)
        if mode != PRIVATE_FOLDER_MODE:
            try:
                os.chmod(folder, PRIVATE_FOLDER_MODE)
                log.info("made the data directory %s private (%o, it was %o)", folder, PRIVATE_FOLDER_MODE, mode)
            except OSError as err:  # owned by someone else: the start goes on, and says so
                log.warning("cannot make the data directory %s private (%s)", folder, err.strerror)


def make_private_temp_folder(prefix: str) -> Path:
    """A new folder of its own under the system's temporary folder, 0700 (mkdtemp's mode, set again past the
    umask)."""
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    os.chmod(folder, PRIVATE_FOLDER_MODE)
    return folder


def create_private_file(file: Path) -> None:
    """Create an empty ``file`` 0600 if it does not exist (SQLite takes an empty file as a new database, and gives
    its -wal and -shm files the same permissions). An existing file is left as it is."""
    try:
        fd = os.open(file, os.O_CREAT | os.O_EXCL | os.O_WRONLY, PRIVATE_FILE_MODE)
    except FileExistsError:
        return
    try:
        os.fchmod(fd, PRIVATE_FILE_MODE)
    finally:
        os.close(fd)


def keep_private(file: Path) -> None:
    """``file`` exists and is 0600, also when an earlier version made it 0644 (the log). A special file (a pipe,
    /dev/stderr) is not ours to change."""
    if file.exists() and not file.is_file():
        return
    os.close(os.open(file, os.O_CREAT | os.O_APPEND | os.O_WRONLY, PRIVATE_FILE_MODE))
    os.chmod(file, PRIVATE_FILE_MODE)


def write_private(path: Path, text: str) -> None:
    """Write ``path`` 0600, also over an older export's 0644 file; never through a link."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0), PRIVATE_FILE_MODE)
    except OSError as err:
        raise ErnieChatError(f"cannot write {path}: {err.strerror or err}") from None
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        os.fchmod(fd, PRIVATE_FILE_MODE)
        f.write(text)


def replace_private(path: Path, text: str) -> None:
    """Write ``path`` 0600 whole or not at all: a new file beside it (mkstemp's 0600, set again past the umask),
    flushed to the disk, then renamed over it, so a reader sees the old text or the new, never a part."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.stem}-", suffix=path.suffix, dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            os.fchmod(fd, PRIVATE_FILE_MODE)
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
