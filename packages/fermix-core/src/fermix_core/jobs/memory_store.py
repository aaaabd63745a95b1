"""An in-process :class:`JobStore`: the second implementation of the claim contract.

It keeps jobs and runs in dictionaries behind one lock, so each method is atomic the way
a transaction is; it passes the same :class:`fermix_core.testing.jobs.JobStoreContract` as
the SQLite store. Useful for embedding apps that want jobs without a database file, and as
the proof that the scheduler depends on the contract, not on SQLite.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import Any

import anyio

from fermix_core.jobs.records import (
    ACTIVE_RUN_STATUSES,
    JOB_STATUSES,
    RUN_STATUSES,
    TRIGGERS,
    JobNotFound,
    JobRecord,
    JobStateError,
    JobStoreError,
    RunRecord,
)
from fermix_core.jobs.store import EDITABLE, JobStore

__all__ = ["InMemoryJobStore"]


class InMemoryJobStore(JobStore):
    def __init__(self) -> None:
        self._jobs: dict[str, JobRecord] = {}
        self._runs: dict[int, RunRecord] = {}
        self._next_run = 1
        self._lock = anyio.Lock()
        self._closed = False

    def _open(self) -> None:
        if self._closed:
            raise JobStoreError("the in-memory job store is closed")

    @staticmethod
    def _copy(record: Any) -> Any:
        return copy.deepcopy(record)

    def _active(self, job_id: str) -> bool:
        return any(
            r.job_id == job_id and r.status in ACTIVE_RUN_STATUSES for r in self._runs.values()
        )

    async def create_job(self, job: JobRecord) -> JobRecord:
        async with self._lock:
            self._open()
            if job.id in self._jobs:
                raise JobStoreError(f"job {job.id} could not be stored: the id exists")
            self._jobs[job.id] = self._copy(job)
            return self._copy(job)

    async def get_job(self, job_id: str) -> JobRecord | None:
        job = self._jobs.get(job_id)
        return self._copy(job) if job else None

    async def list_jobs(self, statuses: Iterable[str] | None = None) -> list[JobRecord]:
        wanted = set(statuses) if statuses else None
        jobs = sorted(self._jobs.values(), key=lambda j: (j.created_at, j.id))
        return [self._copy(j) for j in jobs if wanted is None or j.status in wanted]

    async def update_job(
        self, job_id: str, changes: Mapping[str, Any], *, now: float, expect: Iterable[str] = ()
    ) -> JobRecord:
        unknown = set(changes) - EDITABLE
        if unknown:
            raise JobStoreError(f"cannot edit {', '.join(sorted(unknown))} of a job")
        async with self._lock:
            self._open()
            job = self._jobs.get(job_id)
            if job is None:
                raise JobNotFound(f"no job {job_id!r}; list_jobs shows the ids")
            expected = tuple(expect)
            if expected and job.status not in expected:
                raise JobStateError(
                    f"job {job_id} is {job.status}; this needs it to be {' or '.join(expected)}"
                )
            values = dict(changes)
            if values.get("status") == "scheduled" and self._active(job_id):
                values["status"] = "running"
            if values:
                for key, value in values.items():
                    setattr(job, key, copy.deepcopy(value))
                job.updated_at = now
            return self._copy(job)

    async def remove_job(self, job_id: str) -> bool:
        async with self._lock:
            self._open()
            if self._jobs.pop(job_id, None) is None:
                return False
            for run_id in [r.id for r in self._runs.values() if r.job_id == job_id]:
                del self._runs[run_id]
            return True

    async def next_due_at(self) -> float | None:
        stamps = [
            stamp
            for job in self._jobs.values()
            if job.status == "scheduled"
            for stamp in (job.next_run_at, job.expires_at)
            if stamp is not None
        ]
        return min(stamps) if stamps else None

    async def expire_due(self, now: float) -> list[str]:
        async with self._lock:
            self._open()
            expired = sorted(
                job.id
                for job in self._jobs.values()
                if job.status in ("scheduled", "paused")
                and job.expires_at is not None
                and job.expires_at <= now
            )
            for job_id in expired:
                job = self._jobs[job_id]
                job.status, job.next_run_at, job.updated_at = "expired", None, now
            return expired

    async def due_jobs(self, now: float, limit: int) -> list[JobRecord]:
        due = [
            job
            for job in self._jobs.values()
            if job.status == "scheduled" and job.next_run_at is not None and job.next_run_at <= now
        ]
        due.sort(key=lambda j: (j.next_run_at, j.id))
        return [self._copy(j) for j in due[:limit]]

    def _insert_run(self, **values: Any) -> RunRecord:
        run = RunRecord(id=self._next_run, **values)
        self._next_run += 1
        self._runs[run.id] = run
        return run

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
        if trigger not in TRIGGERS:
            raise JobStoreError(f"unknown trigger {trigger!r}")
        async with self._lock:
            self._open()
            job = self._jobs.get(job_id)
            if job is None or job.status != "scheduled":
                return None
            if trigger == "schedule":
                if job.next_run_at != due_at:
                    return None
                job.next_run_at = next_run_at
            job.status, job.updated_at = "running", now
            run = self._insert_run(
                job_id=job_id,
                trigger=trigger,
                status="queued",
                due_at=due_at,
                queued_at=now,
                session_id=session_id,
                config=copy.deepcopy(dict(config)),
            )
            return self._copy(run)

    async def start_run(self, run_id: int, *, now: float, prompt_snapshot: str) -> None:
        async with self._lock:
            run = self._runs.get(run_id)
            if run is not None and run.status == "queued":
                run.status, run.started_at, run.prompt_snapshot = "running", now, prompt_snapshot

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
        if status in ACTIVE_RUN_STATUSES or status not in RUN_STATUSES:
            raise JobStoreError(f"{status!r} is not a final run status")
        if job_status not in JOB_STATUSES or job_status == "running":
            raise JobStoreError(f"{job_status!r} is not a status a run can release its job to")
        async with self._lock:
            self._open()
            run = self._runs.get(run_id)
            if run is None:
                raise JobNotFound(f"no run {run_id}")
            if run.status not in ACTIVE_RUN_STATUSES:
                raise JobStateError(f"run {run_id} is already settled ({run.status})")
            run.status, run.finished_at = status, now
            run.final_response, run.error = final_response, error
            run.usage = dict(usage or {})
            run.model, run.provider, run.attempts = model, provider, attempts
            job = self._jobs.get(run.job_id)
            if job is not None:
                if job.status == "running":
                    job.status = job_status
                job.last_run_at, job.last_status, job.last_error = now, status, error
                job.updated_at = now
            return self._copy(run)

    async def record_delivery(
        self, run_id: int, *, status: str, error: str | None, attempts: int
    ) -> None:
        async with self._lock:
            run = self._runs.get(run_id)
            if run is not None:
                run.delivery_status, run.delivery_error = status, error
                run.delivery_attempts = attempts

    async def skip_missed(
        self, job_id: str, *, due_at: float, next_run_at: float | None, now: float, reason: str
    ) -> RunRecord | None:
        async with self._lock:
            self._open()
            job = self._jobs.get(job_id)
            if job is None or job.status != "scheduled" or job.next_run_at != due_at:
                return None
            job.next_run_at, job.updated_at = next_run_at, now
            run = self._insert_run(
                job_id=job_id,
                trigger="schedule",
                status="missed",
                due_at=due_at,
                queued_at=now,
                finished_at=now,
                error=reason,
                delivery_status="none",
            )
            return self._copy(run)

    async def recover(self, *, now: float, reason: str) -> list[RunRecord]:
        async with self._lock:
            self._open()
            recovered = []
            for run in sorted(self._runs.values(), key=lambda r: r.id):
                if run.status in ACTIVE_RUN_STATUSES:
                    run.status, run.finished_at, run.error = "failed", now, reason
                    if run.delivery_status == "pending":
                        run.delivery_status = "none"
                    recovered.append(self._copy(run))
            for job in self._jobs.values():
                if job.status == "running":
                    job.status, job.last_status, job.last_error = "scheduled", "failed", reason
                    job.last_run_at = job.updated_at = now
            return recovered

    async def list_runs(
        self, job_id: str, *, statuses: Iterable[str] | None = None, limit: int = 20
    ) -> list[RunRecord]:
        wanted = set(statuses) if statuses else None
        runs = [
            r
            for r in self._runs.values()
            if r.job_id == job_id and (wanted is None or r.status in wanted)
        ]
        runs.sort(key=lambda r: r.id, reverse=True)
        return [self._copy(r) for r in runs[:limit]]

    async def get_run(self, run_id: int) -> RunRecord | None:
        run = self._runs.get(run_id)
        return self._copy(run) if run else None

    async def aclose(self) -> None:
        self._closed = True
