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
    "CHECKS",
    "COMPONENT",
    "KINDS",
    "MIGRATIONS",
    "ROLES",
    "SCHEMA_VERSION",
    "SPEAKERS",
    "STATUSES",
    "Migration",
    "create_current_schema",
    "ensure_schema",
    "one_of_sql",
    "probe_version",
    "read_version",
]

COMPONENT = "conversations"
SCHEMA_VERSION = 4

KINDS = ("message", "summary", "marker")
SPEAKERS = ("owner", "guest", "job", "system")
ROLES = ("system", "user", "assistant", "tool")
STATUSES = ("started", "committed", "stopped", "failed", "empty")

#: ``(table, column, allowed values)`` of every CHECK constraint the models declare.
CHECKS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("turns", "status", STATUSES),
    ("turns", "speaker", SPEAKERS),
    ("messages", "kind", KINDS),
    ("messages", "role", ROLES),
    ("messages", "speaker", SPEAKERS),
)

#: Indexes of version 2 that no query used; each cost every turn's COMMIT a page.
_UNUSED_INDEXES = ("ix_turns_conversation_id", "ix_messages_turn_id")

#: Upgrades a database from ``version - 1`` to ``version``, inside the caller's transaction.
Migration = Callable[[sqlite3.Connection], None]


def _add_sender_name(conn: sqlite3.Connection) -> None:
    """Version 2: user messages remember the sender's display name (group-chat labels)."""
    columns = {row[1] for row in conn.execute("PRAGMA table_info(messages)")}
    if "sender_name" not in columns:
        conn.execute("ALTER TABLE messages ADD COLUMN sender_name VARCHAR")


def one_of_sql(column: str, values: tuple[str, ...]) -> str:
    """The CHECK expression for "*column* is one of *values*", as the models declare it.

    ``=`` comparisons joined by ``OR`` rather than ``IN (...)``: SQLite evaluates an IN list
    of three or more values by building a temporary index, once for every statement that
    checks the constraint. Both forms accept exactly the same values (NULL included).
    """
    return " OR ".join(f"{column} = '{value}'" for value in values)


def _in_list_sql(column: str, values: tuple[str, ...]) -> str:
    """The same CHECK as versions 1 and 2 declared it."""
    allowed = ", ".join(f"'{value}'" for value in values)
    return f"{column} IN ({allowed})"


def _cheaper_checks(conn: sqlite3.Connection) -> None:
    """Version 3: CHECKs as OR chains, and two unused indexes dropped (faster turn writes).

    SQLite cannot alter a constraint in place; the ALTER TABLE documentation's procedure
    for changing a CHECK constraint without rebuilding the table is to edit the table's
    SQL in ``sqlite_schema`` (``PRAGMA writable_schema``) and bump ``schema_version``. The
    new constraints accept exactly the values the old ones did, so every stored row stays
    valid and nothing on disk but the schema text changes. Each new definition is first
    created in a scratch in-memory database: text SQLite could not parse is never written.
    A table whose SQL does not hold the expected old text (edited by hand) keeps its
    constraints as they are, which is only slower.
    """
    for name in _UNUSED_INDEXES:
        conn.execute(f"DROP INDEX IF EXISTS {name}")
    changed: dict[str, str] = {}
    for table in sorted({table for table, _, _ in CHECKS}):
        row = conn.execute(
            "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)
        ).fetchone()
        if row is None:
            continue
        sql = original = str(row[0])
        for owner, column, values in CHECKS:
            old = f"CHECK ({_in_list_sql(column, values)})"
            if owner == table and sql.count(old) == 1:
                sql = sql.replace(old, f"CHECK ({one_of_sql(column, values)})")
        if sql != original:
            changed[table] = sql
    if not changed:
        return
    scratch = sqlite3.connect(":memory:")
    try:
        for sql in changed.values():
            scratch.execute(sql)
    finally:
        scratch.close()
    version = int(conn.execute("PRAGMA schema_version").fetchone()[0])
    conn.execute("PRAGMA writable_schema = ON")
    try:
        for table, sql in changed.items():
            conn.execute(
                "UPDATE sqlite_master SET sql = ? WHERE type = 'table' AND name = ?", (sql, table)
            )
        conn.execute(f"PRAGMA schema_version = {version + 1}")
    finally:
        conn.execute("PRAGMA writable_schema = OFF")


#: The index version 4 drops (see :func:`_one_index_for_messages`).
WINDOW_INDEX = "ix_messages_window"


def _one_index_for_messages(conn: sqlite3.Connection) -> None:
    """Version 4: ``ix_messages_window`` dropped; every message row then writes one index.

    Window reads take the range from the window's start on the unique ``(conversation_id,
    seq)`` index (a row's ``anchor_seq`` never exceeds its ``seq``) and sort it, instead of
    reading the window's order from a second index that cost each of a turn's two commits
    a page in the log. Dropping an index touches no row: its pages go to the file's free
    list (reused by later writes; the file does not shrink), and SQLite reads each of them
    once to do so — a moment for a home of a million messages.
    """
    conn.execute(f"DROP INDEX IF EXISTS {WINDOW_INDEX}")


#: ``{target_version: step}``. Version 1 is the baseline and has no step: a database with
#: no version is created from the models instead.
MIGRATIONS: dict[int, Migration] = {
    2: _add_sender_name,
    3: _cheaper_checks,
    4: _one_index_for_messages,
}


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
