"""What the nine job tools and ``fermix jobs`` call: validation, trust, and the store.

Every rule that decides whether a job may exist lives here, so a job created by the model,
by the CLI or by an embedding app is checked the same way:

* a creator must carry a trust (operator or guest); the job is stamped with it;
* the schedule and timezone parse, a ``once`` time is in the future, ``expires_at`` too;
* ``allowed_tools`` names only tools the creator can see right now (unknown names are
  rejected); the run can never be wider than the creator's trust;
* ``provider`` + ``model`` are both-or-neither and are validated by resolving the cron route
  with that pin — the same resolution the runner does at run time;
* ``skill_name`` must name a loaded skill (rejected without a skill registry), and a guest
  job naming a skill that grants it no tool under guest trust is refused;
* delivery is resolved to a concrete destination once, here, and stored.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from fermix_core.jobs.clock import Clock
from fermix_core.jobs.delivery import DeliveryError, resolve_delivery
from fermix_core.jobs.records import (
    RUN_STATUSES,
    JobNotFound,
    JobRecord,
    JobStateError,
    RunRecord,
)
from fermix_core.jobs.scheduler import Scheduler
from fermix_core.jobs.schedules import (
    Schedule,
    ScheduleError,
    load_zone,
    local_iso,
    parse_schedule,
    utc_iso,
)
from fermix_core.jobs.store import JobStore
from fermix_core.tool import Trust

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "MAX_TIMEOUT_S",
    "Creator",
    "JobError",
    "JobService",
    "job_payload",
    "run_payload",
]

log = logging.getLogger("fermix.jobs")

DEFAULT_TIMEOUT_S = 1800
MAX_TIMEOUT_S = 24 * 3600
DEFAULT_MAX_ITERATIONS = 100
MAX_TASK_CHARS = 8000
MAX_DESCRIPTION_CHARS = 200
SKILLS_UNAVAILABLE = (
    "skill_name cannot be used: skills are not available yet in this Fermix, so a job cannot "
    "be bound to one; leave skill_name out (allowed_tools still narrows the run)"
)

#: Validates a provider/model pin; raises with the reason when the pin cannot run.
PinCheck = Callable[[str, str], Any]


class JobError(ValueError):
    """A job request that cannot be done; the message says what to change."""


@dataclass(frozen=True)
class Creator:
    """Who is asking: the caller's trust and where it is (from a ToolContext or the CLI)."""

    trust: Any
    conversation_key: Any = None
    local: bool = False
    origin: str = "main"
    #: The tool names the caller can see now (``None``: the full surface of its trust).
    visible_tools: Collection[str] | None = None

    @classmethod
    def from_context(cls, ctx: Any) -> Creator:
        from fermix_core.agent.capabilities import BRIDGE_NAMES

        names = [n for n in (ctx.capabilities or {}) if n not in BRIDGE_NAMES]
        return cls(
            trust=getattr(ctx, "trust", None),
            conversation_key=getattr(ctx, "conversation_key", None),
            local=bool(getattr(ctx, "local", False)),
            origin=str(getattr(ctx, "origin", "main")),
            visible_tools=names if ctx.capabilities else None,
        )


def _stamp(text: str | None, zone: str, field: str) -> float | None:
    if text is None:
        return None
    try:
        moment = datetime.fromisoformat(str(text).strip())
    except ValueError:
        raise JobError(
            f"{field} {text!r} is not an ISO 8601 datetime; write e.g. '2026-12-31T23:00' "
            "(in the job's timezone) or with an offset"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=load_zone(zone))
    return moment.timestamp()


def job_payload(job: JobRecord) -> dict[str, Any]:
    """A job as tools and the CLI show it: instructions, binding, route, destination, timing."""
    return {
        "id": job.id,
        "description": job.description,
        "status": job.status,
        "task_prompt": job.task_prompt,
        "schedule": job.schedule,
        "schedule_kind": job.schedule_kind,
        "timezone": job.timezone,
        "skill_name": job.skill_name,
        "provider": job.provider,
        "model": job.model,
        "delivery_mode": job.delivery_mode,
        "delivery_target": job.delivery_target,
        "allowed_tools": job.allowed_tools,
        "trust": job.trust,
        "timeout_seconds": job.timeout_seconds,
        "inactivity_timeout_seconds": job.inactivity_timeout_seconds,
        "next_run_at": local_iso(job.next_run_at, job.timezone),
        "expires_at": local_iso(job.expires_at, job.timezone),
        "last_run_at": utc_iso(job.last_run_at),
        "last_status": job.last_status,
        "last_error": job.last_error,
        "created_at": utc_iso(job.created_at),
    }


def run_payload(run: RunRecord, *, full: bool = False) -> dict[str, Any]:
    """A run as ``list_job_runs`` (summary) or ``get_job_run`` (*full*) shows it."""
    out: dict[str, Any] = {
        "id": run.id,
        "job_id": run.job_id,
        "trigger": run.trigger,
        "status": run.status,
        "due_at": utc_iso(run.due_at),
        "queued_at": utc_iso(run.queued_at),
        "started_at": utc_iso(run.started_at),
        "finished_at": utc_iso(run.finished_at),
        "error": run.error,
        "delivery_status": run.delivery_status,
        "session_id": run.session_id,
    }
    if not full:
        text = run.final_response or ""
        out["response_preview"] = text[:200] + ("…" if len(text) > 200 else "")
        return out
    out.update(
        task_prompt=run.config.get("task_prompt"),
        config=run.config,
        prompt_snapshot=run.prompt_snapshot,
        usage=run.usage,
        model=run.model,
        provider=run.provider,
        final_response=run.final_response,
        attempts=run.attempts,
        delivery_error=run.delivery_error,
        delivery_attempts=run.delivery_attempts,
    )
    return out


class JobService:
    def __init__(
        self,
        store: JobStore,
        scheduler: Scheduler,
        clock: Clock,
        *,
        default_timezone: str = "UTC",
        visible_tools: Callable[[Trust], Collection[str]] = lambda trust: (),
        channels: Collection[str] = (),
        check_pin: PinCheck | None = None,
        skills: Any = None,
    ) -> None:
        self.store = store
        self.scheduler = scheduler
        self.clock = clock
        self.default_timezone = default_timezone
        self.visible_tools = visible_tools
        self.channels = frozenset(channels)
        self.check_pin = check_pin
        #: The running skill registry (``None``: skills are not available here).
        self.skills = skills

    # ------------------------------------------------------------------ create

    async def create(
        self,
        creator: Creator,
        *,
        task_prompt: str,
        schedule: str,
        timezone: str | None = None,
        description: str = "",
        allowed_tools: list[str] | None = None,
        skill_name: str | None = None,
        provider: str | None = None,
        model: str | None = None,
        delivery_mode: str | None = None,
        delivery_target: Mapping[str, Any] | None = None,
        timeout_seconds: int | None = None,
        inactivity_timeout_seconds: int | None = None,
        expires_at: str | None = None,
    ) -> tuple[JobRecord, list[str]]:
        trust = self._trust(creator)
        if not str(task_prompt or "").strip():
            raise JobError("task_prompt is empty; say what the job should do, with every fact")
        self._sizes(task_prompt, description)
        zone = (timezone or self.default_timezone).strip()
        parsed = self._parse(schedule, zone)
        now = self.clock.now()
        if parsed.kind == "once" and parsed.at is not None and parsed.at <= now:
            raise JobError(
                f"the once time {parsed.expression} is in the past; give a future datetime"
            )
        expiry = self._expiry(expires_at, zone, now)
        tools = self._tools(creator, trust, allowed_tools)
        self._skill(skill_name, trust)
        await self._pin(provider, model)
        timeout, inactivity = self._timeouts(timeout_seconds, inactivity_timeout_seconds)
        mode, target, note = self._delivery(creator, delivery_mode, delivery_target)
        job = JobRecord(
            id=f"j{secrets.token_hex(4)}",
            task_prompt=task_prompt.strip(),
            schedule_kind=parsed.kind,
            schedule=parsed.expression,
            timezone=zone,
            trust=trust.value,
            description=(description or "").strip(),
            creator=self._creator_record(creator),
            allowed_tools=tools,
            skill_name=skill_name,
            provider=provider,
            model=model,
            delivery_mode=mode,
            delivery_target=target,
            timeout_seconds=timeout,
            inactivity_timeout_seconds=inactivity,
            max_iterations=DEFAULT_MAX_ITERATIONS,
            expires_at=expiry,
            next_run_at=parsed.next_after(now, anchor=now),
            anchor_at=now,
            created_at=now,
            updated_at=now,
        )
        stored = await self.store.create_job(job)
        self.scheduler.wake()
        log.info("job %s created (%s, %s trust)", stored.id, parsed.describe(), trust.value)
        return stored, [note] if note else []

    # ------------------------------------------------------------------ update

    async def update(
        self,
        creator: Creator,
        job_id: str,
        *,
        task_prompt: str | None = None,
        schedule: str | None = None,
        timezone: str | None = None,
        description: str | None = None,
        skill_name: str | None = None,
        provider: str | None = None,
        model: str | None = None,
        clear_route_pin: bool = False,
        delivery_mode: str | None = None,
        delivery_target: Mapping[str, Any] | None = None,
        expires_at: str | None = None,
    ) -> tuple[JobRecord, list[str]]:
        self._trust(creator)
        job = await self._get(job_id)
        changes: dict[str, Any] = {}
        notes: list[str] = []
        self._sizes(task_prompt, description)
        if task_prompt is not None:
            if not task_prompt.strip():
                raise JobError("task_prompt cannot be made empty")
            changes["task_prompt"] = task_prompt.strip()
        if description is not None:
            changes["description"] = description.strip()
        if schedule is not None or timezone is not None:
            zone = (timezone or job.timezone).strip()
            parsed = self._parse(schedule if schedule is not None else job.schedule, zone)
            now = self.clock.now()
            if parsed.kind == "once" and parsed.at is not None and parsed.at <= now:
                raise JobError(f"the once time {parsed.expression} is in the past")
            changes.update(
                schedule=parsed.expression,
                schedule_kind=parsed.kind,
                timezone=zone,
                anchor_at=now,
                next_run_at=parsed.next_after(now, anchor=now),
            )
            if job.status == "disabled":
                notes.append("the job stays disabled until you resume it (resume_job)")
            if job.status == "completed":
                changes["status"] = "scheduled"
        if skill_name is not None:
            self._skill(skill_name, Trust(job.trust))
            changes["skill_name"] = skill_name
        if clear_route_pin:
            if provider is not None or model is not None:
                raise JobError(
                    "clear_route_pin un-pins the route and cannot be combined with provider or "
                    "model; to re-pin, give provider and model without clear_route_pin"
                )
            changes.update(provider=None, model=None)
        elif provider is not None or model is not None:
            await self._pin(provider, model)
            changes.update(provider=provider, model=model)
        if delivery_mode is not None or delivery_target is not None:
            mode = delivery_mode or job.delivery_mode
            if mode in ("none", "local"):
                if delivery_target:
                    raise JobError(f"delivery_target does not go with delivery_mode {mode!r}")
                changes.update(delivery_mode=mode, delivery_target=None)
            else:
                resolved, target, note = self._delivery(creator, mode, delivery_target)
                changes.update(delivery_mode=resolved, delivery_target=target)
                if note:
                    notes.append(note)
        if expires_at is not None:
            changes["expires_at"] = self._expiry(expires_at, job.timezone, self.clock.now())
        if not changes:
            raise JobError("nothing to change: give at least one field to update")
        updated = await self._store(self.store.update_job(job_id, changes, now=self.clock.now()))
        self.scheduler.wake()
        return updated, notes

    # ------------------------------------------------------------------ state changes

    async def pause(self, job_id: str) -> JobRecord:
        job = await self._get(job_id)
        if job.status == "paused":
            raise JobError(f"job {job_id} is already paused")
        if job.status not in ("scheduled", "running"):
            raise JobError(f"job {job_id} is {job.status}; only a scheduled job can be paused")
        paused = await self._store(
            self.store.update_job(
                job_id, {"status": "paused"}, now=self.clock.now(), expect=["scheduled", "running"]
            )
        )
        self.scheduler.wake()
        return paused

    async def resume(self, job_id: str) -> JobRecord:
        job = await self._get(job_id)
        if job.status not in ("paused", "disabled"):
            raise JobError(
                f"job {job_id} is {job.status}; only a paused or disabled job can be resumed"
            )
        try:
            parsed = parse_schedule(job.schedule, job.timezone)
        except ScheduleError as exc:
            raise JobError(
                f"job {job_id}'s schedule still does not parse ({exc}); fix it with update_job "
                "first"
            ) from None
        now = self.clock.now()
        if job.expires_at is not None and job.expires_at <= now:
            raise JobError(f"job {job_id} expired at {utc_iso(job.expires_at)}; it cannot resume")
        nxt = parsed.next_after(now, anchor=job.anchor_at)
        if parsed.kind == "once" and nxt is None:
            nxt = parsed.at  # a once time that passed while paused runs late, like a missed one
        resumed = await self._store(
            self.store.update_job(
                job_id,
                {"status": "scheduled", "next_run_at": nxt, "last_error": None},
                now=now,
                expect=["paused", "disabled"],
            )
        )
        self.scheduler.wake()
        return resumed

    async def remove(self, job_id: str) -> bool:
        await self._get(job_id)
        cancelled = self.scheduler.cancel_job(job_id)
        await self._store(self.store.remove_job(job_id))
        self.scheduler.wake()
        return cancelled

    async def run_now(self, job_id: str) -> RunRecord:
        job = await self._get(job_id)
        now = self.clock.now()
        if job.status == "expired" or (job.expires_at is not None and job.expires_at <= now):
            raise JobError(f"job {job_id} has expired; it cannot be run")
        refusals = {
            "paused": "is paused; resume_job it first",
            "disabled": f"is disabled ({job.last_error}); fix it with update_job and resume it",
            "running": "is already mid-run; wait for that run (list_job_runs) and try again",
            "completed": "already ran (a once job); update its schedule to run it again",
        }
        if job.status in refusals:
            raise JobError(f"job {job_id} {refusals[job.status]}")
        try:
            return await self.scheduler.run_now(job)
        except JobStateError as exc:
            raise JobError(str(exc)) from None

    # ------------------------------------------------------------------ reads

    async def get(self, job_id: str) -> JobRecord:
        return await self._get(job_id)

    async def list(self, statuses: Collection[str] | None = None) -> list[JobRecord]:
        return await self._store(self.store.list_jobs(statuses))

    async def runs(
        self, job_id: str, *, status: str | None = None, limit: int = 20
    ) -> list[RunRecord]:
        await self._get(job_id)
        if status is not None and status not in RUN_STATUSES:
            raise JobError(f"unknown run status {status!r}; use one of {', '.join(RUN_STATUSES)}")
        return await self._store(
            self.store.list_runs(job_id, statuses=[status] if status else None, limit=limit)
        )

    async def run(self, run_id: int, job_id: str | None = None) -> RunRecord:
        run = await self._store(self.store.get_run(run_id))
        if run is None or (job_id is not None and run.job_id != job_id):
            raise JobError(f"no run {run_id}; list_job_runs shows the run ids of a job")
        return run

    # ------------------------------------------------------------------ checks

    def _trust(self, creator: Creator) -> Trust:
        if not isinstance(creator.trust, Trust):
            raise JobError(
                "this context carries no trust (it is neither the operator nor a guest), so it "
                "cannot create or change a job"
            )
        return creator.trust

    @staticmethod
    def _sizes(task_prompt: str | None, description: str | None) -> None:
        if task_prompt is not None and len(task_prompt) > MAX_TASK_CHARS:
            raise JobError(f"task_prompt is longer than {MAX_TASK_CHARS} characters; shorten it")
        if description is not None and len(description) > MAX_DESCRIPTION_CHARS:
            raise JobError(f"description is longer than {MAX_DESCRIPTION_CHARS} characters")

    @staticmethod
    def _parse(schedule: str, zone: str) -> Schedule:
        try:
            return parse_schedule(schedule, zone)
        except ScheduleError as exc:
            raise JobError(str(exc)) from None

    @staticmethod
    def _expiry(text: str | None, zone: str, now: float) -> float | None:
        try:
            expiry = _stamp(text, zone, "expires_at")
        except ScheduleError as exc:
            raise JobError(str(exc)) from None
        if expiry is not None and expiry <= now:
            raise JobError(f"expires_at {text!r} is in the past; give a future datetime")
        return expiry

    def _tools(self, creator: Creator, trust: Trust, names: list[str] | None) -> list[str] | None:
        if names is None:
            return None
        visible = set(
            creator.visible_tools
            if creator.visible_tools is not None
            else self.visible_tools(trust)
        )
        wanted = list(dict.fromkeys(n.strip() for n in names if n and n.strip()))
        if not wanted:
            raise JobError("allowed_tools is empty; leave it out to allow every visible tool")
        unknown = [n for n in wanted if n not in visible]
        if unknown:
            raise JobError(
                f"allowed_tools names tool(s) not available to you: {', '.join(unknown)}; a job "
                "can only narrow to tools you can use now (tool_search / tool_help list them)"
            )
        return wanted

    def _skill(self, skill_name: str | None, trust: Trust) -> None:
        if skill_name is None:
            return
        if self.skills is None:
            raise JobError(SKILLS_UNAVAILABLE)
        skill = self.skills.get(skill_name)
        if skill is None:
            known = ", ".join(sorted(self.skills.skills)) or "none"
            raise JobError(f"skill_name {skill_name!r} is not a loaded skill; skills: {known}")
        if trust is not Trust.OPERATOR:
            visible = set(self.visible_tools(trust))
            granted = visible if skill.allowed_tools is None else visible & set(skill.allowed_tools)
            if not granted:
                raise JobError(
                    f"skill {skill_name!r} grants no tool under guest trust, so a guest job "
                    "bound to it could do nothing; leave skill_name out"
                )

    async def _pin(self, provider: str | None, model: str | None) -> None:
        if (provider is None) != (model is None):
            missing = "model" if model is None else "provider"
            raise JobError(
                f"provider and model pin a route together: give both or neither ({missing} is "
                "missing)"
            )
        if provider is None or model is None:
            return
        if not provider.strip() or not model.strip():
            raise JobError("provider and model cannot be empty")
        if self.check_pin is not None:
            try:
                await self.check_pin(provider, model)
            except Exception as exc:
                raise JobError(f"cannot pin {provider}/{model}: {exc}") from None

    @staticmethod
    def _timeouts(timeout: int | None, inactivity: int | None) -> tuple[int, int | None]:
        value = DEFAULT_TIMEOUT_S if timeout is None else int(timeout)
        if not 1 <= value <= MAX_TIMEOUT_S:
            raise JobError(f"timeout_seconds must be between 1 and {MAX_TIMEOUT_S}")
        if inactivity is not None and not 1 <= int(inactivity) <= value:
            raise JobError("inactivity_timeout_seconds must be between 1 and timeout_seconds")
        return value, None if inactivity is None else int(inactivity)

    def _delivery(
        self, creator: Creator, mode: str | None, target: Mapping[str, Any] | None
    ) -> tuple[str, dict[str, Any] | None, str]:
        try:
            return resolve_delivery(
                mode,
                target,
                conversation_key=creator.conversation_key,
                local=creator.local,
                channels=self.channels,
            )
        except DeliveryError as exc:
            raise JobError(str(exc)) from None

    @staticmethod
    def _creator_record(creator: Creator) -> dict[str, Any]:
        key = creator.conversation_key
        return {
            "origin": creator.origin,
            "local": creator.local,
            "conversation_key": list(key) if key is not None else None,
        }

    async def _get(self, job_id: str) -> JobRecord:
        job = await self._store(self.store.get_job(str(job_id)))
        if job is None:
            raise JobError(f"no job {job_id!r}; list_jobs shows the ids")
        return job

    @staticmethod
    async def _store(awaitable: Any) -> Any:
        try:
            return await awaitable
        except (JobNotFound, JobStateError) as exc:
            raise JobError(str(exc)) from None
