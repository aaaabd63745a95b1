"""Opening memory.db the same way for every component that keeps tables in it.

The conversation store and the memory backend share one SQLite file but version their
tables separately; how the file is created (private before SQLite touches it), opened and
switched to WAL is the same for both, and lives here. Each caller passes its own error
type so a failure names the component that hit it.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path


def create_private(path: Path, error: type[Exception]) -> None:
    """Create the database file 0600 before SQLite does (it would honour the umask).

    SQLite gives the ``-wal`` and ``-shm`` files the database file's permissions, so this
    one step keeps every file private. An existing file keeps its mode.
    """
    if path.exists():
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    except OSError as exc:
        raise error(
            f"cannot create {path} ({exc.strerror or exc}); check that FERMIX_HOME is a "
            "writable directory"
        ) from exc
    os.close(fd)


def open_connection(
    path: Path, error: type[Exception], busy_timeout_s: float
) -> sqlite3.Connection:
    """An autocommit connection usable from the component's worker thread."""
    try:
        conn = sqlite3.connect(
            path, isolation_level=None, check_same_thread=False, timeout=busy_timeout_s
        )
    except sqlite3.Error as exc:
        raise error(
            f"cannot open {path} ({exc}); check that its directory exists and is writable"
        ) from exc
    conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_s * 1000)}")
    return conn


def use_wal(conn: sqlite3.Connection, path: Path, error: type[Exception]) -> None:
    """Switch to WAL with ``synchronous=NORMAL``.

    WAL + NORMAL: a commit is durable once its frames reach the WAL file, which survives a
    crash of this process (even SIGKILL); only an OS crash or power loss can drop the
    newest commits, and never corrupts the file.
    """
    mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
    if str(mode).lower() != "wal":
        raise error(
            f"{path} could not be switched to WAL journaling (got {mode!r}); keep memory.db "
            "on a local file system, not a network share"
        )
    conn.execute("PRAGMA synchronous = NORMAL")
