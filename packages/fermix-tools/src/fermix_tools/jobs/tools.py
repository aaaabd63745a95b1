"""The nine job tools: thin wrappers over :class:`fermix_core.jobs.service.JobService`.

Every acceptance rule lives in the service, so the model, ``fermix jobs`` and an embedding
app are held to the same checks. The tools add only what is about the model's call:
argument schemas, the owner-only guard for reads and changes, and readable answers.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from fermix_core.jobs.records import JOB_STATUSES, RUN_STATUSES, JobStoreError
from fermix_core.jobs.service import Creator, JobError, JobService, job_payload, run_payload
from fermix_core.tool import Tool, ToolContext, ToolError, ToolOutput, Trust
from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = [
    "GetJobRun",
    "GetJobRunArgs",
    "JobIdArgs",
    "ListJobRuns",
    "ListJobRunsArgs",
    "ListJobs",
    "ListJobsArgs",
    "PauseJob",
    "RemoveJob",
    "ResumeJob",
    "RunJobNow",
    "ScheduleJob",
    "ScheduleJobArgs",
    "UpdateJob",
    "UpdateJobArgs",
]

DeliveryMode = Literal["none", "origin", "channel", "local"]
JobStatus = Literal["scheduled", "running", "paused", "disabled", "completed", "expired"]
RunStatus = Literal["queued", "running", "succeeded", "failed", "timed_out", "cancelled", "missed"]
assert set(JobStatus.__args__) == set(JOB_STATUSES)  # type: ignore[attr-defined]
assert set(RunStatus.__args__) == set(RUN_STATUSES)  # type: ignore[attr-defined]

_JOB_ID = Field(min_length=2, max_length=40, description="The job id (list_jobs shows it).")


class DeliveryTarget(BaseModel):
    model_config = ConfigDict(extra="forbid")

    channel: str = Field(min_length=1, max_length=64, description="Channel name, e.g. telegram.")
    chat_id: str = Field(min_length=1, max_length=200, description="The chat on that channel.")
    thread_id: str | None = Field(default=None, max_length=200, description="Optional thread.")


class _Route(BaseModel):
    provider: str | None = Field(
        default=None,
        min_length=1,
        max_length=64,
        description="Pin the runs to this provider (give model too); omit for default routing.",
    )
    model: str | None = Field(
        default=None,
        min_length=1,
        max_length=200,
        description="Pin the runs to this model id (give provider too).",
    )
    delivery_mode: DeliveryMode | None = Field(
        default=None,
        description=(
            "Where results go: 'origin' (this chat; the default on a chat channel), 'channel' "
            "(the chat in delivery_target), 'local' (kept for `fermix jobs show`; the default "
            "elsewhere) or 'none' (run history only)."
        ),
    )
    delivery_target: DeliveryTarget | None = Field(
        default=None, description="Only with delivery_mode 'channel': {channel, chat_id}."
    )


class ScheduleJobArgs(_Route):
    model_config = ConfigDict(extra="forbid")

    task_prompt: str = Field(
        min_length=1,
        max_length=8000,
        description=(
            "What each run must do, self-contained: the run cannot see this chat, so include "
            "every fact it needs (names, places, URLs, what the result should look like)."
        ),
    )
    schedule: str = Field(
        min_length=1,
        max_length=100,
        description=(
            "'every N minutes|hours|days', one ISO 8601 datetime ('2026-12-24T09:00', in "
            "timezone), or 5-field cron 'min hour day month weekday' ('0 8 * * *'). No English."
        ),
    )
    timezone: str | None = Field(
        default=None,
        max_length=64,
        description="IANA zone for cron and naive datetimes; default: the owner's timezone.",
    )
    description: str = Field(default="", max_length=200, description="A short label.")
    allowed_tools: list[str] | None = Field(
        default=None,
        max_length=64,
        description="Narrow the runs to these of your current tools; omit for all of them.",
    )
    skill_name: str | None = Field(
        default=None, max_length=100, description="Bind the runs to a skill's confinement."
    )
    timeout_seconds: int | None = Field(
        default=None,
        ge=1,
        le=86400,
        description="Wall-clock cap per run (default 1800). Set at creation only.",
    )
    inactivity_timeout_seconds: int | None = Field(
        default=None,
        ge=1,
        le=86400,
        description="Fail a run that makes no progress this long (default: off). Creation only.",
    )
    expires_at: str | None = Field(
        default=None,
        max_length=40,
        description="ISO 8601 datetime after which the job stops (a temporary job).",
    )


class UpdateJobArgs(_Route):
    model_config = ConfigDict(extra="forbid")

    job_id: str = _JOB_ID
    task_prompt: str | None = Field(default=None, min_length=1, max_length=8000)
    schedule: str | None = Field(default=None, min_length=1, max_length=100)
    timezone: str | None = Field(default=None, max_length=64)
    description: str | None = Field(default=None, max_length=200)
    skill_name: str | None = Field(default=None, max_length=100)
    clear_route_pin: bool = Field(
        default=False,
        description="Un-pin provider/model back to default routing (not with provider/model).",
    )
    expires_at: str | None = Field(default=None, max_length=40)

    @model_validator(mode="before")
    @classmethod
    def _creation_only(cls, data: Any) -> Any:
        if isinstance(data, dict):
            fixed = [k for k in ("timeout_seconds", "inactivity_timeout_seconds") if k in data]
            if fixed:
                raise ValueError(
                    f"{', '.join(fixed)} is set at creation only and cannot be edited; remove "
                    "this job and schedule a new one to change it"
                )
        return data


class ListJobsArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    status: JobStatus | None = Field(default=None, description="Only jobs in this state.")


class JobIdArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    job_id: str = _JOB_ID


class ListJobRunsArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    job_id: str = _JOB_ID
    status: RunStatus | None = Field(default=None, description="Only runs in this state.")
    limit: int = Field(default=10, ge=1, le=50, description="Most runs to return, newest first.")


class GetJobRunArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    run_id: int = Field(ge=1, description="The run id (list_job_runs shows it).")


# --------------------------------------------------------------------------- helpers


def _service(ctx: ToolContext) -> JobService:
    service = ctx.services.get("jobs")
    if not isinstance(service, JobService):
        raise ToolError(
            "scheduled jobs are not available in this context: they live in the daemon — "
            "ask the owner to start it (`fermix start`), then try again"
        )
    return service


def _owner(ctx: ToolContext, what: str) -> None:
    """Job reads and changes return or touch the owner's data: operator only."""
    if ctx.trust is not Trust.OPERATOR:
        raise ToolError(f"{what} is only available to the owner")


def _answer(summary: str, data: dict[str, Any]) -> ToolOutput:
    body = json.dumps(data, ensure_ascii=False, indent=1, default=str)
    return ToolOutput(content=f"{summary}\n{body}", data=data)


async def _call(awaitable: Any) -> Any:
    try:
        return await awaitable
    except JobError as exc:
        raise ToolError(str(exc)) from None
    except JobStoreError as exc:
        raise ToolError(f"scheduled jobs are unavailable right now; retry later ({exc})") from None


def _route_fields(args: _Route) -> dict[str, Any]:
    return {
        "provider": args.provider,
        "model": args.model,
        "delivery_mode": args.delivery_mode,
        "delivery_target": args.delivery_target.model_dump() if args.delivery_target else None,
    }


# --------------------------------------------------------------------------- tools


class ScheduleJob(Tool[ScheduleJobArgs]):
    async def run(self, args: ScheduleJobArgs, ctx: ToolContext) -> ToolOutput:
        service = _service(ctx)
        job, notes = await _call(
            service.create(
                Creator.from_context(ctx),
                task_prompt=args.task_prompt,
                schedule=args.schedule,
                timezone=args.timezone,
                description=args.description,
                allowed_tools=args.allowed_tools,
                skill_name=args.skill_name,
                timeout_seconds=args.timeout_seconds,
                inactivity_timeout_seconds=args.inactivity_timeout_seconds,
                expires_at=args.expires_at,
                **_route_fields(args),
            )
        )
        payload = job_payload(job)
        summary = f"Scheduled job {job.id}: {job.schedule} ({job.timezone}), next run " + (
            f"{payload['next_run_at']}." if payload["next_run_at"] else "none."
        )
        if notes:
            summary += " Note: " + " ".join(notes)
        return _answer(summary, {"job": payload, "notes": notes})


class UpdateJob(Tool[UpdateJobArgs]):
    async def run(self, args: UpdateJobArgs, ctx: ToolContext) -> ToolOutput:
        _owner(ctx, "update_job")
        job, notes = await _call(
            _service(ctx).update(
                Creator.from_context(ctx),
                args.job_id,
                task_prompt=args.task_prompt,
                schedule=args.schedule,
                timezone=args.timezone,
                description=args.description,
                skill_name=args.skill_name,
                clear_route_pin=args.clear_route_pin,
                expires_at=args.expires_at,
                **_route_fields(args),
            )
        )
        summary = f"Updated job {job.id}."
        if notes:
            summary += " Note: " + " ".join(notes)
        return _answer(summary, {"job": job_payload(job), "notes": notes})


class ListJobs(Tool[ListJobsArgs]):
    async def run(self, args: ListJobsArgs, ctx: ToolContext) -> ToolOutput:
        _owner(ctx, "list_jobs")
        jobs = await _call(_service(ctx).list([args.status] if args.status else None))
        payloads = [job_payload(job) for job in jobs]
        summary = f"{len(payloads)} job{'s' if len(payloads) != 1 else ''}."
        return _answer(summary, {"jobs": payloads})


class PauseJob(Tool[JobIdArgs]):
    async def run(self, args: JobIdArgs, ctx: ToolContext) -> ToolOutput:
        _owner(ctx, "pause_job")
        job = await _call(_service(ctx).pause(args.job_id))
        return _answer(f"Paused job {job.id}; resume_job starts it again.", job_payload(job))


class ResumeJob(Tool[JobIdArgs]):
    async def run(self, args: JobIdArgs, ctx: ToolContext) -> ToolOutput:
        _owner(ctx, "resume_job")
        job = await _call(_service(ctx).resume(args.job_id))
        payload = job_payload(job)
        return _answer(f"Resumed job {job.id}; next run {payload['next_run_at']}.", payload)


class RemoveJob(Tool[JobIdArgs]):
    async def run(self, args: JobIdArgs, ctx: ToolContext) -> ToolOutput:
        _owner(ctx, "remove_job")
        cancelled = await _call(_service(ctx).remove(args.job_id))
        note = " Its run in progress was cancelled." if cancelled else ""
        return _answer(
            f"Removed job {args.job_id} and its run history.{note}",
            {"removed": args.job_id, "cancelled_run": cancelled},
        )


class RunJobNow(Tool[JobIdArgs]):
    async def run(self, args: JobIdArgs, ctx: ToolContext) -> ToolOutput:
        _owner(ctx, "run_job_now")
        run = await _call(_service(ctx).run_now(args.job_id))
        return _answer(
            f"Started run {run.id} of job {args.job_id} (trigger manual); the timed schedule is "
            "unchanged. Check it with get_job_run.",
            run_payload(run),
        )


class ListJobRuns(Tool[ListJobRunsArgs]):
    async def run(self, args: ListJobRunsArgs, ctx: ToolContext) -> ToolOutput:
        _owner(ctx, "list_job_runs")
        runs = await _call(_service(ctx).runs(args.job_id, status=args.status, limit=args.limit))
        payloads = [run_payload(run) for run in runs]
        return _answer(
            f"{len(payloads)} run{'s' if len(payloads) != 1 else ''} of job {args.job_id}, "
            "newest first.",
            {"runs": payloads},
        )


class GetJobRun(Tool[GetJobRunArgs]):
    async def run(self, args: GetJobRunArgs, ctx: ToolContext) -> ToolOutput:
        _owner(ctx, "get_job_run")
        run = await _call(_service(ctx).run(args.run_id))
        return _answer(
            f"Run {run.id} of job {run.job_id}: {run.status}.", run_payload(run, full=True)
        )
