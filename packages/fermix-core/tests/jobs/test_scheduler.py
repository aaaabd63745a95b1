"""The scheduler over a real SQLite store and a fake clock: nothing here sleeps or times."""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from fermix_core.jobs.clock import FakeClock
from fermix_core.jobs.memory_store import InMemoryJobStore
from fermix_core.jobs.records import JobStateError
from fermix_core.jobs.scheduler import CRASH_REASON, MAX_CONCURRENT_RUNS, STOP_REASON, Scheduler
from fermix_core.jobs.store import SqliteJobStore
from fermix_core.testing.jobs import T0, make_job

pytestmark = pytest.mark.anyio


class GatedRunner:
    """Stands in for the job runner: starts the run, waits for the test, settles it."""

    def __init__(self, store: SqliteJobStore, clock: FakeClock) -> None:
        self.store = store
        self.clock = clock
        self.started: list[int] = []
        self.gates: dict[int, anyio.Event] = {}
        self.running = 0
        self.peak = 0
        self._changed = anyio.Event()
        self.auto = False

    async def __call__(self, job: Any, run: Any, release: str) -> None:
        await self.store.start_run(run.id, now=self.clock.now(), prompt_snapshot="p")
        self.started.append(run.id)
        self.running += 1
        self.peak = max(self.peak, self.running)
        gate = self.gates.setdefault(run.id, anyio.Event())
        if self.auto:
            gate.set()
        self._notify()
        try:
            await gate.wait()
            await self.store.settle(
                run.id, status="succeeded", now=self.clock.now(), job_status=release
            )
        finally:
            self.running -= 1

    def _notify(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()

    async def wait_started(self, count: int) -> None:
        while len(self.started) < count:
            await self._changed.wait()

    def release(self, run_id: int) -> None:
        self.gates.setdefault(run_id, anyio.Event()).set()


@pytest.fixture(params=["sqlite", "memory"])
async def store(request: Any, tmp_path: Path) -> AsyncIterator[Any]:
    """Every scheduler test runs on both JobStore implementations."""
    if request.param == "sqlite":
        opened: Any = await SqliteJobStore.open(tmp_path / "memory.db")
    else:
        opened = InMemoryJobStore()
    yield opened
    await opened.aclose()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(T0)


class Harness:
    def __init__(self, store: SqliteJobStore, clock: FakeClock, **kw: Any) -> None:
        self.store = store
        self.clock = clock
        self.runner = GatedRunner(store, clock)
        self.scheduler = Scheduler(store, self.runner, clock=clock, **kw)

    async def step(self, action: Any = None) -> None:
        """Do *action* (advance the clock, wake) and wait for the loop's next parked state."""
        passes = self.scheduler.passes
        if action is not None:
            action()
        await self.scheduler.wait_parked(passes + 1)


async def _serve(harness: Harness, tg: Any) -> None:
    await tg.start(harness.scheduler.serve)
    await harness.scheduler.wait_parked(1)


async def test_sleeps_until_the_next_due_time_and_wakes_on_change(store, clock) -> None:
    await store.create_job(make_job("late", next_run_at=T0 + 3600))
    harness = Harness(store, clock)
    async with anyio.create_task_group() as tg:
        await _serve(harness, tg)
        assert clock.deadlines == [T0 + 3600]  # one timer for the earliest job, no polling
        await store.create_job(make_job("soon", next_run_at=T0 + 60))
        await harness.step(harness.scheduler.wake)
        assert clock.deadlines == [T0 + 60]
        harness.runner.auto = True
        await harness.step(lambda: clock.advance(60))
        await harness.runner.wait_started(1)
        await harness.scheduler.wait_idle()
        runs = await store.list_runs("soon")
        assert [r.status for r in runs] == ["succeeded"]
        assert runs[0].session_id == f"cron_soon_{int(T0 + 60)}"
        assert (await store.get_job("soon")).next_run_at == T0 + 600 + 0  # anchor T0, every 10m
        tg.cancel_scope.cancel()


async def test_no_jobs_means_no_timer(store, clock) -> None:
    harness = Harness(store, clock)
    async with anyio.create_task_group() as tg:
        await _serve(harness, tg)
        assert clock.deadlines == []
        tg.cancel_scope.cancel()


async def test_a_burst_of_100_due_jobs_never_exceeds_the_cap(store, clock) -> None:
    for n in range(100):
        await store.create_job(make_job(f"j{n:03}", next_run_at=T0))
    harness = Harness(store, clock)
    async with anyio.create_task_group() as tg:
        await _serve(harness, tg)
        await harness.runner.wait_started(MAX_CONCURRENT_RUNS)
        assert len(harness.runner.started) == MAX_CONCURRENT_RUNS
        assert clock.deadlines == []  # all slots taken: it waits for a slot, not for time
        waiting = await store.list_jobs(["scheduled"])
        assert len(waiting) == 100 - MAX_CONCURRENT_RUNS
        done = 0
        while done < 100:
            run_id = harness.runner.started[done]
            harness.runner.release(run_id)
            done += 1
            await harness.runner.wait_started(min(100, done + MAX_CONCURRENT_RUNS))
        await harness.scheduler.wait_idle()
        assert harness.runner.peak == MAX_CONCURRENT_RUNS
        assert len(set(harness.runner.started)) == 100
        statuses = {j.status for j in await store.list_jobs()}
        assert statuses == {"scheduled"}
        tg.cancel_scope.cancel()


async def test_missed_recurring_fire_is_skipped_and_once_runs_late(store, clock) -> None:
    await store.create_job(make_job("every", next_run_at=T0 - 7200, anchor_at=T0 - 7800))
    await store.create_job(
        make_job(
            "once",
            schedule_kind="once",
            schedule="2027-01-15T08:00:00+00:00",
            next_run_at=T0 - 7200,
        )
    )
    harness = Harness(store, clock)
    harness.runner.auto = True
    async with anyio.create_task_group() as tg:
        await _serve(harness, tg)
        await harness.runner.wait_started(1)
        await harness.scheduler.wait_idle()
        missed = await store.list_runs("every")
        assert [r.status for r in missed] == ["missed"]
        assert "freshness window" in missed[0].error
        job = await store.get_job("every")
        assert job.next_run_at > clock.now()
        assert (job.next_run_at - job.anchor_at) % 600 == 0  # the cadence is kept
        once_runs = await store.list_runs("once")
        assert [r.status for r in once_runs] == ["succeeded"]
        once = await store.get_job("once")
        assert once.status == "completed"
        assert once.next_run_at is None
        tg.cancel_scope.cancel()


async def test_a_fresh_late_fire_runs_once_and_advances_to_the_future(store, clock) -> None:
    await store.create_job(make_job("every", next_run_at=T0 - 1500, anchor_at=T0 - 2100))
    harness = Harness(store, clock)
    harness.runner.auto = True
    async with anyio.create_task_group() as tg:
        await _serve(harness, tg)
        await harness.runner.wait_started(1)
        await harness.scheduler.wait_idle()
        runs = await store.list_runs("every")
        assert [r.status for r in runs] == ["succeeded"]
        assert runs[0].due_at == T0 - 1500
        assert (await store.get_job("every")).next_run_at == T0 + 300
        tg.cancel_scope.cancel()


async def test_a_schedule_that_no_longer_parses_disables_the_job(store, clock) -> None:
    await store.create_job(
        make_job("bad", schedule_kind="cron", schedule="61 * * * *", next_run_at=T0)
    )
    await store.create_job(make_job("zone", timezone="Nowhere/Atlantis", next_run_at=T0))
    harness = Harness(store, clock)
    async with anyio.create_task_group() as tg:
        await _serve(harness, tg)
        for job_id, needle in (("bad", "out of range"), ("zone", "unknown timezone")):
            job = await store.get_job(job_id)
            assert job.status == "disabled"
            assert needle in job.last_error
            assert "update_job" in job.last_error
        assert harness.runner.started == []
        tg.cancel_scope.cancel()


async def test_expiry_wakes_the_scheduler(store, clock) -> None:
    await store.create_job(make_job("tmp", next_run_at=T0 + 600, expires_at=T0 + 300))
    harness = Harness(store, clock)
    async with anyio.create_task_group() as tg:
        await _serve(harness, tg)
        assert clock.deadlines == [T0 + 300]
        await harness.step(lambda: clock.advance(300))
        assert (await store.get_job("tmp")).status == "expired"
        tg.cancel_scope.cancel()


async def test_the_last_fire_before_expiry_releases_to_expired(store, clock) -> None:
    await store.create_job(make_job("tmp", next_run_at=T0 + 600, expires_at=T0 + 900))
    harness = Harness(store, clock)
    harness.runner.auto = True
    async with anyio.create_task_group() as tg:
        await _serve(harness, tg)
        await harness.step(lambda: clock.advance(600))
        await harness.runner.wait_started(1)
        await harness.scheduler.wait_idle()
        assert (await store.get_job("tmp")).status == "expired"
        tg.cancel_scope.cancel()


async def test_run_now_is_manual_and_refuses_mid_run(store, clock) -> None:
    await store.create_job(make_job("j", next_run_at=T0 + 3600))
    harness = Harness(store, clock)
    async with anyio.create_task_group() as tg:
        await _serve(harness, tg)
        job = await store.get_job("j")
        run = await harness.scheduler.run_now(job)
        assert run.trigger == "manual"
        await harness.runner.wait_started(1)
        with pytest.raises(JobStateError, match="running"):
            await harness.scheduler.run_now(job)
        harness.runner.release(run.id)
        await harness.scheduler.wait_idle()
        after = await store.get_job("j")
        assert after.status == "scheduled"
        assert after.next_run_at == T0 + 3600  # cadence untouched
        tg.cancel_scope.cancel()


async def test_cancel_job_settles_the_run_as_cancelled(store, clock) -> None:
    await store.create_job(make_job("j", next_run_at=T0))
    harness = Harness(store, clock)
    async with anyio.create_task_group() as tg:
        await _serve(harness, tg)
        await harness.runner.wait_started(1)
        assert harness.scheduler.cancel_job("j") is True
        await harness.scheduler.wait_idle()
        runs = await store.list_runs("j")
        assert runs[0].status == "cancelled"
        assert (await store.get_job("j")).status == "scheduled"
        tg.cancel_scope.cancel()


async def test_stopping_the_daemon_mid_run_settles_the_run(store, clock) -> None:
    await store.create_job(make_job("j", next_run_at=T0))
    harness = Harness(store, clock)
    async with anyio.create_task_group() as tg:
        await _serve(harness, tg)
        await harness.runner.wait_started(1)
        tg.cancel_scope.cancel()
    runs = await store.list_runs("j")
    assert runs[0].status == "failed"
    assert runs[0].error == STOP_REASON
    assert (await store.get_job("j")).status == "scheduled"


_CRASHER = """
import anyio, os, signal, sys
from fermix_core.jobs.store import SqliteJobStore
async def main():
    store = await SqliteJobStore.open(sys.argv[1])
    run = await store.claim("j", now=float(sys.argv[2]), trigger="schedule", session_id="s",
                            config={}, due_at=float(sys.argv[2]), next_run_at=float(sys.argv[3]))
    await store.start_run(run.id, now=float(sys.argv[2]), prompt_snapshot="p")
    os.kill(os.getpid(), signal.SIGKILL)
anyio.run(main)
"""


async def test_a_daemon_killed_mid_run_leaves_a_settled_run_after_restart(
    tmp_path: Path, clock
) -> None:
    path = tmp_path / "memory.db"
    store = await SqliteJobStore.open(path)
    await store.create_job(make_job("j", next_run_at=T0))
    done = await anyio.run_process(
        [sys.executable, "-c", _CRASHER, str(path), str(T0), str(T0 + 600)], check=False
    )
    assert done.returncode == -9
    assert (await store.get_job("j")).status == "running"
    harness = Harness(store, clock)
    async with anyio.create_task_group() as tg:
        await _serve(harness, tg)
        runs = await store.list_runs("j")
        assert runs[0].status == "failed"
        assert runs[0].error == CRASH_REASON
        job = await store.get_job("j")
        assert job.status == "scheduled"
        assert clock.deadlines == [T0 + 600]  # schedulable again, at its next fire
        tg.cancel_scope.cancel()
    await store.aclose()
    assert os.path.exists(path)


async def test_restart_across_fire_times(tmp_path: Path, clock) -> None:
    """Stop with a job due soon, come back after two fires were missed, then after one."""
    path = tmp_path / "memory.db"
    store = await SqliteJobStore.open(path)
    await store.create_job(make_job("j", next_run_at=T0 + 600, anchor_at=T0))
    first = Harness(store, clock)
    first.runner.auto = True
    async with anyio.create_task_group() as tg:
        await _serve(first, tg)
        await first.step(lambda: clock.advance(600))
        await first.runner.wait_started(1)
        await first.scheduler.wait_idle()
        tg.cancel_scope.cancel()
    await store.aclose()
    clock.advance(3 * 3600)  # down for three hours: several fires older than the window
    store = await SqliteJobStore.open(path)
    second = Harness(store, clock, freshness_window_s=3600)
    second.runner.auto = True
    async with anyio.create_task_group() as tg:
        await _serve(second, tg)
        runs = await store.list_runs("j")
        assert [r.status for r in runs] == ["missed", "succeeded"]
        assert second.runner.started == []
        job = await store.get_job("j")
        assert clock.now() < job.next_run_at <= clock.now() + 600
        tg.cancel_scope.cancel()
    await store.aclose()


async def test_a_failing_store_does_not_stop_the_scheduler(store, clock) -> None:
    from fermix_core.jobs.records import JobStoreError

    await store.create_job(make_job("j", next_run_at=T0 + 60))
    harness = Harness(store, clock)
    harness.runner.auto = True
    real = store.scan
    failures = [JobStoreError("disk I/O error")]

    async def flaky(now: float, limit: int) -> Any:
        if failures:
            raise failures.pop()
        return await real(now, limit)

    store.scan = flaky  # type: ignore[method-assign]
    async with anyio.create_task_group() as tg:
        await _serve(harness, tg)
        assert clock.deadlines == [T0 + 30]  # the failed pass: look again in 30 s
        await harness.step(lambda: clock.advance(30))
        assert clock.deadlines == [T0 + 60]  # recovered: back to the due time
        await harness.step(lambda: clock.advance(30))
        await harness.runner.wait_started(1)
        await harness.scheduler.wait_idle()
        assert [r.status for r in await store.list_runs("j")] == ["succeeded"]
        tg.cancel_scope.cancel()
