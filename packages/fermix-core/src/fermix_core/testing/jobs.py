"""The job store contract as a reusable test class.

A new :class:`~fermix_core.jobs.store.JobStore` backend subclasses :class:`JobStoreContract`
and implements :meth:`~JobStoreContract.open_store`; every test then runs against it::

    class TestMyStore(JobStoreContract):
        async def open_store(self, tmp_path):
            return await MyStore.open(...)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import anyio
import pytest

from fermix_core.jobs.records import JobNotFound, JobRecord, JobStateError, JobStoreError

__all__ = ["JobStoreContract", "make_job"]

T0 = 1_800_000_000.0


def make_job(job_id: str = "j1", **overrides: Any) -> JobRecord:
    values: dict[str, Any] = {
        "id": job_id,
        "task_prompt": "Summarise the news",
        "schedule_kind": "interval",
        "schedule": "every 10 minutes",
        "timezone": "UTC",
        "trust": "operator",
        "next_run_at": T0 + 600,
        "anchor_at": T0,
        "created_at": T0,
        "updated_at": T0,
    }
    values.update(overrides)
    return JobRecord(**values)


class JobStoreContract:
    """What every job store must do; the scheduler depends on nothing else."""

    pytestmark: ClassVar[Any] = pytest.mark.anyio

    async def open_store(self, tmp_path: Path) -> Any:
        raise NotImplementedError(f"{type(self).__name__} must implement open_store()")

    @pytest.fixture
    async def store(self, tmp_path: Path) -> Any:
        store = await self.open_store(tmp_path)
        try:
            yield store
        finally:
            await store.aclose()

    async def _claim(self, store: Any, job_id: str = "j1", **kw: Any) -> Any:
        kw.setdefault("now", T0 + 600)
        kw.setdefault("trigger", "schedule")
        kw.setdefault("session_id", f"cron_{job_id}_1")
        kw.setdefault("config", {"task_prompt": "Summarise the news"})
        if kw["trigger"] == "schedule":
            kw.setdefault("due_at", T0 + 600)
            kw.setdefault("next_run_at", T0 + 1200)
        return await store.claim(job_id, **kw)

    async def test_create_get_list(self, store: Any) -> None:
        created = await store.create_job(make_job(allowed_tools=["web_fetch"]))
        assert created.allowed_tools == ["web_fetch"]
        assert (await store.get_job("j1")) == created
        assert await store.get_job("nope") is None
        assert [j.id for j in await store.list_jobs()] == ["j1"]
        assert await store.list_jobs(["paused"]) == []

    async def test_duplicate_id_is_an_error(self, store: Any) -> None:
        await store.create_job(make_job())
        with pytest.raises(JobStoreError):
            await store.create_job(make_job())

    async def test_claim_takes_the_job_and_queues_a_run(self, store: Any) -> None:
        await store.create_job(make_job())
        run = await self._claim(store)
        assert run is not None
        assert run.status == "queued"
        assert run.trigger == "schedule"
        assert run.config == {"task_prompt": "Summarise the news"}
        job = await store.get_job("j1")
        assert job.status == "running"
        assert job.next_run_at == T0 + 1200
        assert await store.next_due_at() is None  # a running job is not due

    async def test_second_claim_loses(self, store: Any) -> None:
        await store.create_job(make_job())
        assert await self._claim(store) is not None
        assert await self._claim(store) is None
        assert await self._claim(store, trigger="manual") is None

    async def test_stale_due_time_loses(self, store: Any) -> None:
        await store.create_job(make_job())
        assert await self._claim(store, due_at=T0 + 1) is None
        assert (await store.get_job("j1")).status == "scheduled"

    async def test_concurrent_claims_have_one_winner(self, store: Any) -> None:
        await store.create_job(make_job())
        results: list[Any] = []

        async def claim() -> None:
            results.append(await self._claim(store))

        async with anyio.create_task_group() as tg:
            for _ in range(8):
                tg.start_soon(claim)
        assert sum(r is not None for r in results) == 1
        assert len(await store.list_runs("j1")) == 1

    async def test_manual_claim_leaves_the_cadence(self, store: Any) -> None:
        await store.create_job(make_job())
        run = await self._claim(store, trigger="manual")
        assert run.due_at is None
        assert (await store.get_job("j1")).next_run_at == T0 + 600

    async def test_settle_writes_the_run_and_releases_the_job(self, store: Any) -> None:
        await store.create_job(make_job())
        run = await self._claim(store)
        await store.start_run(run.id, now=T0 + 601, prompt_snapshot="system prompt")
        assert (await store.get_run(run.id)).status == "running"
        settled = await store.settle(
            run.id,
            status="succeeded",
            now=T0 + 650,
            final_response="done",
            usage={"input_tokens": 5},
            model="m",
            provider="p",
            attempts=1,
        )
        assert settled.status == "succeeded"
        assert settled.final_response == "done"
        assert settled.prompt_snapshot == "system prompt"
        assert settled.usage == {"input_tokens": 5}
        job = await store.get_job("j1")
        assert job.status == "scheduled"
        assert job.last_status == "succeeded"
        assert job.last_run_at == T0 + 650
        with pytest.raises(JobStateError):
            await store.settle(run.id, status="failed", now=T0 + 700)

    async def test_settle_refuses_active_statuses(self, store: Any) -> None:
        await store.create_job(make_job())
        run = await self._claim(store)
        with pytest.raises(JobStoreError):
            await store.settle(run.id, status="running", now=T0)
        with pytest.raises(JobStoreError):
            await store.settle(run.id, status="failed", now=T0, job_status="running")

    async def test_a_job_paused_mid_run_stays_paused(self, store: Any) -> None:
        await store.create_job(make_job())
        run = await self._claim(store)
        await store.update_job("j1", {"status": "paused"}, now=T0 + 601)
        await store.settle(run.id, status="succeeded", now=T0 + 602)
        assert (await store.get_job("j1")).status == "paused"

    async def test_resuming_mid_run_keeps_the_job_running(self, store: Any) -> None:
        await store.create_job(make_job())
        run = await self._claim(store)
        await store.update_job("j1", {"status": "paused"}, now=T0 + 601)
        resumed = await store.update_job("j1", {"status": "scheduled"}, now=T0 + 602)
        assert resumed.status == "running"  # never claimable twice
        assert await self._claim(store, trigger="manual") is None
        await store.settle(run.id, status="succeeded", now=T0 + 603)
        assert (await store.get_job("j1")).status == "scheduled"

    async def test_settle_can_complete_or_disable(self, store: Any) -> None:
        await store.create_job(make_job())
        run = await self._claim(store)
        await store.settle(run.id, status="failed", now=T0, job_status="disabled", error="bad")
        job = await store.get_job("j1")
        assert job.status == "disabled"
        assert job.last_error == "bad"

    async def test_update_checks_state_and_columns(self, store: Any) -> None:
        await store.create_job(make_job())
        updated = await store.update_job("j1", {"task_prompt": "new"}, now=T0 + 5)
        assert updated.task_prompt == "new"
        assert updated.updated_at == T0 + 5
        with pytest.raises(JobStateError):
            await store.update_job("j1", {"status": "scheduled"}, now=T0, expect=["paused"])
        with pytest.raises(JobStoreError):
            await store.update_job("j1", {"trust": "operator"}, now=T0)
        with pytest.raises(JobNotFound):
            await store.update_job("nope", {"task_prompt": "x"}, now=T0)

    async def test_due_jobs_and_next_due(self, store: Any) -> None:
        await store.create_job(make_job("a", next_run_at=T0 + 30))
        await store.create_job(make_job("b", next_run_at=T0 + 10))
        await store.create_job(make_job("c", next_run_at=T0 + 5, status="paused"))
        await store.create_job(make_job("d", next_run_at=T0 + 90))
        assert await store.next_due_at() == T0 + 10
        assert [j.id for j in await store.due_jobs(T0 + 60, 10)] == ["b", "a"]
        assert [j.id for j in await store.due_jobs(T0 + 60, 1)] == ["b"]

    async def test_expiry(self, store: Any) -> None:
        await store.create_job(make_job("a", expires_at=T0 + 100, next_run_at=T0 + 600))
        await store.create_job(make_job("b", expires_at=T0 + 100, status="paused"))
        await store.create_job(make_job("c", expires_at=T0 + 900))
        assert await store.next_due_at() == T0 + 100
        assert await store.expire_due(T0 + 100) == ["a", "b"]
        assert (await store.get_job("a")).status == "expired"
        assert await store.next_due_at() == T0 + 600

    async def test_scan_is_expire_due_and_next_in_one(self, store: Any) -> None:
        await store.create_job(make_job("a", next_run_at=T0 + 10))
        await store.create_job(make_job("b", next_run_at=T0 + 900, expires_at=T0 + 50))
        await store.create_job(make_job("c", next_run_at=T0 + 700))
        scan = await store.scan(T0 + 60, 10)
        assert scan.expired == ["b"]
        assert [j.id for j in scan.due] == ["a"]
        assert scan.next_due == T0 + 10
        idle = await store.scan(T0, 10)
        assert (idle.expired, idle.due, idle.next_due) == ([], [], T0 + 10)

    async def test_skip_missed_records_and_advances(self, store: Any) -> None:
        await store.create_job(make_job())
        missed = await store.skip_missed(
            "j1", due_at=T0 + 600, next_run_at=T0 + 9000, now=T0 + 8000, reason="late"
        )
        assert missed.status == "missed"
        assert missed.error == "late"
        assert (await store.get_job("j1")).next_run_at == T0 + 9000
        again = await store.skip_missed(
            "j1", due_at=T0 + 600, next_run_at=T0 + 9000, now=T0 + 8000, reason="late"
        )
        assert again is None

    async def test_recover_settles_orphans(self, store: Any) -> None:
        await store.create_job(make_job())
        await store.create_job(make_job("j2"))
        queued = await self._claim(store)
        running = await self._claim(store, "j2")
        await store.start_run(running.id, now=T0 + 601, prompt_snapshot="p")
        recovered = await store.recover(now=T0 + 700, reason="daemon stopped")
        assert {r.id for r in recovered} == {queued.id, running.id}
        for run_id in (queued.id, running.id):
            run = await store.get_run(run_id)
            assert run.status == "failed"
            assert run.error == "daemon stopped"
        for job_id in ("j1", "j2"):
            job = await store.get_job(job_id)
            assert job.status == "scheduled"
            assert job.last_error == "daemon stopped"
        assert await store.recover(now=T0 + 800, reason="x") == []

    async def test_runs_newest_first_with_filter(self, store: Any) -> None:
        await store.create_job(make_job())
        ids = []
        for n in range(3):
            run = await self._claim(
                store, due_at=T0 + 600 * (n + 1), next_run_at=T0 + 600 * (n + 2)
            )
            ids.append(run.id)
            await store.settle(run.id, status="failed" if n == 1 else "succeeded", now=T0)
        assert [r.id for r in await store.list_runs("j1")] == ids[::-1]
        assert [r.id for r in await store.list_runs("j1", statuses=["failed"])] == [ids[1]]
        assert [r.id for r in await store.list_runs("j1", limit=1)] == [ids[2]]

    async def test_delivery_is_recorded(self, store: Any) -> None:
        await store.create_job(make_job())
        run = await self._claim(store)
        await store.record_delivery(run.id, status="failed", error="no adapter", attempts=3)
        stored = await store.get_run(run.id)
        assert (stored.delivery_status, stored.delivery_error) == ("failed", "no adapter")
        assert stored.delivery_attempts == 3

    async def test_remove_drops_job_and_runs(self, store: Any) -> None:
        await store.create_job(make_job())
        run = await self._claim(store)
        assert await store.remove_job("j1") is True
        assert await store.get_job("j1") is None
        assert await store.get_run(run.id) is None
        assert await store.remove_job("j1") is False
