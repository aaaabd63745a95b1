"""``fermix jobs``: list, inspect, add and control scheduled jobs through the running daemon.

Every subcommand is a ``jobs.*`` call on the control socket, so the daemon's scheduler hears
about a change at once. Without a daemon the command says so and exits 3 (run
``fermix start``). ``--json`` prints the daemon's answer as one object for scripts.
"""

from __future__ import annotations

import json
from typing import Any

import typer

from fermix_core.cli.app import APP_SETTINGS
from fermix_core.cli.output import print_json, table

NOT_RUNNING = 3
NO_DAEMON = (
    "no daemon is running, so scheduled jobs cannot be reached — start it with `fermix start` "
    "(jobs only run while the daemon runs)"
)

app = typer.Typer(
    help="List, inspect, add and control scheduled jobs.",
    no_args_is_help=True,
    **APP_SETTINGS,
)

JSON = typer.Option(False, "--json", help="Print one JSON object.")


def _call(method: str, params: dict[str, Any], as_json: bool) -> dict[str, Any]:
    import anyio

    from fermix_core.daemon.client import DaemonClient, DaemonUnavailable, RemoteError
    from fermix_core.home import FermixHome

    home = FermixHome.resolve()

    async def call() -> dict[str, Any]:
        async with DaemonClient(home.daemon_sock) as client:
            return await client.call(method, params)

    try:
        return anyio.run(call)
    except DaemonUnavailable:
        if as_json:
            print_json({"running": False, "error": NO_DAEMON})
        else:
            typer.echo(NO_DAEMON, err=True)
        raise typer.Exit(NOT_RUNNING) from None
    except RemoteError as exc:
        if as_json:
            print_json({"error": exc.message, "code": exc.code})
        else:
            typer.echo(f"error: {exc.message}", err=True)
        raise typer.Exit(1) from None


def _job_rows(jobs: list[dict[str, Any]]) -> str:
    rows = [
        [
            j["id"],
            j["status"],
            j["schedule"],
            j["next_run_at"] or "-",
            j["last_status"] or "-",
            j["description"] or j["task_prompt"][:50],
        ]
        for j in jobs
    ]
    return table(["ID", "STATUS", "SCHEDULE", "NEXT RUN", "LAST", "WHAT"], rows)


def _run_rows(runs: list[dict[str, Any]]) -> str:
    rows = [
        [
            r["id"],
            r["status"],
            r["trigger"],
            r["started_at"] or r["queued_at"],
            r["delivery_status"],
            r.get("error") or r.get("response_preview") or "",
        ]
        for r in runs
    ]
    return table(["RUN", "STATUS", "TRIGGER", "STARTED", "DELIVERY", "OUTCOME"], rows)


def _show_job(job: dict[str, Any]) -> None:
    for key in (
        "id",
        "status",
        "description",
        "schedule",
        "timezone",
        "next_run_at",
        "expires_at",
        "delivery_mode",
        "delivery_target",
        "provider",
        "model",
        "skill_name",
        "allowed_tools",
        "trust",
        "timeout_seconds",
        "inactivity_timeout_seconds",
        "last_run_at",
        "last_status",
        "last_error",
    ):
        value = job.get(key)
        if value in (None, "", []):
            continue
        typer.echo(f"{key}: {json.dumps(value) if isinstance(value, dict | list) else value}")
    typer.echo(f"task_prompt:\n  {job['task_prompt']}")


@app.command("list")
def list_jobs(
    status: str | None = typer.Option(None, "--status", help="Only jobs in this state."),
    as_json: bool = JSON,
) -> None:
    """List scheduled jobs."""
    answer = _call("jobs.list", {"status": status} if status else {}, as_json)
    if as_json:
        print_json(answer)
    elif answer["jobs"]:
        typer.echo(_job_rows(answer["jobs"]))
    else:
        typer.echo("no scheduled jobs (add one with `fermix jobs add` or ask the agent)")


@app.command("show")
def show(
    job_id: str | None = typer.Argument(None, help="The job id."),
    run: int | None = typer.Option(None, "--run", help="Show this run in full instead."),
    as_json: bool = JSON,
) -> None:
    """Show one job (its instructions and recent runs), or one run in full with --run."""
    if run is not None:
        answer = _call("jobs.run", {"run_id": run}, as_json)
        if as_json:
            print_json(answer)
            return
        data = answer["run"]
        for key in (
            "id",
            "job_id",
            "status",
            "trigger",
            "queued_at",
            "started_at",
            "finished_at",
            "model",
            "provider",
            "attempts",
            "usage",
            "error",
            "delivery_status",
            "delivery_error",
        ):
            if data.get(key) not in (None, "", {}):
                typer.echo(f"{key}: {data[key]}")
        typer.echo(f"task_prompt:\n  {data.get('task_prompt')}")
        typer.echo(f"final_response:\n{data.get('final_response') or '(none)'}")
        return
    if job_id is None:
        typer.echo("give a job id (fermix jobs list shows them) or --run RUN_ID", err=True)
        raise typer.Exit(2)
    answer = _call("jobs.show", {"job_id": job_id}, as_json)
    if as_json:
        print_json(answer)
        return
    _show_job(answer["job"])
    if answer["recent_runs"]:
        typer.echo("recent runs:")
        typer.echo(_run_rows(answer["recent_runs"]))


@app.command("runs")
def runs(
    job_id: str = typer.Argument(..., help="The job id."),
    status: str | None = typer.Option(None, "--status", help="Only runs in this state."),
    limit: int = typer.Option(20, "--limit", "-n", help="How many, newest first."),
    as_json: bool = JSON,
) -> None:
    """A job's run history, newest first."""
    params: dict[str, Any] = {"job_id": job_id, "limit": limit}
    if status:
        params["status"] = status
    answer = _call("jobs.runs", params, as_json)
    if as_json:
        print_json(answer)
    elif answer["runs"]:
        typer.echo(_run_rows(answer["runs"]))
    else:
        typer.echo(f"job {job_id} has no runs yet")


def _simple(method: str, job_id: str, as_json: bool, done: str) -> None:
    answer = _call(method, {"job_id": job_id}, as_json)
    if as_json:
        print_json(answer)
    else:
        typer.echo(done.format(**answer.get("job", {}), **answer.get("run", {}), job=job_id))


@app.command("run-now")
def run_now(
    job_id: str = typer.Argument(..., help="The job id."),
    wait: bool = typer.Option(False, "--wait", help="Wait for the run and print its result."),
    as_json: bool = JSON,
) -> None:
    """Fire a job once now (trigger manual); its schedule is unchanged."""
    if not wait:
        _simple(
            "jobs.run_now",
            job_id,
            as_json,
            "started run {id} of job {job} (see `fermix jobs show --run {id}`)",
        )
        return
    answer = _call("jobs.run_now", {"job_id": job_id, "wait": True}, as_json)
    if as_json:
        print_json(answer)
        return
    run = answer["run"]
    typer.echo(f"run {run['id']} of job {job_id}: {run['status']}")
    typer.echo(run.get("final_response") or run.get("error") or "")


@app.command("pause")
def pause(job_id: str = typer.Argument(..., help="The job id."), as_json: bool = JSON) -> None:
    """Pause a job until `fermix jobs resume`."""
    _simple("jobs.pause", job_id, as_json, "paused job {job}")


@app.command("resume")
def resume(job_id: str = typer.Argument(..., help="The job id."), as_json: bool = JSON) -> None:
    """Resume a paused or fixed disabled job."""
    _simple("jobs.resume", job_id, as_json, "resumed job {job}; next run {next_run_at}")


@app.command("remove")
def remove(job_id: str = typer.Argument(..., help="The job id."), as_json: bool = JSON) -> None:
    """Delete a job and its run history."""
    answer = _call("jobs.remove", {"job_id": job_id}, as_json)
    if as_json:
        print_json(answer)
        return
    note = " (its run in progress was cancelled)" if answer.get("cancelled_run") else ""
    typer.echo(f"removed job {job_id}{note}")


@app.command("add")
def add(
    schedule: str = typer.Option(
        ...,
        "--schedule",
        "-s",
        help="'every 30 minutes', an ISO datetime (once), or cron like '0 8 * * *'.",
    ),
    prompt: str = typer.Option(..., "--prompt", "-p", help="What each run should do."),
    timezone: str | None = typer.Option(None, "--timezone", "--tz", help="IANA zone."),
    description: str | None = typer.Option(None, "--description", "-d", help="A short label."),
    delivery: str | None = typer.Option(
        None, "--delivery", help="none | local (default) | channel."
    ),
    channel: str | None = typer.Option(None, "--channel", help="With --delivery channel."),
    chat_id: str | None = typer.Option(None, "--chat-id", help="With --delivery channel."),
    thread_id: str | None = typer.Option(None, "--thread-id", help="Optional thread."),
    as_json: bool = JSON,
) -> None:
    """Schedule a job without chatting."""
    params: dict[str, Any] = {"schedule": schedule, "prompt": prompt}
    for key, value in (
        ("timezone", timezone),
        ("description", description),
        ("delivery_mode", delivery),
    ):
        if value is not None:
            params[key] = value
    if channel or chat_id or thread_id:
        params["delivery_target"] = {"channel": channel, "chat_id": chat_id, "thread_id": thread_id}
    answer = _call("jobs.add", params, as_json)
    if as_json:
        print_json(answer)
        return
    job = answer["job"]
    typer.echo(
        f"scheduled job {job['id']}: {job['schedule']} ({job['timezone']}), next run "
        f"{job['next_run_at'] or 'none'}, delivery {job['delivery_mode']}"
    )
    for note in answer.get("notes") or []:
        typer.echo(f"note: {note}")
