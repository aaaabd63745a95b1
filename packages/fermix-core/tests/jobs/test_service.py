"""JobService: every acceptance rule, on a real store and a scheduler over a fake clock."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from fermix_core.channel import ConversationKey
from fermix_core.jobs.clock import FakeClock
from fermix_core.jobs.scheduler import Scheduler
from fermix_core.jobs.service import Creator, JobError, JobService
from fermix_core.jobs.store import SqliteJobStore
from fermix_core.testing.jobs import T0
from fermix_core.tool import Trust

pytestmark = pytest.mark.anyio

OWNER_TOOLS = {"web_fetch", "file_write", "list_jobs", "memory_recall"}
GUEST_TOOLS = {"memory_recall"}
TELEGRAM = ConversationKey("telegram", "42", None)


async def pin_check(provider: str, model: str) -> None:
    if provider != "openai":
        raise ValueError(f'provider "{provider}" is not configured')


class Kit:
    def __init__(self, store: SqliteJobStore) -> None:
        self.clock = FakeClock(T0)
        self.store = store
        self.gates: list[anyio.Event] = []

        async def execute(job: Any, run: Any, release: str) -> None:
            gate = anyio.Event()
            self.gates.append(gate)
            await gate.wait()
            await store.settle(run.id, status="succeeded", now=self.clock.now(), job_status=release)

        self.scheduler = Scheduler(store, execute, clock=self.clock)
        self.service = JobService(
            store,
            self.scheduler,
            self.clock,
            default_timezone="Europe/Berlin",
            visible_tools=lambda trust: OWNER_TOOLS if trust is Trust.OPERATOR else GUEST_TOOLS,
            channels={"telegram", "slack"},
            check_pin=pin_check,
        )


@pytest.fixture
async def kit(tmp_path: Path) -> AsyncIterator[Kit]:
    store = await SqliteJobStore.open(tmp_path / "memory.db")
    yield Kit(store)
    await store.aclose()


OWNER = Creator(trust=Trust.OPERATOR, conversation_key=TELEGRAM)
LOCAL = Creator(trust=Trust.OPERATOR, conversation_key=ConversationKey("cli", "x"), local=True)


async def create(kit: Kit, creator: Creator = OWNER, **kw: Any) -> Any:
    kw.setdefault("task_prompt", "Check the weather in Berlin and summarise it")
    kw.setdefault("schedule", "0 8 * * *")
    job, _notes = await kit.service.create(creator, **kw)
    return job


async def test_create_stamps_trust_timezone_and_next_fire(kit: Kit) -> None:
    job = await create(kit)
    assert job.trust == "operator"
    assert job.timezone == "Europe/Berlin"  # the configured default
    assert job.status == "scheduled"
    assert job.delivery_mode == "origin"
    assert job.delivery_target == {"channel": "telegram", "chat_id": "42", "thread_id": None}
    assert job.timeout_seconds == 1800
    assert job.inactivity_timeout_seconds is None
    assert job.max_iterations == 100
    assert job.next_run_at > T0
    assert job.id.startswith("j")


async def test_a_context_without_trust_cannot_create(kit: Kit) -> None:
    with pytest.raises(JobError, match="carries no trust"):
        await create(kit, Creator(trust=None))
    with pytest.raises(JobError, match="carries no trust"):
        await create(kit, Creator(trust="operator"))  # a string is not a trust
    assert await kit.store.list_jobs() == []


async def test_a_guest_cannot_schedule_with_owner_tools(kit: Kit) -> None:
    guest = Creator(trust=Trust.GUEST, conversation_key=TELEGRAM)
    with pytest.raises(JobError, match="not available to you: file_write, web_fetch"):
        await create(kit, guest, allowed_tools=["file_write", "web_fetch"])
    job = await create(kit, guest, allowed_tools=["memory_recall"])
    assert job.trust == "guest"
    assert job.allowed_tools == ["memory_recall"]


async def test_allowed_tools_are_checked_against_the_callers_visible_tools(kit: Kit) -> None:
    narrowed = Creator(trust=Trust.OPERATOR, visible_tools=["web_fetch"])
    with pytest.raises(JobError, match="not available to you: file_write"):
        await create(kit, narrowed, allowed_tools=["file_write"])
    with pytest.raises(JobError, match="not available to you: nope"):
        await create(kit, allowed_tools=["nope"])
    with pytest.raises(JobError, match="allowed_tools is empty"):
        await create(kit, allowed_tools=[])


@pytest.mark.parametrize(
    ("fields", "needle"),
    [
        ({"schedule": "daily at 8am"}, "'0 8 * * *'"),
        ({"schedule": "0 8 * * *", "timezone": "Mars/Base"}, "unknown timezone"),
        ({"schedule": "2020-01-01T10:00"}, "in the past"),
        ({"task_prompt": "  "}, "task_prompt is empty"),
        ({"task_prompt": "x" * 8001}, "longer than 8000"),
        ({"description": "d" * 201}, "description is longer"),
        ({"schedule": "0 8 * * *" + " " * 10 + "x" * 5000}, "at most 100"),
        ({"expires_at": "2020-01-01T00:00"}, "in the past"),
        ({"expires_at": "soon"}, "not an ISO 8601 datetime"),
        ({"provider": "openai"}, "give both or neither (model is missing)"),
        ({"model": "gpt-x"}, "provider is missing"),
        ({"provider": "nowhere", "model": "m"}, "not configured"),
        ({"skill_name": "research"}, "skills are not available yet"),
        ({"timeout_seconds": 0}, "timeout_seconds must be between"),
        ({"timeout_seconds": 60, "inactivity_timeout_seconds": 120}, "inactivity_timeout"),
        ({"delivery_mode": "carrier-pigeon"}, "unknown delivery_mode"),
        ({"delivery_mode": "channel"}, "needs delivery_target"),
        (
            {"delivery_mode": "channel", "delivery_target": {"channel": "irc", "chat_id": "1"}},
            "unknown channel 'irc'",
        ),
        ({"delivery_mode": "local", "delivery_target": {"channel": "slack"}}, "only with"),
    ],
)
async def test_bad_input_is_rejected_with_guidance(
    kit: Kit, fields: dict[str, Any], needle: str
) -> None:
    with pytest.raises(JobError) as info:
        await create(kit, **fields)
    assert needle in str(info.value)
    assert await kit.store.list_jobs() == []


async def test_origin_on_a_local_surface_is_kept_locally(kit: Kit) -> None:
    job, notes = await kit.service.create(LOCAL, task_prompt="x", schedule="every 1 hour")
    assert job.delivery_mode == "local"
    assert job.delivery_target is None
    assert notes == []
    job, notes = await kit.service.create(
        LOCAL, task_prompt="x", schedule="every 1 hour", delivery_mode="origin"
    )
    assert job.delivery_mode == "local"
    assert "kept locally" in notes[0]


async def test_update_changes_only_what_is_given(kit: Kit) -> None:
    job = await create(kit, provider="openai", model="gpt-x", description="weather")
    updated, _ = await kit.service.update(OWNER, job.id, task_prompt="Check Hamburg instead")
    assert updated.task_prompt == "Check Hamburg instead"
    assert (updated.provider, updated.model) == ("openai", "gpt-x")  # pin kept
    assert updated.delivery_target == job.delivery_target  # never silently retargeted
    assert updated.description == "weather"
    assert updated.schedule == job.schedule


async def test_update_schedule_recomputes_the_next_fire(kit: Kit) -> None:
    job = await create(kit)
    updated, _ = await kit.service.update(OWNER, job.id, schedule="every 15 minutes")
    assert updated.schedule_kind == "interval"
    assert updated.next_run_at == T0 + 900
    with pytest.raises(JobError, match="'0 8 \\* \\* \\*'"):
        await kit.service.update(OWNER, job.id, schedule="daily at 8am")


async def test_route_pin_rules_on_update(kit: Kit) -> None:
    job = await create(kit, provider="openai", model="gpt-x")
    with pytest.raises(JobError, match="cannot be combined"):
        await kit.service.update(OWNER, job.id, clear_route_pin=True, model="other")
    with pytest.raises(JobError, match="both or neither"):
        await kit.service.update(OWNER, job.id, model="other")
    cleared, _ = await kit.service.update(OWNER, job.id, clear_route_pin=True)
    assert (cleared.provider, cleared.model) == (None, None)
    repinned, _ = await kit.service.update(OWNER, job.id, provider="openai", model="gpt-y")
    assert repinned.model == "gpt-y"


async def test_switching_delivery_to_local_clears_the_target(kit: Kit) -> None:
    job = await create(kit)
    updated, _ = await kit.service.update(OWNER, job.id, delivery_mode="local")
    assert (updated.delivery_mode, updated.delivery_target) == ("local", None)
    to_slack, _ = await kit.service.update(
        OWNER,
        job.id,
        delivery_mode="channel",
        delivery_target={"channel": "slack", "chat_id": "C1"},
    )
    assert to_slack.delivery_target == {"channel": "slack", "chat_id": "C1", "thread_id": None}


async def test_update_with_nothing_is_an_error(kit: Kit) -> None:
    job = await create(kit)
    with pytest.raises(JobError, match="nothing to change"):
        await kit.service.update(OWNER, job.id)
    with pytest.raises(JobError, match="no job 'nope'"):
        await kit.service.update(OWNER, "nope", task_prompt="x")


async def test_pause_resume_and_disabled_is_distinct(kit: Kit) -> None:
    job = await create(kit)
    paused = await kit.service.pause(job.id)
    assert paused.status == "paused"
    with pytest.raises(JobError, match="already paused"):
        await kit.service.pause(job.id)
    resumed = await kit.service.resume(job.id)
    assert resumed.status == "scheduled"
    with pytest.raises(JobError, match="only a paused or disabled job"):
        await kit.service.resume(job.id)
    # A corrupted row: the scheduler disables it; resume refuses until update_job fixes it.
    await kit.store.update_job(job.id, {"schedule": "99 * * * *"}, now=T0)
    await kit.store.update_job(job.id, {"status": "disabled", "last_error": "bad"}, now=T0)
    with pytest.raises(JobError, match="still does not parse"):
        await kit.service.resume(job.id)
    fixed, notes = await kit.service.update(OWNER, job.id, schedule="0 9 * * *")
    assert fixed.status == "disabled"
    assert "resume" in notes[0]
    assert (await kit.service.resume(job.id)).status == "scheduled"


async def test_run_now_refusals(kit: Kit) -> None:
    async with anyio.create_task_group() as tg:
        await tg.start(kit.scheduler.serve)
        job = await create(kit)
        await kit.service.pause(job.id)
        with pytest.raises(JobError, match="is paused"):
            await kit.service.run_now(job.id)
        await kit.service.resume(job.id)
        run = await kit.service.run_now(job.id)
        assert run.trigger == "manual"
        with pytest.raises(JobError, match="already mid-run"):
            await kit.service.run_now(job.id)
        kit.gates[0].set()
        await kit.scheduler.wait_idle()
        await kit.store.update_job(job.id, {"status": "disabled", "last_error": "x"}, now=T0)
        with pytest.raises(JobError, match="is disabled"):
            await kit.service.run_now(job.id)
        temp = await create(kit, expires_at="2027-01-15T09:30")  # 30 min after T0 (Berlin)
        kit.clock.advance(3600)
        with pytest.raises(JobError, match="expired"):
            await kit.service.run_now(temp.id)
        tg.cancel_scope.cancel()


async def test_remove_and_runs(kit: Kit) -> None:
    job = await create(kit)
    assert await kit.service.remove(job.id) is False
    with pytest.raises(JobError, match="no job"):
        await kit.service.get(job.id)
    with pytest.raises(JobError, match="no job"):
        await kit.service.runs(job.id)
    other = await create(kit)
    with pytest.raises(JobError, match="unknown run status"):
        await kit.service.runs(other.id, status="exploded")
    with pytest.raises(JobError, match="no run 99"):
        await kit.service.run(99)


async def test_skill_name_must_name_a_loaded_skill(kit: Kit, tmp_path: Path) -> None:
    from fermix_core.skills import SkillRegistry, SkillRoot

    for name, front in {
        "research": "description: d\n",
        "nothing": "description: d\nallowed_tools: [web_fetch]\n",
    }.items():
        (tmp_path / "skills" / name).mkdir(parents=True)
        (tmp_path / "skills" / name / "SKILL.md").write_text(
            f"---\nname: {name}\n{front}---\nbody\n"
        )
    kit.service.skills = SkillRegistry(
        [SkillRoot(tmp_path / "skills", Trust.OPERATOR, "local")]
    ).load()
    job = await create(kit, skill_name="research")
    assert job.skill_name == "research"
    with pytest.raises(JobError, match="'nope' is not a loaded skill; skills: nothing, research"):
        await create(kit, skill_name="nope")
    guest = Creator(trust=Trust.GUEST, conversation_key=TELEGRAM)
    with pytest.raises(JobError, match="grants no tool under guest trust"):
        await create(kit, guest, skill_name="nothing")
    updated, _notes = await kit.service.update(OWNER, job.id, skill_name="nothing")
    assert updated.skill_name == "nothing"
    with pytest.raises(JobError, match="not a loaded skill"):
        await kit.service.update(OWNER, job.id, skill_name="gone")
