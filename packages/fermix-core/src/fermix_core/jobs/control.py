"""The daemon's ``jobs.*`` control methods: what ``fermix jobs`` calls over the socket.

A person at the CLI is a local operator: ``jobs.add`` creates the job with operator trust,
no conversation (so ``origin`` delivery resolves to ``local``) and the full operator tool
surface. Refusals come back as ``job_error`` with the service's message.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from fermix_core.jobs.service import Creator, JobError, JobService, job_payload, run_payload
from fermix_core.tool import Trust

__all__ = ["control_handlers"]

Handler = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]


def control_handlers(
    service: Callable[[], JobService | None], error: type[Exception]
) -> dict[str, Handler]:
    """``{method: handler}``; *error* is the server's ``MethodError(code, message)``."""

    def jobs() -> JobService:
        current = service()
        if current is None:
            raise error("unavailable", "scheduled jobs are not available in this daemon")
        return current

    def text(params: dict[str, Any], name: str, *, required: bool = True) -> str | None:
        value = params.get(name)
        if value is None and not required:
            return None
        if not isinstance(value, str) or not value.strip():
            raise error("bad_params", f"{name} must be a non-empty string")
        return value

    def wrap(fn: Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]) -> Handler:
        async def handler(params: dict[str, Any]) -> dict[str, Any]:
            try:
                return await fn(params)
            except JobError as exc:
                raise error("job_error", str(exc)) from None

        return handler

    async def list_(params: dict[str, Any]) -> dict[str, Any]:
        status = text(params, "status", required=False)
        found = await jobs().list([status] if status else None)
        return {"jobs": [job_payload(j) for j in found]}

    async def show(params: dict[str, Any]) -> dict[str, Any]:
        job = await jobs().get(str(text(params, "job_id")))
        runs = await jobs().runs(job.id, limit=5)
        return {"job": job_payload(job), "recent_runs": [run_payload(r) for r in runs]}

    async def runs(params: dict[str, Any]) -> dict[str, Any]:
        limit = params.get("limit", 20)
        if not isinstance(limit, int) or not 1 <= limit <= 200:
            raise error("bad_params", "limit must be an integer from 1 to 200")
        found = await jobs().runs(
            str(text(params, "job_id")), status=text(params, "status", required=False), limit=limit
        )
        return {"runs": [run_payload(r) for r in found]}

    async def run(params: dict[str, Any]) -> dict[str, Any]:
        run_id = params.get("run_id")
        if not isinstance(run_id, int):
            raise error("bad_params", "run_id must be an integer")
        return {"run": run_payload(await jobs().run(run_id), full=True)}

    async def run_now(params: dict[str, Any]) -> dict[str, Any]:
        service = jobs()
        run = await service.run_now(str(text(params, "job_id")))
        if params.get("wait") is True:
            await service.scheduler.wait_run(run.id)
            return {"run": run_payload(await service.run(run.id), full=True)}
        return {"run": run_payload(run)}

    async def pause(params: dict[str, Any]) -> dict[str, Any]:
        return {"job": job_payload(await jobs().pause(str(text(params, "job_id"))))}

    async def resume(params: dict[str, Any]) -> dict[str, Any]:
        return {"job": job_payload(await jobs().resume(str(text(params, "job_id"))))}

    async def remove(params: dict[str, Any]) -> dict[str, Any]:
        job_id = str(text(params, "job_id"))
        cancelled = await jobs().remove(job_id)
        return {"removed": job_id, "cancelled_run": cancelled}

    async def add(params: dict[str, Any]) -> dict[str, Any]:
        target = params.get("delivery_target")
        if target is not None and not isinstance(target, dict):
            raise error("bad_params", "delivery_target must be an object")
        job, notes = await jobs().create(
            Creator(trust=Trust.OPERATOR, local=True, origin="cli"),
            task_prompt=str(text(params, "prompt")),
            schedule=str(text(params, "schedule")),
            timezone=text(params, "timezone", required=False),
            description=text(params, "description", required=False) or "",
            delivery_mode=text(params, "delivery_mode", required=False),
            delivery_target=target,
        )
        return {"job": job_payload(job), "notes": notes}

    table = {
        "jobs.list": list_,
        "jobs.show": show,
        "jobs.runs": runs,
        "jobs.run": run,
        "jobs.run_now": run_now,
        "jobs.pause": pause,
        "jobs.resume": resume,
        "jobs.remove": remove,
        "jobs.add": add,
    }
    return {name: wrap(fn) for name, fn in table.items()}
