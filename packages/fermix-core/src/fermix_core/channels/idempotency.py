"""The durable record of platform message ids already delivered, kept in ``memory.db``.

Platforms redeliver: a webhook the daemon answered slowly is retried, a long-poll offset is
lost in a crash, WhatsApp retries for days. Every inbound message's platform id is claimed
here before the gateway sees it, so a retry, a redelivery or a restart never runs the same
message twice. A claim that could not be handed off is released again, so the platform's
next retry is accepted.

The table belongs to its own component row in ``schema_version`` (``"channels"``), so it is
versioned apart from the conversation store and the memory tables that share the file.
Rows are bounded by age: an id older than :data:`RETENTION_S` (7 days — WhatsApp's retry
horizon) is forgotten, by a prune at open and then at most once an hour.

One connection, used by one worker thread at a time (a ``CapacityLimiter(1)``), so the
event loop never blocks on SQLite.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import anyio
import anyio.to_thread

from fermix_core.sqlite_files import create_private, open_connection, use_wal

__all__ = [
    "COMPONENT",
    "RETENTION_S",
    "SCHEMA_VERSION",
    "IdempotencyError",
    "SeenIds",
]

T = TypeVar("T")

COMPONENT = "channels"
SCHEMA_VERSION = 1
#: How long a platform id is remembered.
RETENTION_S = 7 * 24 * 3600.0
#: How often (at most) a claim also prunes expired ids.
PRUNE_EVERY_S = 3600.0
BUSY_TIMEOUT_S = 10.0

#: ``{target_version: statements}``; version 1 creates the table. A later change adds
#: ``MIGRATIONS[2]`` and bumps :data:`SCHEMA_VERSION`.
MIGRATIONS: dict[int, tuple[str, ...]] = {
    1: (
        # Same shape as the conversation store's own definition, whichever component comes first.
        "CREATE TABLE IF NOT EXISTS schema_version "
        "(component VARCHAR NOT NULL, version INTEGER NOT NULL, PRIMARY KEY (component))",
        "CREATE TABLE IF NOT EXISTS channel_seen_ids ("
        "channel TEXT NOT NULL, platform_id TEXT NOT NULL, seen_at REAL NOT NULL, "
        "PRIMARY KEY (channel, platform_id)) WITHOUT ROWID",
        "CREATE INDEX IF NOT EXISTS ix_channel_seen_ids_age ON channel_seen_ids (seen_at)",
    ),
}

# A row older than the cutoff counts as free: the claim takes it over.
_CLAIM = (
    "INSERT INTO channel_seen_ids (channel, platform_id, seen_at) VALUES (?, ?, ?) "
    "ON CONFLICT (channel, platform_id) DO UPDATE SET seen_at = excluded.seen_at "
    "WHERE channel_seen_ids.seen_at < ?"
)

_PRUNE = "DELETE FROM channel_seen_ids WHERE seen_at < ?"


class IdempotencyError(Exception):
    """The seen-ids record in ``memory.db`` cannot be opened or written."""


def _read_version(conn: sqlite3.Connection) -> int:
    has_table = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'"
    ).fetchone()
    if has_table is None:
        return 0
    row = conn.execute(
        "SELECT version FROM schema_version WHERE component = ?", (COMPONENT,)
    ).fetchone()
    return int(row[0]) if row else 0


def _check_version(version: int, path: Path) -> None:
    if version > SCHEMA_VERSION:
        raise IdempotencyError(
            f"{path} has channel schema version {version}, but this Fermix only knows versions "
            f"up to {SCHEMA_VERSION}; upgrade fermix (the file was left untouched)"
        )


def connect(path: Path) -> sqlite3.Connection:
    """Open *path*, then create or migrate the seen-ids table in one transaction."""
    create_private(path, IdempotencyError)
    conn = open_connection(path, IdempotencyError, BUSY_TIMEOUT_S)
    try:
        _check_version(_read_version(conn), path)
        use_wal(conn, path, IdempotencyError)
        if _read_version(conn) != SCHEMA_VERSION:
            conn.execute("BEGIN IMMEDIATE")
            try:
                found = _read_version(conn)  # another process may have migrated meanwhile
                _check_version(found, path)
                for version in range(found + 1, SCHEMA_VERSION + 1):
                    for statement in MIGRATIONS[version]:
                        conn.execute(statement)
                if found < SCHEMA_VERSION:
                    conn.execute(
                        "INSERT INTO schema_version (component, version) VALUES (?, ?) "
                        "ON CONFLICT (component) DO UPDATE SET version = excluded.version",
                        (COMPONENT, SCHEMA_VERSION),
                    )
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
    except IdempotencyError:
        conn.close()
        raise
    except sqlite3.DatabaseError as exc:
        conn.close()
        raise IdempotencyError(
            f"cannot prepare {path} for channel message ids ({exc}); if another Fermix process "
            "holds it, stop that one (`fermix stop`); if the file is damaged, move it aside or "
            "restore it from a backup"
        ) from exc
    return conn


class SeenIds:
    """Which ``(channel, platform id)`` pairs were already delivered.

    Open with :meth:`open` (or ``async with await SeenIds.open(path)``); close with
    :meth:`aclose`. ``clock`` is injectable so tests can age rows without waiting.
    """

    def __init__(
        self,
        conn: sqlite3.Connection,
        path: Path,
        *,
        retention_s: float = RETENTION_S,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._conn: sqlite3.Connection | None = conn
        self.path = path
        self.retention_s = retention_s
        self._clock = clock
        self._limiter = anyio.CapacityLimiter(1)
        self._last_prune = clock()

    @classmethod
    async def open(
        cls,
        path: Path,
        *,
        retention_s: float = RETENTION_S,
        clock: Callable[[], float] = time.time,
    ) -> SeenIds:
        conn = await anyio.to_thread.run_sync(connect, Path(path))
        seen = cls(conn, Path(path), retention_s=retention_s, clock=clock)
        await seen.prune()
        return seen

    async def aclose(self) -> None:
        """Close the connection; safe to call twice."""
        conn, self._conn = self._conn, None
        if conn is not None:
            await anyio.to_thread.run_sync(conn.close, limiter=self._limiter)

    async def __aenter__(self) -> SeenIds:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def _call(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        conn = self._conn
        if conn is None:
            raise IdempotencyError(f"the channel seen-ids record at {self.path} is closed")

        def call() -> T:
            if self._conn is None:
                raise IdempotencyError(
                    f"the channel seen-ids record at {self.path} was closed while a call waited"
                )
            return fn(conn)

        try:
            return await anyio.to_thread.run_sync(call, limiter=self._limiter)
        except sqlite3.Error as exc:
            raise IdempotencyError(
                f"the channel seen-ids record at {self.path} failed ({type(exc).__name__}: "
                f"{exc}); check free disk space and that the file is writable"
            ) from exc

    # ------------------------------------------------------------------ operations

    async def claim(self, channel: str, platform_id: str) -> bool:
        """Record the pair; ``True`` when it is new, ``False`` for a duplicate."""
        now = self._clock()
        cutoff = now - self.retention_s
        prune = now - self._last_prune >= PRUNE_EVERY_S
        if prune:
            self._last_prune = now

        def run(conn: sqlite3.Connection) -> bool:
            claimed = conn.execute(_CLAIM, (channel, platform_id, now, cutoff)).rowcount == 1
            if prune:
                conn.execute(_PRUNE, (cutoff,))
            return claimed

        return await self._call(run)

    async def release(self, channel: str, platform_id: str) -> None:
        """Forget a claim whose hand-off failed, so the platform's retry is accepted."""

        def run(conn: sqlite3.Connection) -> None:
            conn.execute(
                "DELETE FROM channel_seen_ids WHERE channel = ? AND platform_id = ?",
                (channel, platform_id),
            )

        await self._call(run)

    async def seen(self, channel: str, platform_id: str) -> bool:
        """Whether the pair was claimed within the retention window (a pure query)."""
        cutoff = self._clock() - self.retention_s

        def run(conn: sqlite3.Connection) -> bool:
            row = conn.execute(
                "SELECT 1 FROM channel_seen_ids WHERE channel = ? AND platform_id = ? "
                "AND seen_at >= ?",
                (channel, platform_id, cutoff),
            ).fetchone()
            return row is not None

        return await self._call(run)

    async def prune(self) -> int:
        """Forget every id older than the retention window; returns how many."""
        cutoff = self._clock() - self.retention_s
        self._last_prune = self._clock()

        def run(conn: sqlite3.Connection) -> int:
            return conn.execute(_PRUNE, (cutoff,)).rowcount

        return await self._call(run)

    async def count(self, channel: str | None = None) -> int:
        """How many ids are recorded (for one channel, or all)."""

        def run(conn: sqlite3.Connection) -> int:
            if channel is None:
                row: Any = conn.execute("SELECT COUNT(*) FROM channel_seen_ids").fetchone()
            else:
                row = conn.execute(
                    "SELECT COUNT(*) FROM channel_seen_ids WHERE channel = ?", (channel,)
                ).fetchone()
            return int(row[0])

        return await self._call(run)
