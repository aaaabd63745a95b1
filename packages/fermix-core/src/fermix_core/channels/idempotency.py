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

One connection, owned by a :class:`~fermix_core.sqlite_worker.SqliteWorker`: a claim is one
short autocommit statement on a small ``WITHOUT ROWID`` table, so it runs on the event loop
while the worker's thread is idle (no thread hop per delivery: under a webhook flood two
hops per delivery cost more than the statements, and each woke a thread that contended for
the GIL with the loop), and queues on the thread — where claims that arrive together share
one transaction — while another call runs there or the file is locked by another process
(the loop never waits for a lock). Checkpoints run on their own thread
(:class:`~fermix_core.sqlite_worker.Checkpointer`); this connection never checkpoints, so no
``fsync`` happens on the loop.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import anyio
import anyio.lowlevel
import anyio.to_thread

from fermix_core.sqlite_files import create_private, open_connection, use_wal
from fermix_core.sqlite_worker import Checkpointer, SqliteWorker, write_transaction

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
_RELEASE = "DELETE FROM channel_seen_ids WHERE channel = ? AND platform_id = ?"
_SEEN = "SELECT 1 FROM channel_seen_ids WHERE channel = ? AND platform_id = ? AND seen_at >= ?"


# The worker's calls: each one whole unit of work (one statement, or a write transaction
# that nests as a savepoint when claims share a batch's transaction).


def _claim(
    conn: sqlite3.Connection, channel: str, platform_id: str, now: float, cutoff: float, prune: bool
) -> bool:
    if not prune:
        return conn.execute(_CLAIM, (channel, platform_id, now, cutoff)).rowcount == 1
    with write_transaction(conn):
        claimed = conn.execute(_CLAIM, (channel, platform_id, now, cutoff)).rowcount == 1
        conn.execute(_PRUNE, (cutoff,))
    return claimed


def _release(conn: sqlite3.Connection, channel: str, platform_id: str) -> None:
    conn.execute(_RELEASE, (channel, platform_id))


def _seen(conn: sqlite3.Connection, channel: str, platform_id: str, cutoff: float) -> bool:
    return conn.execute(_SEEN, (channel, platform_id, cutoff)).fetchone() is not None


def _prune(conn: sqlite3.Connection, cutoff: float) -> int:
    return conn.execute(_PRUNE, (cutoff,)).rowcount


def _count(conn: sqlite3.Connection, channel: str | None) -> int:
    if channel is None:
        row: Any = conn.execute("SELECT COUNT(*) FROM channel_seen_ids").fetchone()
    else:
        row = conn.execute(
            "SELECT COUNT(*) FROM channel_seen_ids WHERE channel = ?", (channel,)
        ).fetchone()
    return int(row[0])


_BATCHABLE = frozenset({_claim, _release, _seen, _prune, _count})
_READ_ONLY = frozenset({_seen, _count})


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
        # Checkpoints are the Checkpointer's (its own thread): a commit of a claim on the
        # event loop must never turn into a checkpoint and its fsync.
        conn.execute("PRAGMA wal_autocheckpoint = 0")
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
        self._last_prune = clock()
        self.checkpointer = Checkpointer(path, name="fermix-seen-ids-checkpoint")
        self.worker = SqliteWorker(
            conn,
            name="fermix-seen-ids",
            batchable=_BATCHABLE,
            read_only=_READ_ONLY,
            on_commit=self.checkpointer.note_commit,
        )

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
            # Queued behind every call already waiting; calls after it find the record closed.
            await self.worker.call(conn.close)
            self.worker.stop()
            await anyio.to_thread.run_sync(self._join_threads)

    def _join_threads(self) -> None:
        self.worker.join()
        self.checkpointer.close()

    async def __aenter__(self) -> SeenIds:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def _call(self, fn: Callable[..., T], *args: Any) -> T:
        conn = self._conn
        if conn is None:
            raise IdempotencyError(f"the channel seen-ids record at {self.path} is closed")
        try:
            result = await self.worker.call_inline(fn, conn, *args)
        except sqlite3.ProgrammingError as exc:
            if self._conn is None:
                raise IdempotencyError(
                    f"the channel seen-ids record at {self.path} was closed while a call waited"
                ) from exc
            raise self._failed(exc) from exc
        except sqlite3.Error as exc:
            raise self._failed(exc) from exc
        # A call that ran inline never yielded: yield once, so a flood of deliveries cannot
        # starve the loop's other tasks (replies, timers). Shielded, so a claim that landed
        # is always returned to the caller, who releases it if the hand-off fails.
        await anyio.lowlevel.cancel_shielded_checkpoint()
        return result

    def _failed(self, exc: sqlite3.Error) -> IdempotencyError:
        return IdempotencyError(
            f"the channel seen-ids record at {self.path} failed ({type(exc).__name__}: "
            f"{exc}); check free disk space and that the file is writable"
        )

    # ------------------------------------------------------------------ operations

    async def claim(self, channel: str, platform_id: str) -> bool:
        """Record the pair; ``True`` when it is new, ``False`` for a duplicate."""
        now = self._clock()
        prune = now - self._last_prune >= PRUNE_EVERY_S
        if prune:
            self._last_prune = now
        return await self._call(_claim, channel, platform_id, now, now - self.retention_s, prune)

    async def release(self, channel: str, platform_id: str) -> None:
        """Forget a claim whose hand-off failed, so the platform's retry is accepted."""
        await self._call(_release, channel, platform_id)

    async def seen(self, channel: str, platform_id: str) -> bool:
        """Whether the pair was claimed within the retention window (a pure query)."""
        return await self._call(_seen, channel, platform_id, self._clock() - self.retention_s)

    async def prune(self) -> int:
        """Forget every id older than the retention window; returns how many."""
        cutoff = self._clock() - self.retention_s
        self._last_prune = self._clock()
        return await self._call(_prune, cutoff)

    async def count(self, channel: str | None = None) -> int:
        """How many ids are recorded (for one channel, or all)."""
        return await self._call(_count, channel)
