"""Schema versions and migrations for the conversation store.

The rules:

* The version lives in ``schema_version`` under the component name ``"conversations"``;
  other components sharing ``memory.db`` keep their own rows there.
* A fresh database (no row) is created from the SQLModel models' DDL and stamped with
  :data:`SCHEMA_VERSION`. Older databases run every migration after their version, in
  order. Either way the work happens in one ``BEGIN IMMEDIATE`` transaction, so a crash
  or a failing step leaves the file exactly as it was.
* A change to the tables bumps :data:`SCHEMA_VERSION`, edits the models, regenerates
  :mod:`fermix_core.store.ddl` (so fresh databases get the new shape) and adds
  ``MIGRATIONS[new_version]``, a function that upgrades a database of the previous
  version in place.
* A database stamped newer than this build is never written to: the version is read over a
  read-only connection before the store opens its own, and :class:`StoreSchemaError` tells
  the operator to upgrade Fermix.

Creating and opening a database both use the standard library alone: a fresh database is
created from :mod:`fermix_core.store.ddl`, the models' statements compiled once.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Mapping
from pathlib import Path
from urllib.parse import quote

from fermix_core.store.records import StoreCorruptError, StoreError, StoreSchemaError

__all__ = [
    "COMPONENT",
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "Migration",
    "create_current_schema",
    "ensure_schema",
    "probe_version",
    "read_version",
]

COMPONENT = "conversations"
SCHEMA_VERSION = 2

#: Upgrades a database from ``version - 1`` to ``version``, inside the caller's transaction.
Migration = Callable[[sqlite3.Connection], None]


def _add_sender_name(conn: sqlite3.Connection) -> None:
    """Version 2: user messages remember the sender's display name (group-chat labels)."""
    columns = {row[1] for row in conn.execute("PRAGMA table_info(messages)")}
    if "sender_name" not in columns:
        conn.execute("ALTER TABLE messages ADD COLUMN sender_name VARCHAR")


#: ``{target_version: step}``. Version 1 is the baseline and has no step: a database with
#: no version is created from the models instead.
MIGRATIONS: dict[int, Migration] = {2: _add_sender_name}


def probe_version(path: Path) -> int | None:
    """The store's schema version in the file at *path*, without writing anything.

    ``None`` when there is no file yet, ``0`` when the file has no version for this
    component (fresh or foreign database). Raises :class:`StoreSchemaError` for a newer
    database and :class:`StoreCorruptError` for a file SQLite cannot read.
    """
    if not path.exists():
        return None
    if path.is_dir():
        raise StoreError(
            f"{path} is a directory, not Fermix's database; move it aside (`mv {path} "
            f"{path}.old`) and Fermix creates a new, empty one (it was left untouched)"
        )
    uri = f"file:{quote(str(path))}?mode=ro"
    try:
        conn = sqlite3.connect(uri, uri=True, timeout=5.0)
    except sqlite3.Error as exc:
        raise StoreError(
            f"cannot open {path} to read its schema version ({exc}); check that the file and "
            "its directory are readable by you"
        ) from exc
    try:
        version = read_version(conn, path=path)
    finally:
        conn.close()
    check_not_newer(version, path)
    return version


def read_version(conn: sqlite3.Connection, *, path: Path | str = "memory.db") -> int:
    """This component's version as recorded in *conn*'s database; 0 when absent."""
    try:
        table = conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'"
        ).fetchone()
        if table is None:
            return 0
        row = conn.execute(
            "SELECT version FROM schema_version WHERE component = ?", (COMPONENT,)
        ).fetchone()
    except sqlite3.OperationalError as exc:
        raise StoreError(
            f"cannot read the schema version of {path} ({exc}); if another Fermix process "
            "holds it locked, stop that one (`fermix stop`); otherwise check the file's "
            "permissions"
        ) from exc
    except sqlite3.DatabaseError as exc:
        raise StoreCorruptError(
            f"{path} is not a SQLite database Fermix can read ({exc}); move it aside to start "
            "with empty history, or restore it from a backup"
        ) from exc
    return int(row[0]) if row is not None else 0


def check_not_newer(version: int, path: Path | str, current: int = SCHEMA_VERSION) -> None:
    if version > current:
        raise StoreSchemaError(
            f"{path} has conversation schema version {version}, but this Fermix only knows "
            f"versions up to {current}; upgrade fermix to a release that knows version "
            f"{version} (the file was left untouched)"
        )


def ensure_schema(
    conn: sqlite3.Connection,
    *,
    path: Path | str = "memory.db",
    current: int = SCHEMA_VERSION,
    migrations: Mapping[int, Migration] = MIGRATIONS,
    create: Migration | None = None,
) -> tuple[int, int]:
    """Bring *conn*'s database to *current*; returns ``(found, now)``.

    *conn* must be in autocommit mode (``isolation_level=None``); this function owns the
    transaction. The parameters after *conn* exist so tests can run the same procedure
    with their own migration list.
    """
    found = read_version(conn, path=path)
    check_not_newer(found, path, current)
    if found == current:
        return found, found
    conn.execute("BEGIN IMMEDIATE")
    try:
        # Another process may have migrated between the read above and the lock.
        found = read_version(conn, path=path)
        check_not_newer(found, path, current)
        if found < current:
            if found == 0:
                (create or create_current_schema)(conn)
            else:
                for version in range(found + 1, current + 1):
                    step = migrations.get(version)
                    if step is None:
                        raise StoreError(
                            f"no migration from conversation schema {version - 1} to {version}; "
                            "this build is broken, reinstall fermix"
                        )
                    step(conn)
            conn.execute(
                "INSERT INTO schema_version (component, version) VALUES (?, ?) "
                "ON CONFLICT (component) DO UPDATE SET version = excluded.version",
                (COMPONENT, current),
            )
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return found, current


def create_current_schema(conn: sqlite3.Connection) -> None:
    """Create every table of the models (those already present are left alone).

    The statements are the models compiled once (:mod:`fermix_core.store.ddl`, kept equal
    to the models by a test), so creating a database imports no SQLAlchemy.
    """
    from fermix_core.store.ddl import STATEMENTS

    for statement in STATEMENTS:
        conn.execute(statement)
