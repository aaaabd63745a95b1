"""Durable job state: the :class:`JobStore` contract and its SQLite backend in ``memory.db``.

The contract is what the scheduler relies on, written so another backend (PostgreSQL with
row locks) can implement it without the scheduler changing:

* **claim** takes a ``scheduled`` job and inserts its ``queued`` run in *one* transaction,
  and only succeeds if the job was still ``scheduled`` (and, for a scheduled fire, still
  due at the time the caller saw): two schedulers racing for one job get one run. SQLite
  gets that from ``BEGIN IMMEDIATE`` plus a conditional ``UPDATE``; PostgreSQL would
  ``SELECT … FOR UPDATE SKIP LOCKED`` the job row first.
* a job is ``running`` only while one of its runs is ``queued`` or ``running``;
* **settle** writes the run's final row and releases the job (to ``scheduled``,
  ``completed``, ``expired`` or ``disabled``) in another single transaction; a job the
  user paused while its run was going stays paused;
* **recover** (at start-up) settles every run a dead daemon left queued or running as
  ``failed`` with the reason, and makes its job schedulable again.

Tables (component ``"jobs"`` of the shared ``schema_version`` table, so jobs migrate
independently of history and memory): ``jobs`` and ``job_runs``. Instants are Unix
timestamps; lists and mappings are JSON text.
"""

from __future__ import annotations

import json
import sqlite3
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, TypeVar

import anyio
import anyio.to_thread

from fermix_core.jobs.records import (
    ACTIVE_RUN_STATUSES,
    DELIVERY_MODES,
    JOB_STATUSES,
    RUN_STATUSES,
    TRIGGERS,
    JobNotFound,
    JobRecord,
    JobStateError,
    JobStoreError,
    RunRecord,
)
from fermix_core.sqlite_files import create_private, open_connection, use_wal

__all__ = [
    "COMPONENT",
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "JobStore",
    "JobStoreSchemaError",
    "Scan",
    "SqliteJobStore",
]

T = TypeVar("T")

COMPONENT = "jobs"
SCHEMA_VERSION = 1
BUSY_TIMEOUT_S = 10.0

#: Columns ``update_job`` may change; everything else is owned by the scheduler.
EDITABLE = frozenset(
    {
        "description",
        "task_prompt",
        "schedule_kind",
        "schedule",
        "timezone",
        "status",
        "allowed_tools",
        "skill_name",
        "provider",
        "model",
        "delivery_mode",
        "delivery_target",
        "expires_at",
        "next_run_at",
        "anchor_at",
        "last_error",
    }
)
_JSON_JOB = ("creator", "allowed_tools", "delivery_target")
_JSON_RUN = ("config", "usage")


def _check(column: str, values: Iterable[str]) -> str:
    return f"CHECK ({column} IN ({', '.join(repr(v) for v in values)}))"


_V1 = (
    "CREATE TABLE IF NOT EXISTS schema_version "
    "(component VARCHAR NOT NULL, version INTEGER NOT NULL, PRIMARY KEY (component))",
    f"""CREATE TABLE IF NOT EXISTS jobs (
        id TEXT PRIMARY KEY,
        description TEXT NOT NULL DEFAULT '',
        task_prompt TEXT NOT NULL,
        schedule_kind TEXT NOT NULL,
        schedule TEXT NOT NULL,
        timezone TEXT NOT NULL,
        status TEXT NOT NULL {_check("status", JOB_STATUSES)},
        trust TEXT NOT NULL CHECK (trust IN ('operator', 'guest')),
        creator TEXT NOT NULL DEFAULT '{{}}',
        allowed_tools TEXT,
        skill_name TEXT,
        provider TEXT,
        model TEXT,
        delivery_mode TEXT NOT NULL {_check("delivery_mode", DELIVERY_MODES)},
        delivery_target TEXT,
        timeout_seconds INTEGER NOT NULL,
        inactivity_timeout_seconds INTEGER,
        max_iterations INTEGER NOT NULL,
        expires_at REAL,
        next_run_at REAL,
        anchor_at REAL,
        last_run_at REAL,
        last_status TEXT,
        last_error TEXT,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS ix_jobs_due ON jobs (status, next_run_at)",
    "CREATE INDEX IF NOT EXISTS ix_jobs_expiry ON jobs (expires_at) WHERE expires_at IS NOT NULL",
    f"""CREATE TABLE IF NOT EXISTS job_runs (
        id INTEGER PRIMARY KEY,
        job_id TEXT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
        trigger TEXT NOT NULL {_check("trigger", TRIGGERS)},
        status TEXT NOT NULL {_check("status", RUN_STATUSES)},
        due_at REAL,
        queued_at REAL NOT NULL,
        started_at REAL,
        finished_at REAL,
        session_id TEXT NOT NULL DEFAULT '',
        config TEXT NOT NULL DEFAULT '{{}}',
        prompt_snapshot TEXT,
        final_response TEXT,
        error TEXT,
        usage TEXT NOT NULL DEFAULT '{{}}',
        model TEXT,
        provider TEXT,
        attempts INTEGER NOT NULL DEFAULT 0,
        delivery_status TEXT NOT NULL DEFAULT 'pending',
        delivery_error TEXT,
        delivery_attempts INTEGER NOT NULL DEFAULT 0
    )""",
    "CREATE INDEX IF NOT EXISTS ix_job_runs_job ON job_runs (job_id, id)",
    "CREATE INDEX IF NOT EXISTS ix_job_runs_active ON job_runs (status) "
    "WHERE status IN ('queued', 'running')",
)

#: ``{target_version: statements}``; version 1 creates the tables. A later change appends
#: ``MIGRATIONS[2]`` and bumps :data:`SCHEMA_VERSION`; an older file runs every step after
#: its version, in order, inside one transaction.
MIGRATIONS: dict[int, tuple[str, ...]] = {1: _V1}


class JobStoreSchemaError(JobStoreError):
    """``memory.db`` holds a jobs schema newer than this build; nothing was written."""


# --------------------------------------------------------------------------- contract


@dataclass
class Scan:
    """One scheduler pass's read: what expired, what is due, and the earliest next time."""

    expired: list[str]
    due: list[JobRecord]
    #: ``next_due_at()`` as of this scan (after the expiries, before any claim).
    next_due: float | None


class JobStore(ABC):
    """What the scheduler, the runner, the job tools and the CLI need from durable state.

    Every method is one transaction. See the module docstring for the claim contract.
    """

    @abstractmethod
    async def create_job(self, job: JobRecord) -> JobRecord: ...

    @abstractmethod
    async def get_job(self, job_id: str) -> JobRecord | None: ...

    @abstractmethod
    async def list_jobs(self, statuses: Iterable[str] | None = None) -> list[JobRecord]: ...

    @abstractmethod
    async def update_job(
        self, job_id: str, changes: Mapping[str, Any], *, now: float, expect: Iterable[str] = ()
    ) -> JobRecord:
        """Apply *changes* (:data:`EDITABLE` columns); with *expect*, only from those states."""

    @abstractmethod
    async def remove_job(self, job_id: str) -> bool:
        """Delete the job and its run history; ``False`` when there was no such job."""

    @abstractmethod
    async def next_due_at(self) -> float | None:
        """The earliest ``next_run_at`` or ``expires_at`` of a ``scheduled`` job."""

    @abstractmethod
    async def expire_due(self, now: float) -> list[str]:
        """Move ``scheduled``/``paused`` jobs whose ``expires_at`` has passed to ``expired``."""

    @abstractmethod
    async def due_jobs(self, now: float, limit: int) -> list[JobRecord]:
        """Up to *limit* ``scheduled`` jobs due at *now*, earliest first."""

    async def scan(self, now: float, limit: int) -> Scan:
        """:meth:`expire_due`, :meth:`due_jobs` and :meth:`next_due_at` in one go.

        A backend may answer it in one round trip (the SQLite store does: one worker-thread
        hop per idle pass instead of three); this default composes the three calls.
        """
        expired = await self.expire_due(now)
        due = await self.due_jobs(now, limit)
        return Scan(expired, due, await self.next_due_at())

    @abstractmethod
    async def claim(
        self,
        job_id: str,
        *,
        now: float,
        trigger: str,
        session_id: str,
        config: Mapping[str, Any],
        due_at: float | None = None,
        next_run_at: float | None = None,
    ) -> RunRecord | None:
        """Take the job and insert its queued run; ``None`` when someone else has it.

        A ``schedule`` claim succeeds only while the job's ``next_run_at`` still equals
        *due_at*, and moves it to *next_run_at*; a ``manual`` claim leaves the cadence alone.
        """

    @abstractmethod
    async def start_run(self, run_id: int, *, now: float, prompt_snapshot: str) -> None: ...

    @abstractmethod
    async def settle(
        self,
        run_id: int,
        *,
        status: str,
        now: float,
        job_status: str = "scheduled",
        final_response: str | None = None,
        error: str | None = None,
        usage: Mapping[str, int] | None = None,
        model: str | None = None,
        provider: str | None = None,
        attempts: int = 0,
    ) -> RunRecord:
        """Write the run's final row and release its job to *job_status*."""

    @abstractmethod
    async def record_delivery(
        self, run_id: int, *, status: str, error: str | None, attempts: int
    ) -> None: ...

    @abstractmethod
    async def skip_missed(
        self, job_id: str, *, due_at: float, next_run_at: float | None, now: float, reason: str
    ) -> RunRecord | None:
        """Record a missed fire and advance the schedule; ``None`` if the job moved on."""

    @abstractmethod
    async def recover(self, *, now: float, reason: str) -> list[RunRecord]:
        """Fail every run left queued/running and release its job; returns those runs."""

    @abstractmethod
    async def list_runs(
        self, job_id: str, *, statuses: Iterable[str] | None = None, limit: int = 20
    ) -> list[RunRecord]:
        """A job's runs, newest first."""

    @abstractmethod
    async def get_run(self, run_id: int) -> RunRecord | None: ...

    @abstractmethod
    async def aclose(self) -> None: ...


# --------------------------------------------------------------------------- SQLite


def _read_version(conn: sqlite3.Connection) -> int:
    if (
        conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'"
        ).fetchone()
        is None
    ):
        return 0
    row = conn.execute(
        "SELECT version FROM schema_version WHERE component = ?", (COMPONENT,)
    ).fetchone()
    return int(row[0]) if row else 0


def _check_version(found: int, path: Path, current: int) -> None:
    if found > current:
        raise JobStoreSchemaError(
            f"{path} has jobs schema version {found}, but this Fermix only knows versions up to "
            f"{current}; upgrade fermix (the file was left untouched)"
        )


def migrate(
    conn: sqlite3.Connection,
    path: Path,
    *,
    current: int = SCHEMA_VERSION,
    migrations: Mapping[int, Iterable[str]] = MIGRATIONS,
) -> tuple[int, int]:
    """Bring the jobs tables to *current* in one transaction; returns ``(found, now)``."""
    found = _read_version(conn)
    _check_version(found, path, current)
    if found == current:
        return found, found
    conn.execute("BEGIN IMMEDIATE")
    try:
        found = _read_version(conn)  # another process may have migrated meanwhile
        _check_version(found, path, current)
        for version in range(found + 1, current + 1):
            steps = migrations.get(version)
            if steps is None:
                raise JobStoreError(
                    f"no migration from jobs schema {version - 1} to {version}; this build is "
                    "broken, reinstall fermix"
                )
            for statement in steps:
                conn.execute(statement)
        if found < current:
            conn.execute(
                "INSERT INTO schema_version (component, version) VALUES (?, ?) "
                "ON CONFLICT (component) DO UPDATE SET version = excluded.version",
                (COMPONENT, current),
            )
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return found, current


def connect(path: Path) -> sqlite3.Connection:
    path = Path(path)
    create_private(path, JobStoreError)
    conn = open_connection(path, JobStoreError, BUSY_TIMEOUT_S)
    try:
        _check_version(_read_version(conn), path, SCHEMA_VERSION)
        conn.execute("PRAGMA foreign_keys = ON")
        use_wal(conn, path, JobStoreError)
        migrate(conn, path)
    except JobStoreError:
        conn.close()
        raise
    except sqlite3.DatabaseError as exc:
        conn.close()
        raise JobStoreError(
            f"cannot prepare {path} for scheduled jobs ({exc}); if another Fermix process holds "
            "it, stop that one (`fermix stop`); if the file is damaged, move it aside or restore "
            "it from a backup"
        ) from exc
    return conn


_JOB_COLUMNS = tuple(f.name for f in fields(JobRecord))
_RUN_COLUMNS = tuple(f.name for f in fields(RunRecord))
# Column names come from the record dataclasses, never from input; values are always bound.
_SELECT_JOB = f"SELECT {', '.join(_JOB_COLUMNS)} FROM jobs"  # noqa: S608
_SELECT_RUN = f"SELECT {', '.join(_RUN_COLUMNS)} FROM job_runs"  # noqa: S608


def _dump(value: Any) -> str | None:
    return None if value is None else json.dumps(value, ensure_ascii=False, sort_keys=True)


def _job(row: tuple) -> JobRecord:
    values = dict(zip(_JOB_COLUMNS, row, strict=True))
    for name in _JSON_JOB:
        raw = values[name]
        values[name] = json.loads(raw) if raw is not None else None
    if values["creator"] is None:
        values["creator"] = {}
    return JobRecord(**values)


def _run(row: tuple) -> RunRecord:
    values = dict(zip(_RUN_COLUMNS, row, strict=True))
    for name in _JSON_RUN:
        values[name] = json.loads(values[name] or "{}")
    return RunRecord(**values)


class SyncJobStore:
    """All SQL of the job store; one caller at a time (the async facade guarantees it)."""

    def __init__(self, conn: sqlite3.Connection, path: Path) -> None:
        self.conn = conn
        self.path = path

    def close(self) -> None:
        self.conn.close()

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        conn = self.conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise

    def _get_job(self, job_id: str) -> JobRecord | None:
        row = self.conn.execute(f"{_SELECT_JOB} WHERE id = ?", (job_id,)).fetchone()
        return _job(row) if row else None

    def _get_run(self, run_id: int) -> RunRecord | None:
        row = self.conn.execute(f"{_SELECT_RUN} WHERE id = ?", (run_id,)).fetchone()
        return _run(row) if row else None

    # ------------------------------------------------------------------ jobs

    def create_job(self, job: JobRecord) -> JobRecord:
        values = job.as_dict()
        for name in _JSON_JOB:
            values[name] = _dump(values[name])
        placeholders = ", ".join("?" for _ in _JOB_COLUMNS)
        with self._write() as conn:
            try:
                conn.execute(
                    f"INSERT INTO jobs ({', '.join(_JOB_COLUMNS)}) VALUES ({placeholders})",  # noqa: S608
                    [values[c] for c in _JOB_COLUMNS],
                )
            except sqlite3.IntegrityError as exc:
                raise JobStoreError(f"job {job.id} could not be stored: {exc}") from exc
        stored = self._get_job(job.id)
        assert stored is not None
        return stored

    def get_job(self, job_id: str) -> JobRecord | None:
        return self._get_job(job_id)

    def list_jobs(self, statuses: tuple[str, ...] | None) -> list[JobRecord]:
        if statuses:
            marks = ", ".join("?" for _ in statuses)
            rows = self.conn.execute(
                f"{_SELECT_JOB} WHERE status IN ({marks}) ORDER BY created_at, id", statuses
            ).fetchall()
        else:
            rows = self.conn.execute(f"{_SELECT_JOB} ORDER BY created_at, id").fetchall()
        return [_job(r) for r in rows]

    def update_job(
        self, job_id: str, changes: dict[str, Any], now: float, expect: tuple[str, ...]
    ) -> JobRecord:
        unknown = set(changes) - EDITABLE
        if unknown:
            raise JobStoreError(f"cannot edit {', '.join(sorted(unknown))} of a job")
        with self._write() as conn:
            current = self._get_job(job_id)
            if current is None:
                raise JobNotFound(f"no job {job_id!r}; list_jobs shows the ids")
            if expect and current.status not in expect:
                raise JobStateError(
                    f"job {job_id} is {current.status}; this needs it to be {' or '.join(expect)}"
                )
            if changes.get("status") == "scheduled" and self._has_active_run(job_id):
                # Resumed while its run is still going: it is running until that run settles.
                changes = {**changes, "status": "running"}
            if changes:
                values = {
                    k: (_dump(v) if k in _JSON_JOB else v) for k, v in sorted(changes.items())
                }
                assignments = ", ".join(f"{k} = ?" for k in values)
                conn.execute(
                    # Keys were checked against EDITABLE above.
                    f"UPDATE jobs SET {assignments}, updated_at = ? WHERE id = ?",  # noqa: S608
                    [*values.values(), now, job_id],
                )
        updated = self._get_job(job_id)
        assert updated is not None
        return updated

    def _has_active_run(self, job_id: str) -> bool:
        row = self.conn.execute(
            "SELECT 1 FROM job_runs WHERE job_id = ? AND status IN ('queued', 'running') LIMIT 1",
            (job_id,),
        ).fetchone()
        return row is not None

    def remove_job(self, job_id: str) -> bool:
        with self._write() as conn:
            return conn.execute("DELETE FROM jobs WHERE id = ?", (job_id,)).rowcount > 0

    def next_due_at(self) -> float | None:
        # Two indexed lookups: the due index, and the partial index over jobs that expire.
        due = self.conn.execute(
            "SELECT MIN(next_run_at) FROM jobs WHERE status = 'scheduled'"
        ).fetchone()[0]
        expiry = self.conn.execute(
            # INDEXED BY: without statistics the planner would walk the status index instead.
            "SELECT MIN(expires_at) FROM jobs INDEXED BY ix_jobs_expiry "
            "WHERE expires_at IS NOT NULL AND status = 'scheduled'"
        ).fetchone()[0]
        present = [v for v in (due, expiry) if v is not None]
        return min(present) if present else None

    def expire_due(self, now: float) -> list[str]:
        with self._write() as conn:
            rows = conn.execute(
                "SELECT id FROM jobs INDEXED BY ix_jobs_expiry WHERE expires_at IS NOT NULL "
                "AND expires_at <= ? AND status IN ('scheduled', 'paused') ORDER BY id",
                (now,),
            ).fetchall()
            ids = [r[0] for r in rows]
            for job_id in ids:
                conn.execute(
                    "UPDATE jobs SET status = 'expired', next_run_at = NULL, updated_at = ? "
                    "WHERE id = ?",
                    (now, job_id),
                )
        return ids

    def scan(self, now: float, limit: int) -> Scan:
        expired = self.expire_due(now)
        return Scan(expired, self.due_jobs(now, limit), self.next_due_at())

    def due_jobs(self, now: float, limit: int) -> list[JobRecord]:
        rows = self.conn.execute(
            f"{_SELECT_JOB} WHERE status = 'scheduled' AND next_run_at <= ? "
            "ORDER BY next_run_at, id LIMIT ?",
            (now, limit),
        ).fetchall()
        return [_job(r) for r in rows]

    # ------------------------------------------------------------------ runs

    def claim(
        self,
        job_id: str,
        now: float,
        trigger: str,
        session_id: str,
        config: dict[str, Any],
        due_at: float | None,
        next_run_at: float | None,
    ) -> RunRecord | None:
        if trigger not in TRIGGERS:
            raise JobStoreError(f"unknown trigger {trigger!r}")
        with self._write() as conn:
            if trigger == "schedule":
                taken = conn.execute(
                    "UPDATE jobs SET status = 'running', next_run_at = ?, updated_at = ? "
                    "WHERE id = ? AND status = 'scheduled' AND next_run_at = ?",
                    (next_run_at, now, job_id, due_at),
                ).rowcount
            else:
                taken = conn.execute(
                    "UPDATE jobs SET status = 'running', updated_at = ? "
                    "WHERE id = ? AND status = 'scheduled'",
                    (now, job_id),
                ).rowcount
            if not taken:
                return None
            run_id = conn.execute(
                "INSERT INTO job_runs (job_id, trigger, status, due_at, queued_at, session_id, "
                "config) VALUES (?, ?, 'queued', ?, ?, ?, ?)",
                (job_id, trigger, due_at, now, session_id, _dump(config)),
            ).lastrowid
        run = self._get_run(int(run_id))
        assert run is not None
        return run

    def start_run(self, run_id: int, now: float, prompt_snapshot: str) -> None:
        with self._write() as conn:
            conn.execute(
                "UPDATE job_runs SET status = 'running', started_at = ?, prompt_snapshot = ? "
                "WHERE id = ? AND status = 'queued'",
                (now, prompt_snapshot, run_id),
            )

    def settle(self, run_id: int, values: dict[str, Any], job_status: str) -> RunRecord:
        status = values["status"]
        if status in ACTIVE_RUN_STATUSES or status not in RUN_STATUSES:
            raise JobStoreError(f"{status!r} is not a final run status")
        if job_status not in JOB_STATUSES or job_status == "running":
            raise JobStoreError(f"{job_status!r} is not a status a run can release its job to")
        with self._write() as conn:
            run = self._get_run(run_id)
            if run is None:
                raise JobNotFound(f"no run {run_id}")
            if run.status not in ACTIVE_RUN_STATUSES:
                raise JobStateError(f"run {run_id} is already settled ({run.status})")
            conn.execute(
                "UPDATE job_runs SET status = ?, finished_at = ?, final_response = ?, error = ?, "
                "usage = ?, model = ?, provider = ?, attempts = ? WHERE id = ?",
                (
                    status,
                    values["now"],
                    values.get("final_response"),
                    values.get("error"),
                    _dump(dict(values.get("usage") or {})),
                    values.get("model"),
                    values.get("provider"),
                    values.get("attempts", 0),
                    run_id,
                ),
            )
            # The job is released only from 'running': a job paused (or disabled) while the
            # run was going keeps the state it was put in.
            conn.execute(
                "UPDATE jobs SET status = CASE WHEN status = 'running' THEN ? ELSE status END, "
                "last_run_at = ?, last_status = ?, last_error = ?, updated_at = ? WHERE id = ?",
                (
                    job_status,
                    values["now"],
                    status,
                    values.get("error"),
                    values["now"],
                    run.job_id,
                ),
            )
        settled = self._get_run(run_id)
        assert settled is not None
        return settled

    def record_delivery(self, run_id: int, status: str, error: str | None, attempts: int) -> None:
        with self._write() as conn:
            conn.execute(
                "UPDATE job_runs SET delivery_status = ?, delivery_error = ?, "
                "delivery_attempts = ? WHERE id = ?",
                (status, error, attempts, run_id),
            )

    def skip_missed(
        self, job_id: str, due_at: float, next_run_at: float | None, now: float, reason: str
    ) -> RunRecord | None:
        with self._write() as conn:
            moved = conn.execute(
                "UPDATE jobs SET next_run_at = ?, updated_at = ? "
                "WHERE id = ? AND status = 'scheduled' AND next_run_at = ?",
                (next_run_at, now, job_id, due_at),
            ).rowcount
            if not moved:
                return None
            run_id = conn.execute(
                "INSERT INTO job_runs (job_id, trigger, status, due_at, queued_at, finished_at, "
                "error, delivery_status) VALUES (?, 'schedule', 'missed', ?, ?, ?, ?, 'none')",
                (job_id, due_at, now, now, reason),
            ).lastrowid
        return self._get_run(int(run_id))

    def recover(self, now: float, reason: str) -> list[RunRecord]:
        with self._write() as conn:
            rows = conn.execute(
                f"{_SELECT_RUN} WHERE status IN ('queued', 'running') ORDER BY id"
            ).fetchall()
            runs = [_run(r) for r in rows]
            for run in runs:
                conn.execute(
                    "UPDATE job_runs SET status = 'failed', finished_at = ?, error = ?, "
                    "delivery_status = CASE WHEN delivery_status = 'pending' THEN 'none' "
                    "ELSE delivery_status END WHERE id = ?",
                    (now, reason, run.id),
                )
            conn.execute(
                "UPDATE jobs SET status = 'scheduled', last_status = 'failed', last_error = ?, "
                "last_run_at = ?, updated_at = ? WHERE status = 'running'",
                (reason, now, now),
            )
        return [r for r in (self._get_run(run.id) for run in runs) if r is not None]

    def list_runs(
        self, job_id: str, statuses: tuple[str, ...] | None, limit: int
    ) -> list[RunRecord]:
        sql = f"{_SELECT_RUN} WHERE job_id = ?"
        params: list[Any] = [job_id]
        if statuses:
            sql += f" AND status IN ({', '.join('?' for _ in statuses)})"
            params += statuses
        sql += " ORDER BY id DESC LIMIT ?"
        params.append(limit)
        return [_run(r) for r in self.conn.execute(sql, params).fetchall()]

    def get_run(self, run_id: int) -> RunRecord | None:
        return self._get_run(run_id)


class SqliteJobStore(JobStore):
    """Jobs in ``memory.db``. Build it with ``await SqliteJobStore.open(path)``."""

    def __init__(self, sync: SyncJobStore) -> None:
        self._sync: SyncJobStore | None = sync
        self._limiter = anyio.CapacityLimiter(1)
        self.path = sync.path

    @classmethod
    async def open(cls, path: Path | str) -> SqliteJobStore:
        target = Path(path)
        conn = await anyio.to_thread.run_sync(connect, target)
        return cls(SyncJobStore(conn, target))

    async def aclose(self) -> None:
        sync, self._sync = self._sync, None
        if sync is not None:
            await anyio.to_thread.run_sync(sync.close, limiter=self._limiter)

    async def _call(self, method: Callable[..., T], /, *args: Any) -> T:
        sync = self._sync
        if sync is None:
            raise JobStoreError(f"the job store for {self.path} is closed")

        def call() -> T:
            if self._sync is None:
                raise JobStoreError(f"the job store for {self.path} was closed while waiting")
            return method(sync, *args)

        try:
            return await anyio.to_thread.run_sync(call, limiter=self._limiter)
        except sqlite3.Error as exc:
            raise JobStoreError(
                f"scheduled jobs in {self.path} failed ({type(exc).__name__}: {exc}); check free "
                "disk space and that the file is writable, then retry"
            ) from exc

    async def create_job(self, job: JobRecord) -> JobRecord:
        return await self._call(SyncJobStore.create_job, job)

    async def get_job(self, job_id: str) -> JobRecord | None:
        return await self._call(SyncJobStore.get_job, job_id)

    async def list_jobs(self, statuses: Iterable[str] | None = None) -> list[JobRecord]:
        return await self._call(SyncJobStore.list_jobs, tuple(statuses) if statuses else None)

    async def update_job(
        self, job_id: str, changes: Mapping[str, Any], *, now: float, expect: Iterable[str] = ()
    ) -> JobRecord:
        return await self._call(SyncJobStore.update_job, job_id, dict(changes), now, tuple(expect))

    async def remove_job(self, job_id: str) -> bool:
        return await self._call(SyncJobStore.remove_job, job_id)

    async def next_due_at(self) -> float | None:
        return await self._call(SyncJobStore.next_due_at)

    async def due_jobs(self, now: float, limit: int) -> list[JobRecord]:
        return await self._call(SyncJobStore.due_jobs, now, limit)

    async def expire_due(self, now: float) -> list[str]:
        return await self._call(SyncJobStore.expire_due, now)

    async def scan(self, now: float, limit: int) -> Scan:
        return await self._call(SyncJobStore.scan, now, limit)

    async def claim(
        self,
        job_id: str,
        *,
        now: float,
        trigger: str,
        session_id: str,
        config: Mapping[str, Any],
        due_at: float | None = None,
        next_run_at: float | None = None,
    ) -> RunRecord | None:
        return await self._call(
            SyncJobStore.claim, job_id, now, trigger, session_id, dict(config), due_at, next_run_at
        )

    async def start_run(self, run_id: int, *, now: float, prompt_snapshot: str) -> None:
        await self._call(SyncJobStore.start_run, run_id, now, prompt_snapshot)

    async def settle(
        self,
        run_id: int,
        *,
        status: str,
        now: float,
        job_status: str = "scheduled",
        final_response: str | None = None,
        error: str | None = None,
        usage: Mapping[str, int] | None = None,
        model: str | None = None,
        provider: str | None = None,
        attempts: int = 0,
    ) -> RunRecord:
        values = {
            "status": status,
            "now": now,
            "final_response": final_response,
            "error": error,
            "usage": usage,
            "model": model,
            "provider": provider,
            "attempts": attempts,
        }
        return await self._call(SyncJobStore.settle, run_id, values, job_status)

    async def record_delivery(
        self, run_id: int, *, status: str, error: str | None, attempts: int
    ) -> None:
        await self._call(SyncJobStore.record_delivery, run_id, status, error, attempts)

    async def skip_missed(
        self, job_id: str, *, due_at: float, next_run_at: float | None, now: float, reason: str
    ) -> RunRecord | None:
        return await self._call(SyncJobStore.skip_missed, job_id, due_at, next_run_at, now, reason)

    async def recover(self, *, now: float, reason: str) -> list[RunRecord]:
        return await self._call(SyncJobStore.recover, now, reason)

    async def list_runs(
        self, job_id: str, *, statuses: Iterable[str] | None = None, limit: int = 20
    ) -> list[RunRecord]:
        return await self._call(
            SyncJobStore.list_runs, job_id, tuple(statuses) if statuses else None, limit
        )

    async def get_run(self, run_id: int) -> RunRecord | None:
        return await self._call(SyncJobStore.get_run, run_id)
