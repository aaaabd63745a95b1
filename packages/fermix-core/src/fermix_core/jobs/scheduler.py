"""The scheduler: sleep until the next due job, claim what is due, run it, repeat.

* **No polling.** After each pass it asks the store for the earliest due or expiry time and
  sleeps exactly until then on the injected :class:`~fermix_core.jobs.clock.Clock`; a job
  created or changed calls :meth:`Scheduler.wake`, and a finished run wakes it too (a slot
  freed up). While every slot is taken it does not wake on time at all, only on a slot.
* **A small fixed ceiling.** At most :data:`MAX_CONCURRENT_RUNS` runs at once; a due job
  beyond that stays ``scheduled`` and is claimed by a later pass as a slot frees.
* **Missed fires.** A recurring due time older than the freshness window is not run late:
  it is recorded as a ``missed`` run and the schedule advances to the next future fire. A
  ``once`` job has no next fire, so it runs late instead.
* **Broken rows.** A schedule or timezone that no longer parses moves the job to
  ``disabled`` with the parse error in ``last_error`` (distinct from a user pause).
* **Crash recovery.** On start, runs a dead daemon left queued or running are settled as
  ``failed`` with the reason and their jobs become schedulable again.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
from anyio.abc import TaskStatus

from fermix_core.jobs.clock import Clock, SystemClock
from fermix_core.jobs.records import JobRecord, JobStateError, JobStoreError, RunRecord
from fermix_core.jobs.schedules import Schedule, ScheduleError, parse_schedule, utc_iso
from fermix_core.jobs.store import JobStore

__all__ = [
    "CRASH_REASON",
    "MAX_CONCURRENT_RUNS",
    "STOP_REASON",
    "Execute",
    "Scheduler",
    "TickReport",
    "run_config",
    "session_id_for",
]

log = logging.getLogger("fermix.jobs")

MAX_CONCURRENT_RUNS = 4
#: How many due rows one store read fetches while walking the due list.
_BATCH = 64
#: Never re-check sooner than this when a due job could not be claimed (another process).
_MIN_RETRY_S = 1.0
#: After a store failure, the next pass is this far away (a wake still comes sooner).
_ERROR_S = 30.0

CRASH_REASON = (
    "the daemon stopped while this run was in progress (killed or crashed); the run was not "
    "retried, so any side effects it had are not repeated — the job is scheduled again"
)
STOP_REASON = "the daemon was stopped while this run was in progress"

#: Runs one claimed run to its settled row: ``execute(job, run, release_to)``.
Execute = Callable[[JobRecord, RunRecord, str], Awaitable[None]]


@dataclass
class TickReport:
    claimed: list[int] = field(default_factory=list)
    missed: list[str] = field(default_factory=list)
    disabled: list[str] = field(default_factory=list)
    expired: list[str] = field(default_factory=list)
    waiting: int = 0
    #: The earliest due/expiry time when the pass changed nothing (so no second read).
    next_due: float | None = None
    changed: bool = True


def session_id_for(job_id: str, now: float) -> str:
    """The trace session id of one run: ``cron_<job>_<ts>``."""
    return f"cron_{job_id}_{int(now)}"


def run_config(job: JobRecord, trigger: str) -> dict[str, Any]:
    """The config snapshot a run executes under (what ``get_job_run`` echoes)."""
    return {
        "task_prompt": job.task_prompt,
        "schedule": job.schedule,
        "timezone": job.timezone,
        "trust": job.trust,
        "trigger": trigger,
        "timeout_seconds": job.timeout_seconds,
        "inactivity_timeout_seconds": job.inactivity_timeout_seconds,
        "max_iterations": job.max_iterations,
        "allowed_tools": job.allowed_tools,
        "skill_name": job.skill_name,
        "provider": job.provider,
        "model": job.model,
        "delivery_mode": job.delivery_mode,
        "delivery_target": job.delivery_target,
    }


class Scheduler:
    def __init__(
        self,
        store: JobStore,
        execute: Execute,
        *,
        clock: Clock | None = None,
        freshness_window_s: float = 3600.0,
        max_concurrent: int = MAX_CONCURRENT_RUNS,
        emit: Callable[..., Any] | None = None,
    ) -> None:
        if max_concurrent < 1:
            raise ValueError("max_concurrent must be at least 1")
        self.store = store
        self.execute = execute
        self.clock: Clock = clock or SystemClock()
        self.freshness_window_s = float(freshness_window_s)
        self.max_concurrent = max_concurrent
        self.emit = emit
        self._wake = anyio.Event()
        self._tg: Any = None
        #: run id → (job id, cancel scope) of every run in flight.
        self._active: dict[int, tuple[str, anyio.CancelScope]] = {}
        self._finished: dict[int, anyio.Event] = {}
        self._idle = anyio.Event()
        self._idle.set()
        #: Completed passes, and an event set each time the loop parks after one.
        self.passes = 0
        self._parked = anyio.Event()
        self._sleep_scope: anyio.CancelScope | None = None

    # ------------------------------------------------------------------ lifecycle

    @property
    def running(self) -> bool:
        return self._tg is not None

    @property
    def active_runs(self) -> dict[int, str]:
        return {run_id: job_id for run_id, (job_id, _) in self._active.items()}

    def wake(self) -> None:
        """A job was created or changed: re-read the store now instead of at the old time."""
        self._wake.set()
        if self._sleep_scope is not None:
            self._sleep_scope.cancel()

    async def recover(self) -> list[RunRecord]:
        runs = await self.store.recover(now=self.clock.now(), reason=CRASH_REASON)
        for run in runs:
            log.warning(
                "job %s: run %s was left %s by a daemon that stopped; settled as failed",
                run.job_id,
                run.id,
                "running" if run.started_at else "queued",
            )
        return runs

    async def serve(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Recover, then loop until cancelled; in-flight runs are settled on the way out."""
        await self.recover()
        try:
            async with anyio.create_task_group() as tg:
                self._tg = tg
                task_status.started()
                while True:
                    self._wake = anyio.Event()
                    try:
                        report = await self.tick()
                        delay = await self._delay(report)
                    except JobStoreError as exc:
                        # memory.db unusable for now (disk full, locked too long): keep the
                        # daemon up and look again later rather than take it down.
                        log.error("scheduler pass failed (%s); retrying in %.0f s", exc, _ERROR_S)
                        delay = _ERROR_S
                    await self._sleep(delay)
        finally:
            self._tg = None

    async def _delay(self, report: TickReport) -> float | None:
        if len(self._active) >= self.max_concurrent:
            return None  # only a freed slot can make progress; it wakes us
        nxt = report.next_due if not report.changed else await self.store.next_due_at()
        if nxt is None:
            return None
        delay = nxt - self.clock.now()
        if delay <= 0:
            # Still due after a pass with free slots: another process holds it mid-claim.
            return _MIN_RETRY_S
        return delay

    async def _sleep(self, delay: float | None) -> None:
        """Park until *delay* passes on the clock or :meth:`wake` is called."""
        if self._wake.is_set():
            return  # woken during the pass: look again at once
        with anyio.CancelScope() as scope:
            self._sleep_scope = scope
            try:
                self._signal_parked()
                if delay is None:
                    await anyio.sleep_forever()
                else:
                    await self.clock.sleep(delay)
            finally:
                self._sleep_scope = None

    def _signal_parked(self) -> None:
        self.passes += 1
        parked, self._parked = self._parked, anyio.Event()
        parked.set()

    async def wait_parked(self, passes: int) -> None:
        """Return once the loop has completed *passes* passes and is waiting again."""
        while self.passes < passes:
            await self._parked.wait()

    async def wait_run(self, run_id: int) -> None:
        """Return once *run_id* is no longer in flight (at once if it is not)."""
        finished = self._finished.get(run_id)
        if finished is not None:
            await finished.wait()

    async def wait_idle(self) -> None:
        """Return once no run is in flight (tests; a graceful stop)."""
        await self._idle.wait()

    # ------------------------------------------------------------------ one pass

    async def tick(self) -> TickReport:
        """Expire, disable, skip and claim what is due now; start what was claimed."""
        report = TickReport()
        now = self.clock.now()
        scan = await self.store.scan(now, _BATCH)
        report.expired = scan.expired
        for job_id in report.expired:
            log.info("job %s expired", job_id)
        if not scan.due:  # an idle pass: one store round trip in all
            report.next_due, report.changed = scan.next_due, False
            return report
        seen: set[str] = set()
        first: list[JobRecord] | None = scan.due
        while True:
            rows = first if first is not None else await self.store.due_jobs(now, _BATCH)
            first = None
            batch = [j for j in rows if j.id not in seen]
            if not batch:
                break
            for job in batch:
                seen.add(job.id)
                if not await self._consider(job, now, report):
                    report.waiting += 1
            if len(self._active) >= self.max_concurrent and report.waiting:
                break
        if report.waiting:
            log.info(
                "%d due job(s) wait for a free slot (%d running, ceiling %d)",
                report.waiting,
                len(self._active),
                self.max_concurrent,
            )
        return report

    async def _consider(self, job: JobRecord, now: float, report: TickReport) -> bool:
        """Handle one due job; ``False`` when it has to wait for a slot."""
        try:
            schedule = parse_schedule(job.schedule, job.timezone)
        except ScheduleError as exc:
            await self._disable(job, now, str(exc), report)
            return True
        due = job.next_run_at
        assert due is not None
        if schedule.kind != "once" and now - due > self.freshness_window_s:
            await self._skip(job, schedule, due, now, report)
            return True
        if len(self._active) >= self.max_concurrent:
            return False
        next_run = None if schedule.kind == "once" else self._next(schedule, job, now)
        if schedule.kind == "once":
            release = "completed"
        elif job.expires_at is not None and (next_run is None or next_run >= job.expires_at):
            release, next_run = "expired", None
        else:
            release = "scheduled"
        run = await self.store.claim(
            job.id,
            now=now,
            trigger="schedule",
            session_id=session_id_for(job.id, now),
            config=run_config(job, "schedule"),
            due_at=due,
            next_run_at=next_run,
        )
        if run is not None:
            report.claimed.append(run.id)
            if now - due > 1:
                log.info("job %s fires %.0f s late (due %s)", job.id, now - due, utc_iso(due))
            self._start(job, run, release)
        return True

    @staticmethod
    def _next(schedule: Schedule, job: JobRecord, now: float) -> float | None:
        return schedule.next_after(now, anchor=job.anchor_at)

    async def _disable(self, job: JobRecord, now: float, error: str, report: TickReport) -> None:
        message = f"schedule no longer parses: {error}; fix it with update_job, then resume_job"
        try:
            await self.store.update_job(
                job.id,
                {"status": "disabled", "last_error": message, "next_run_at": None},
                now=now,
                expect=["scheduled"],
            )
        except JobStoreError:
            return
        report.disabled.append(job.id)
        log.error("job %s disabled: %s", job.id, message)
        self._emit("jobs.disabled", job_id=job.id)

    async def _skip(
        self, job: JobRecord, schedule: Schedule, due: float, now: float, report: TickReport
    ) -> None:
        nxt = self._next(schedule, job, now)
        reason = (
            f"missed: due {utc_iso(due)} while the daemon was not running; older than the "
            f"{self.freshness_window_s:.0f} s freshness window, so it was skipped instead of "
            f"run late (next fire {utc_iso(nxt) or 'none'})"
        )
        run = await self.store.skip_missed(
            job.id, due_at=due, next_run_at=nxt, now=now, reason=reason
        )
        if run is not None:
            report.missed.append(job.id)
            log.warning("job %s %s", job.id, reason)
            self._emit("jobs.missed", job_id=job.id, due_at=due)

    # ------------------------------------------------------------------ runs

    async def run_now(self, job: JobRecord) -> RunRecord:
        """Fire *job* out of band (trigger ``manual``); the timed cadence is untouched."""
        if self._tg is None:
            raise JobStateError("the scheduler is not running, so the job cannot be run now")
        now = self.clock.now()
        run = await self.store.claim(
            job.id,
            now=now,
            trigger="manual",
            session_id=session_id_for(job.id, now),
            config=run_config(job, "manual"),
        )
        if run is None:
            current = await self.store.get_job(job.id)
            state = current.status if current else "removed"
            raise JobStateError(f"job {job.id} is {state}; it can only be run now when scheduled")
        self._start(job, run, "scheduled")
        return run

    def _start(self, job: JobRecord, run: RunRecord, release: str) -> None:
        scope = anyio.CancelScope()
        self._active[run.id] = (job.id, scope)
        self._finished[run.id] = anyio.Event()
        self._idle = anyio.Event()
        self._tg.start_soon(self._run, job, run, release, scope)

    async def _run(
        self, job: JobRecord, run: RunRecord, release: str, scope: anyio.CancelScope
    ) -> None:
        try:
            with scope:
                await self.execute(job, run, release)
            if scope.cancelled_caught:
                await self._settle_failed(run, release, "cancelled", status="cancelled")
        except anyio.get_cancelled_exc_class():
            await self._settle_failed(run, release, STOP_REASON)
            raise
        except Exception as exc:
            log.exception("job %s: run %s failed unexpectedly", job.id, run.id)
            await self._settle_failed(run, release, f"internal error: {type(exc).__name__}")
        finally:
            self._active.pop(run.id, None)
            finished = self._finished.pop(run.id, None)
            if finished is not None:
                finished.set()
            if not self._active:
                self._idle.set()
            self.wake()

    async def _settle_failed(
        self, run: RunRecord, release: str, reason: str, *, status: str = "failed"
    ) -> None:
        """Settle *run* if the runner did not; a once job stays schedulable (no next fire)."""
        # JobStoreError: already settled by the runner, or the job was removed.
        with anyio.CancelScope(shield=True), contextlib.suppress(JobStoreError):
            await self.store.settle(
                run.id,
                status=status,
                now=self.clock.now(),
                job_status="scheduled" if release == "completed" else release,
                error=reason,
            )

    def cancel_job(self, job_id: str) -> bool:
        """Cancel *job_id*'s run in flight (removing a job); ``True`` if one was running."""
        found = False
        for active_job, scope in self._active.values():
            if active_job == job_id:
                scope.cancel()
                found = True
        return found

    def _emit(self, name: str, **data: Any) -> None:
        from fermix_core.agent.observe import Observer  # the loop's best-effort fan-out

        Observer(self.emit, None).emit(name, **data)
