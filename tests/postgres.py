"""A real PostgreSQL server for tests: Debian's binaries, initdb + pg_ctl on a free port in a temporary
directory (no Docker). As root, the server runs as the unprivileged ``postgres`` user (it refuses root)."""
from __future__ import annotations

import contextlib
import glob
import os
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

from tests.support.app_process import free_port

PG_USER = "ernie"


def postgres_bin() -> Path:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
    if not found:
        raise RuntimeError("PostgreSQL is not installed: apt-get install postgresql (.ci/run does)")
    return Path(found[-1]).parent


def _as_server_user(argv: list[str]) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *argv] if os.geteuid() == 0 else argv


@contextlib.contextmanager
def postgres_server() -> Iterator[str]:
    """Yields the server's base URL, postgresql+asyncpg://ernie@127.0.0.1:PORT (no database part)."""
    bindir = postgres_bin()
    root = Path(tempfile.mkdtemp(prefix="ernie-pg-"))
    data = root / "data"
    port = free_port()
    if os.geteuid() == 0:
        shutil.chown(root, "postgres", "postgres")
    try:
        subprocess.run(_as_server_user([str(bindir / "initdb"), "-D", str(data), "-U", PG_USER,
                                        "--auth=trust", "-E", "UTF8", "--no-locale"]),
                       check=True, capture_output=True, text=True)
        subprocess.run(_as_server_user([str(bindir / "pg_ctl"), "-D", str(data), "-l", str(root / "server.log"),
                                        "-w", "-t", "60", "-o",
                                        f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off",
                                        "start"]),
                       check=True, capture_output=True, text=True)
        yield f"postgresql+asyncpg://{PG_USER}@127.0.0.1:{port}"
    finally:
        subprocess.run(_as_server_user([str(bindir / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop"]),
                       capture_output=True, text=True)
        shutil.rmtree(root, ignore_errors=True)


async def create_database(base_url: str) -> str:
    """A fresh, empty database on the server; returns its SQLAlchemy URL."""
    import asyncpg

    name = "t_" + uuid.uuid4().hex[:12]
    conn = await asyncpg.connect(base_url.replace("postgresql+asyncpg://", "postgresql://") + "/postgres")
    try:
        await conn.execute(f'CREATE DATABASE "{name}"')
    finally:
        await conn.close()
    return f"{base_url}/{name}"
