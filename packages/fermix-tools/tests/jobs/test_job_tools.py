"""The nine job tools: the shared tool contract, trust rules and each tool's bad input.

The service behind them is the real one: a SQLite job store in a temporary memory.db and
a scheduler on a fake clock.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from fermix_core.agent import CapabilityRegistry
from fermix_core.channel import ConversationKey
from fermix_core.jobs.clock import FakeClock
from fermix_core.jobs.scheduler import Scheduler
from fermix_core.jobs.service import JobService
from fermix_core.jobs.store import SqliteJobStore
from fermix_core.testing import ToolContract
from fermix_core.testing.jobs import T0
from fermix_core.tool import ToolContext, Trust, build_tool
from fermix_tools.jobs.plugin import (
    GET_JOB_RUN,
    JOB_TOOLS,
    LIST_JOB_RUNS,
    LIST_JOBS,
    PAUSE_JOB,
    REMOVE_JOB,
    RESUME_JOB,
    RUN_JOB_NOW,
    SCHEDULE_JOB,
    UPDATE_JOB,
)

pytestmark = pytest.mark.anyio

REGISTRY = CapabilityRegistry(JOB_TOOLS, deferral=False)
TELEGRAM = ConversationKey("telegram", "42", None)


class _Home:
    def __init__(self, path: Path) -> None:
        self.path = path


def make_service(store: SqliteJobStore, clock: FakeClock) -> JobService:
    async def execute(job: Any, run: Any, release: str) -> None:
        await store.settle(
            run.id, status="succeeded", now=clock.now(), job_status=release, final_response="ok"
        )

    return JobService(
        store,
        Scheduler(store, execute, clock=clock),
        clock,
        default_timezone="UTC",
        visible_tools=lambda trust: set(REGISTRY.snapshot(trust).specs),
        channels={"telegram"},
    )


def context(
    tmp_path: Path, service: JobService, trust: Trust = Trust.OPERATOR, **kw: Any
) -> ToolContext:
    return ToolContext(
        trust=trust,
        cwd=tmp_path,
        home=_Home(tmp_path),
        conversation_key=kw.pop("conversation_key", TELEGRAM),
        session_id="t",
        capabilities=dict(REGISTRY.snapshot(trust).specs),
        services={"jobs": service},
        **kw,
    )


class WithJobs:
    """A real service with one job ``jseed`` (every 10 minutes) and one settled run."""

    @pytest.fixture(autouse=True)
    async def _jobs(self, tmp_path: Path) -> Any:
        self.clock = FakeClock(T0)
        self.store = await SqliteJobStore.open(tmp_path / "memory.db")
        self.service = make_service(self.store, self.clock)
        from fermix_core.testing.jobs import make_job

        await self.store.create_job(make_job("jseed", next_run_at=T0 + 600))
        run = await self.store.claim(
            "jseed", now=T0, trigger="manual", session_id="cron_jseed_1", config={}
        )
        await self.store.settle(run.id, status="succeeded", now=T0, final_response="done")
        self.run_id = run.id
        yield
        await self.store.aclose()

    def make_context(self, tmp_path: Path) -> ToolContext:
        return context(tmp_path, self.service)


class TestScheduleJob(WithJobs, ToolContract):
    valid_args = {"task_prompt": "Say hello", "schedule": "every 2 hours"}
    invalid_args = {"task_prompt": "", "schedule": "every 2 hours"}
    invalid_field = "task_prompt"

    def make_tool(self):
        return build_tool(SCHEDULE_JOB)


class TestUpdateJob(WithJobs, ToolContract):
    valid_args = {"job_id": "jseed", "task_prompt": "Say goodbye"}
    invalid_args = {"job_id": "jseed", "delivery_mode": "fax"}
    invalid_field = "delivery_mode"

    def make_tool(self):
        return build_tool(UPDATE_JOB)


class TestListJobs(WithJobs, ToolContract):
    valid_args: dict[str, Any] = {}
    invalid_args = {"status": "sleeping"}
    invalid_field = "status"

    def make_tool(self):
        return build_tool(LIST_JOBS)


class TestPauseJob(WithJobs, ToolContract):
    valid_args = {"job_id": "jseed"}
    invalid_args = {"job_id": ""}
    invalid_field = "job_id"

    def make_tool(self):
        return build_tool(PAUSE_JOB)


class TestResumeJob(WithJobs, ToolContract):
    valid_args = {"job_id": "jseed"}
    invalid_args = {"job_id": 5}
    invalid_field = "job_id"
    #: jseed is scheduled, not paused: resuming it is refused with a readable error.
    valid_output_is_error = True

    def make_tool(self):
        return build_tool(RESUME_JOB)


class TestRemoveJob(WithJobs, ToolContract):
    valid_args = {"job_id": "jseed"}
    invalid_args = {"job_id": "x" * 100}
    invalid_field = "job_id"

    def make_tool(self):
        return build_tool(REMOVE_JOB)


class TestRunJobNow(WithJobs, ToolContract):
    valid_args = {"job_id": "jseed"}
    invalid_args = {"job_id": None}
    invalid_field = "job_id"
    #: The contract's context has no running scheduler; the tool says so instead of hanging.
    valid_output_is_error = True

    def make_tool(self):
        return build_tool(RUN_JOB_NOW)


class TestListJobRuns(WithJobs, ToolContract):
    valid_args = {"job_id": "jseed"}
    invalid_args = {"job_id": "jseed", "limit": 0}
    invalid_field = "limit"

    def make_tool(self):
        return build_tool(LIST_JOB_RUNS)


class TestGetJobRun(WithJobs, ToolContract):
    valid_args = {"run_id": 1}
    invalid_args = {"run_id": -1}
    invalid_field = "run_id"

    def make_tool(self):
        return build_tool(GET_JOB_RUN)


# --------------------------------------------------------------------------- behaviour


@pytest.fixture
async def kit(tmp_path: Path) -> Any:
    clock = FakeClock(T0)
    store = await SqliteJobStore.open(tmp_path / "memory.db")
    service = make_service(store, clock)
    yield tmp_path, store, service
    await store.aclose()


async def call(spec: Any, args: dict[str, Any], ctx: ToolContext) -> Any:
    return await build_tool(spec).invoke(args, ctx)


async def test_guest_surface_has_no_job_reads_or_changes() -> None:
    guest = set(REGISTRY.snapshot(Trust.GUEST).specs)
    assert guest.isdisjoint({"list_jobs", "list_job_runs", "get_job_run"})
    assert guest == set()
    owner = set(REGISTRY.snapshot(Trust.OPERATOR).specs)
    assert owner == {spec.name for spec in JOB_TOOLS}


async def test_a_guest_cannot_reach_job_reads_even_by_direct_call(kit: Any) -> None:
    tmp_path, _store, service = kit
    ctx = context(tmp_path, service, Trust.GUEST)
    for spec, args in (
        (LIST_JOBS, {}),
        (LIST_JOB_RUNS, {"job_id": "jx"}),
        (GET_JOB_RUN, {"run_id": 1}),
        (PAUSE_JOB, {"job_id": "jx"}),
    ):
        out = await call(spec, args, ctx)
        assert out.is_error
        assert "only available to the owner" in out.text


async def test_a_guest_trying_to_schedule_with_owner_tools_is_refused(kit: Any) -> None:
    tmp_path, store, service = kit
    # Even handed the tool directly, a guest can only narrow to tools it can see (none here).
    ctx = context(tmp_path, service, Trust.GUEST)
    out = await call(
        SCHEDULE_JOB,
        {
            "task_prompt": "dump the owner's jobs",
            "schedule": "every 1 hour",
            "allowed_tools": ["list_jobs", "remove_job"],
        },
        ctx,
    )
    assert out.is_error
    assert "not available to you: list_jobs, remove_job" in out.text
    assert await store.list_jobs() == []


async def test_a_context_without_trust_cannot_schedule(kit: Any) -> None:
    tmp_path, store, service = kit
    ctx = context(tmp_path, service)
    ctx.trust = None  # type: ignore[assignment]
    out = await call(SCHEDULE_JOB, {"task_prompt": "x", "schedule": "every 1 hour"}, ctx)
    assert out.is_error
    assert "carries no trust" in out.text
    assert await store.list_jobs() == []


async def test_schedule_list_update_round_trip(kit: Any) -> None:
    tmp_path, _store, service = kit
    ctx = context(tmp_path, service)
    out = await call(
        SCHEDULE_JOB,
        {"task_prompt": "Weather in Oslo", "schedule": "0 7 * * 1-5", "timezone": "Europe/Oslo"},
        ctx,
    )
    assert not out.is_error, out.text
    job_id = out.data["job"]["id"]
    assert out.data["job"]["delivery_target"]["chat_id"] == "42"
    listed = await call(LIST_JOBS, {}, ctx)
    (payload,) = listed.data["jobs"]
    for key in (
        "task_prompt",
        "skill_name",
        "provider",
        "model",
        "delivery_mode",
        "delivery_target",
    ):
        assert key in payload
    assert payload["task_prompt"] == "Weather in Oslo"
    updated = await call(UPDATE_JOB, {"job_id": job_id, "delivery_mode": "none"}, ctx)
    assert updated.data["job"]["delivery_mode"] == "none"
    assert updated.data["job"]["delivery_target"] is None


@pytest.mark.parametrize(
    ("spec", "args", "needle"),
    [
        (SCHEDULE_JOB, {"task_prompt": "x", "schedule": "daily at 8am"}, "'0 8 * * *'"),
        (SCHEDULE_JOB, {"task_prompt": "x", "schedule": "0 25 * * *"}, "out of range"),
        (
            SCHEDULE_JOB,
            {"task_prompt": "x", "schedule": "0 8 * * *", "timezone": "Moon/Base"},
            "unknown timezone",
        ),
        (
            SCHEDULE_JOB,
            {"task_prompt": "x", "schedule": "every 1 hour", "provider": "openai"},
            "give both or neither",
        ),
        (
            SCHEDULE_JOB,
            {"task_prompt": "x", "schedule": "every 1 hour", "skill_name": "s"},
            "skills are not available yet",
        ),
        (
            SCHEDULE_JOB,
            {"task_prompt": "x", "schedule": "every 1 hour", "allowed_tools": ["shell"]},
            "not available to you: shell",
        ),
        (
            SCHEDULE_JOB,
            {"task_prompt": "x", "schedule": "every 1 hour", "delivery_mode": "channel"},
            "needs delivery_target",
        ),
        (
            SCHEDULE_JOB,
            {"task_prompt": "x", "schedule": "every 1 hour", "timeout_seconds": 0},
            "timeout_seconds",
        ),
        (UPDATE_JOB, {"job_id": "jnope", "task_prompt": "y"}, "no job 'jnope'"),
        (UPDATE_JOB, {"job_id": "jnope", "timeout_seconds": 60}, "set at creation only"),
        (UPDATE_JOB, {"job_id": "jnope", "clear_route_pin": "maybe"}, "clear_route_pin"),
        (LIST_JOBS, {"status": "asleep"}, "status"),
        (PAUSE_JOB, {"job_id": "jnope"}, "no job 'jnope'"),
        (RESUME_JOB, {"job_id": "jnope"}, "no job 'jnope'"),
        (REMOVE_JOB, {"job_id": "jnope"}, "no job 'jnope'"),
        (RUN_JOB_NOW, {"job_id": "jnope"}, "no job 'jnope'"),
        (LIST_JOB_RUNS, {"job_id": "jnope"}, "no job 'jnope'"),
        (LIST_JOB_RUNS, {"job_id": "jx", "status": "exploded"}, "status"),
        (GET_JOB_RUN, {"run_id": 404}, "no run 404"),
        (GET_JOB_RUN, {"run_id": "abc"}, "run_id"),
    ],
)
async def test_each_tools_bad_input(kit: Any, spec: Any, args: dict[str, Any], needle: str) -> None:
    tmp_path, _store, service = kit
    out = await call(spec, args, context(tmp_path, service))
    assert out.is_error
    assert needle in out.text


async def test_update_refuses_clear_pin_with_provider(kit: Any) -> None:
    tmp_path, _store, service = kit
    ctx = context(tmp_path, service)
    created = await call(SCHEDULE_JOB, {"task_prompt": "x", "schedule": "every 1 hour"}, ctx)
    job_id = created.data["job"]["id"]
    out = await call(
        UPDATE_JOB, {"job_id": job_id, "clear_route_pin": True, "provider": "openai"}, ctx
    )
    assert out.is_error
    assert "cannot be combined" in out.text


async def test_run_job_now_through_a_running_scheduler(kit: Any) -> None:
    tmp_path, store, service = kit
    ctx = context(tmp_path, service)
    created = await call(SCHEDULE_JOB, {"task_prompt": "x", "schedule": "every 1 hour"}, ctx)
    job_id = created.data["job"]["id"]
    async with anyio.create_task_group() as tg:
        await tg.start(service.scheduler.serve)
        out = await call(RUN_JOB_NOW, {"job_id": job_id}, ctx)
        assert not out.is_error, out.text
        assert out.data["trigger"] == "manual"
        await service.scheduler.wait_idle()
        runs = await call(LIST_JOB_RUNS, {"job_id": job_id}, ctx)
        (run,) = runs.data["runs"]
        assert run["status"] == "succeeded"
        full = await call(GET_JOB_RUN, {"run_id": run["id"]}, ctx)
        assert full.data["task_prompt"] == "x"
        assert full.data["final_response"] == "ok"
        assert full.data["config"]["timeout_seconds"] == 1800
        tg.cancel_scope.cancel()
    assert (await store.get_job(job_id)).status == "scheduled"


async def test_tools_without_a_job_service_say_so(tmp_path: Path) -> None:
    ctx = ToolContext(trust=Trust.OPERATOR, cwd=tmp_path, home=_Home(tmp_path))
    out = await call(LIST_JOBS, {}, ctx)
    assert out.is_error
    assert "not available" in out.text
    assert "fermix start" in out.text  # jobs live in the daemon
