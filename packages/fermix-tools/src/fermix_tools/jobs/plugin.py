"""Registers the nine job tools. Registration imports nothing but spec records.

Reads (``list_jobs``, ``list_job_runs``, ``get_job_run``) are ``OWNER_DATA_READ``: they
return the owner's own instructions and results, so they are never in a guest's surface.
Changes are ``WRITE``. The runtime hands the tools its ``JobService`` as ``ctx.service("jobs")``.
"""

from __future__ import annotations

from collections.abc import Iterable

from fermix_core.hookspecs import hookimpl
from fermix_core.specs import PolicyClass, ToolSpec

_M = "fermix_tools.jobs.tools"
_UNAVAILABLE = "scheduled jobs unavailable (no job service in this run, or a database error)"
_NOT_OWNER = "not the owner: job reads and changes are owner-only"
_UNKNOWN = "unknown job_id: call list_jobs for the ids"

SCHEDULE_JOB = ToolSpec(
    name="schedule_job",
    description=(
        "Create a durable scheduled job (interval, one datetime, or 5-field cron) that runs an "
        "isolated agent later; it does not run now."
    ),
    factory=f"{_M}:ScheduleJob",
    args_model=f"{_M}:ScheduleJobArgs",
    policy=PolicyClass.WRITE,
    read_only=False,
    guidance=(
        "Runs cannot see this chat: put every fact the task needs into task_prompt. schedule "
        "is 'every 15 minutes' / 'every 2 hours' / 'every 1 day', one ISO datetime such as "
        "'2026-12-24T09:00' (a once job; runs late rather than never), or cron 'min hour dom "
        "month dow' with *, values, lists 1,15, ranges 9-17 and steps */15 or 8-18/4 (weekday "
        "0 and 7 are Sunday). English like 'daily at 8am' is rejected — write '0 8 * * *'. "
        "Cron fires in timezone (DST-aware; default the owner's). Results go to this chat "
        "(delivery_mode origin) unless you choose local, none or channel. allowed_tools "
        "narrows the run to some of your current tools. provider and model pin the route "
        "together or not at all. timeout_seconds (default 1800) and "
        "inactivity_timeout_seconds are fixed at creation. expires_at makes a temporary job."
    ),
    failure_modes=(
        "free-form English or a malformed cron field: the error shows the cron form to use",
        "unknown timezone, a once time or expires_at in the past",
        "allowed_tools naming a tool you cannot use now",
        "provider without model (or model without provider), or a provider not configured",
        "skill_name not a loaded skill, or one granting a guest job no tool",
        "delivery_mode 'channel' without a delivery_target, or an unknown channel",
        "a context without trust: it cannot create jobs",
        _UNAVAILABLE,
    ),
)

UPDATE_JOB = ToolSpec(
    name="update_job",
    description=(
        "Edit a scheduled job in place: task, schedule, description, skill, route pin or "
        "delivery. Omitted fields stay as they are."
    ),
    factory=f"{_M}:UpdateJob",
    args_model=f"{_M}:UpdateJobArgs",
    policy=PolicyClass.WRITE,
    read_only=False,
    guidance=(
        "Give job_id and only the fields to change. A new schedule recomputes the next run "
        "(a disabled job stays disabled until resume_job). provider+model re-pin together; "
        "clear_route_pin un-pins back to default routing and cannot be combined with them. "
        "Switching delivery_mode to none or local clears the target; delivery is never "
        "retargeted unless you say so. timeout_seconds and inactivity_timeout_seconds cannot "
        "be edited."
    ),
    failure_modes=(
        _UNKNOWN,
        "nothing to change: no field given",
        "clear_route_pin together with provider/model, or only one of provider/model",
        "timeout_seconds/inactivity_timeout_seconds: creation only",
        "a schedule, timezone or delivery that fails the same checks as schedule_job",
        _NOT_OWNER,
    ),
)

LIST_JOBS = ToolSpec(
    name="list_jobs",
    description=(
        "List scheduled jobs with their instructions (task_prompt), schedule, status, next run, "
        "skill, pinned provider/model and delivery destination."
    ),
    factory=f"{_M}:ListJobs",
    args_model=f"{_M}:ListJobsArgs",
    policy=PolicyClass.OWNER_DATA_READ,
    read_only=True,
    guidance=(
        "Use to find a job id or check what a job will do; status filters by state "
        "(scheduled, running, paused, disabled — a schedule that stopped parsing, see "
        "last_error — completed, expired)."
    ),
    failure_modes=(_NOT_OWNER, _UNAVAILABLE),
)

_ID_ONLY = "Give the job_id from list_jobs."

PAUSE_JOB = ToolSpec(
    name="pause_job",
    description="Pause a scheduled job: it stops firing until resume_job.",
    factory=f"{_M}:PauseJob",
    args_model=f"{_M}:JobIdArgs",
    policy=PolicyClass.WRITE,
    read_only=False,
    guidance=_ID_ONLY + " A run already in progress finishes; the job then stays paused.",
    failure_modes=(_UNKNOWN, "already paused, or disabled/completed/expired", _NOT_OWNER),
)

RESUME_JOB = ToolSpec(
    name="resume_job",
    description="Resume a paused (or fixed disabled) job from its next future fire.",
    factory=f"{_M}:ResumeJob",
    args_model=f"{_M}:JobIdArgs",
    policy=PolicyClass.WRITE,
    read_only=False,
    guidance=_ID_ONLY + " Fires missed while paused are not run; a disabled job needs its "
    "schedule fixed with update_job first.",
    failure_modes=(
        _UNKNOWN,
        "not paused or disabled",
        "its schedule still does not parse: fix it with update_job",
        "expired",
        _NOT_OWNER,
    ),
)

REMOVE_JOB = ToolSpec(
    name="remove_job",
    description="Delete a scheduled job and its run history; a run in progress is cancelled.",
    factory=f"{_M}:RemoveJob",
    args_model=f"{_M}:JobIdArgs",
    policy=PolicyClass.WRITE,
    read_only=False,
    guidance=_ID_ONLY + " To stop it for a while instead, use pause_job.",
    failure_modes=(_UNKNOWN, _NOT_OWNER),
)

RUN_JOB_NOW = ToolSpec(
    name="run_job_now",
    description=(
        "Fire a scheduled job once now, out of band (trigger manual); its timed schedule is "
        "unchanged."
    ),
    factory=f"{_M}:RunJobNow",
    args_model=f"{_M}:JobIdArgs",
    policy=PolicyClass.WRITE,
    read_only=False,
    guidance=_ID_ONLY + " Use it to test a job or for an on-demand request; it returns at once "
    "— read the outcome with get_job_run.",
    failure_modes=(
        _UNKNOWN,
        "paused, disabled, expired or completed",
        "already mid-run: wait for that run",
        "the scheduler is not running",
        _NOT_OWNER,
    ),
)

LIST_JOB_RUNS = ToolSpec(
    name="list_job_runs",
    description=(
        "A job's run history, newest first: status, trigger, timing, outcome (status filter "
        "optional)."
    ),
    factory=f"{_M}:ListJobRuns",
    args_model=f"{_M}:ListJobRunsArgs",
    policy=PolicyClass.OWNER_DATA_READ,
    read_only=True,
    guidance=(
        "Use to confirm a job is firing. 'missed' runs are fires skipped because the daemon "
        "was down longer than the freshness window; read one run in full with get_job_run."
    ),
    failure_modes=(_UNKNOWN, _NOT_OWNER, _UNAVAILABLE),
)

GET_JOB_RUN = ToolSpec(
    name="get_job_run",
    description=(
        "One run in full: the task_prompt it executed, its config and prompt snapshots, token "
        "usage, final response, error and delivery outcome."
    ),
    factory=f"{_M}:GetJobRun",
    args_model=f"{_M}:GetJobRunArgs",
    policy=PolicyClass.OWNER_DATA_READ,
    read_only=True,
    guidance=(
        "task_prompt here is what the run actually executed (the job may have changed since); "
        "config echoes its timeouts, tools, route and delivery."
    ),
    failure_modes=("unknown run_id: list_job_runs shows them", _NOT_OWNER, _UNAVAILABLE),
)

JOB_TOOLS = (
    SCHEDULE_JOB,
    UPDATE_JOB,
    LIST_JOBS,
    PAUSE_JOB,
    RESUME_JOB,
    REMOVE_JOB,
    RUN_JOB_NOW,
    LIST_JOB_RUNS,
    GET_JOB_RUN,
)


@hookimpl
def fermix_tools() -> Iterable[ToolSpec]:
    return JOB_TOOLS
