"""The records the job store hands out, and its errors. Plain dataclasses, cheap to import."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = [
    "ACTIVE_RUN_STATUSES",
    "DELIVERY_MODES",
    "JOB_STATUSES",
    "RUN_STATUSES",
    "TRIGGERS",
    "JobNotFound",
    "JobRecord",
    "JobStateError",
    "JobStoreError",
    "RunRecord",
]

#: ``scheduled`` waits for its next fire; ``running`` has a queued or running run;
#: ``paused`` is the user's hold; ``disabled`` is terminal until fixed (a schedule or zone
#: that no longer parses); ``completed`` is a once job that ran; ``expired`` passed
#: ``expires_at``.
JOB_STATUSES = ("scheduled", "running", "paused", "disabled", "completed", "expired")
#: ``missed`` is a recurring fire skipped because it was older than the freshness window.
RUN_STATUSES = ("queued", "running", "succeeded", "failed", "timed_out", "cancelled", "missed")
ACTIVE_RUN_STATUSES = ("queued", "running")
TRIGGERS = ("schedule", "manual")
DELIVERY_MODES = ("none", "origin", "channel", "local")
DELIVERY_STATUSES = ("pending", "none", "stored", "delivered", "failed")


class JobStoreError(Exception):
    """The job store cannot do what was asked; the message says what to check."""


class JobNotFound(JobStoreError):
    """No job (or run) with that id."""


class JobStateError(JobStoreError):
    """The job is not in a state that allows the change (e.g. resuming a running job)."""


@dataclass
class JobRecord:
    """One job row. ``creator`` is where it was created (channel, chat, sender, local)."""

    id: str
    task_prompt: str
    schedule_kind: str
    schedule: str
    timezone: str
    trust: str
    description: str = ""
    status: str = "scheduled"
    creator: dict[str, Any] = field(default_factory=dict)
    allowed_tools: list[str] | None = None
    skill_name: str | None = None
    provider: str | None = None
    model: str | None = None
    delivery_mode: str = "local"
    delivery_target: dict[str, Any] | None = None
    timeout_seconds: int = 1800
    inactivity_timeout_seconds: int | None = None
    max_iterations: int = 100
    expires_at: float | None = None
    next_run_at: float | None = None
    #: Where an interval's cadence counts from (creation, or the last schedule change).
    anchor_at: float | None = None
    last_run_at: float | None = None
    last_status: str | None = None
    last_error: str | None = None
    created_at: float = 0.0
    updated_at: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class RunRecord:
    """One run of a job: its trigger, timing, what it executed and what came of it."""

    id: int
    job_id: str
    trigger: str
    status: str
    due_at: float | None = None
    queued_at: float = 0.0
    started_at: float | None = None
    finished_at: float | None = None
    session_id: str = ""
    #: What the run executed under: task_prompt, timeouts, tools, route, delivery, trust.
    config: dict[str, Any] = field(default_factory=dict)
    prompt_snapshot: str | None = None
    final_response: str | None = None
    error: str | None = None
    usage: dict[str, int] = field(default_factory=dict)
    model: str | None = None
    provider: str | None = None
    attempts: int = 0
    delivery_status: str = "pending"
    delivery_error: str | None = None
    delivery_attempts: int = 0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)
