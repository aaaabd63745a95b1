"""``fermix memory``: background review, restoring forgotten facts, and searching memory.

These commands open ``memory.db`` directly (their own connection; WAL lets them run beside
a daemon) rather than going through the control socket, so they work whether or not the
daemon is up. ``review --now`` makes the same single provider call the daemon's background
review makes, on the configured route chain; the review lock keeps it from overlapping a
review the daemon started.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from datetime import UTC, datetime
from typing import Any, TypeVar

import typer

from fermix_core.cli.app import APP_SETTINGS
from fermix_core.cli.output import print_json, table

T = TypeVar("T")

app = typer.Typer(
    help="Review, restore and search long-term memory.", no_args_is_help=True, **APP_SETTINGS
)


def _when(ts: float | None) -> str:
    if ts is None:
        return "never"
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def _fail(message: str, code: int = 1) -> typer.Exit:
    typer.echo(message, err=True)
    return typer.Exit(code)


def _context() -> Any:
    from fermix_core.cli.context import load_for_cli

    context = load_for_cli(validate=True)
    if context.config_error is not None:
        raise _fail(f"config.toml is not valid — fix it, then retry:\n{context.config_error}")
    return context


def _no_database(context: Any) -> bool:
    """Whether the default backend's file is missing (reading must not create FERMIX_HOME)."""
    backend = context.config.core.fermix_core.memory.backend
    return backend == "sqlite" and not context.home.memory_db.exists()


def _run(context: Any, work: Callable[[Any, AsyncExitStack], Awaitable[T]]) -> T:
    import anyio

    from fermix_core.memory.backend import MemoryUnavailableError
    from fermix_core.memory.plugin import MemoryBackendUnavailable, open_backend

    async def main() -> T:
        async with AsyncExitStack() as stack:
            backend = await open_backend(context.home, context.config, context.registry)
            stack.push_async_callback(backend.aclose)
            return await work(backend, stack)

    try:
        return anyio.run(main)
    except (MemoryUnavailableError, MemoryBackendUnavailable) as exc:
        raise _fail(f"memory is not available: {exc}") from exc


async def _open_caller(context: Any, stack: AsyncExitStack) -> tuple[Any, str]:
    """The configured route chain as a model caller, or ``(None, why)`` without a provider."""
    from fermix_core.authfile import AuthStore
    from fermix_core.httpclient import runtime_client
    from fermix_core.routing import RoutingCaller, build_chain, resolve_routes_async

    auth_store = AuthStore(context.home.auth_file)
    plan = await resolve_routes_async(
        context.config,
        context.registry,
        context.environ,
        host=context.host,
        auth_store=auth_store,
    )
    if plan.primary is None:
        return None, str(plan.reason or "no provider is configured")
    http = runtime_client()
    stack.push_async_callback(http.aclose)
    chain = build_chain(
        plan, context.registry, emit=context.host.emit, http=http, auth_store=auth_store
    )
    stack.push_async_callback(chain.aclose)
    return RoutingCaller(chain), ""


def _describe_outcome(outcome: Any) -> str:
    applied = ", ".join(f"{n} {action}" for action, n in sorted(outcome.applied.items()))
    parts = [f"Review done: {outcome.messages} new owner message(s) read"]
    parts.append(f"changes: {applied}" if applied else "no fact changed")
    if outcome.rejected:
        parts.append(f"{len(outcome.rejected)} proposed change(s) refused")
    written = ", ".join(outcome.profiles_written) or "profiles already current"
    parts.append(f"rewrote {written}" if outcome.profiles_written else written)
    line = "; ".join(parts) + "."
    if outcome.flags:
        line += f"\nWarning: {len(outcome.flags)} item(s) carried prompt-injection markers."
    return line


@app.command()
def review(
    now: bool = typer.Option(False, "--now", help="Review immediately, ignoring the 24 h gate."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """Show when background review runs, or run it now (--now)."""
    from fermix_core.memory.review import MemoryReviewer, review_status

    context = _context()
    if not now:
        report = review_status(context.home, context.config)
        if as_json:
            print_json(report)
            return
        due = report["next_due"]
        lines = [
            f"Background review: {'on' if report['enabled'] else 'off'}, every "
            f"{report['interval_hours']:g} h after a reply",
            f"Last run: {_when(report['last_run'])}; last success: {_when(report['last_success'])}",
            f"Next due: {_when(due) if due else 'now (after the next reply)'}",
        ]
        if report["failures"]:
            lines.append(
                f"Failures in a row: {report['failures']}; backing off until "
                f"{_when(report['backoff_until'])}; last error: {report['last_error']}"
            )
        lines.append("Run `fermix memory review --now` to review immediately.")
        typer.echo("\n".join(lines))
        return

    async def work(backend: Any, stack: AsyncExitStack) -> Any:
        caller, why = await _open_caller(context, stack)
        if caller is None:
            raise _fail(f"cannot review: {why}. Run `fermix setup` to configure a provider.")
        reviewer = MemoryReviewer.from_config(
            backend, caller, context.home, context.config, emit=context.host.emit
        )
        return await reviewer.review_now()

    outcome = _run(context, work)
    if as_json:
        print_json(outcome.as_dict())
    elif outcome.status == "done":
        typer.echo(_describe_outcome(outcome))
    else:
        typer.echo(f"Review {outcome.status}: {outcome.error or outcome.reason}", err=True)
    if outcome.status != "done":
        raise typer.Exit(1)


@app.command()
def restore(
    memory_id: str = typer.Argument(..., metavar="ID", help="Id of the forgotten memory."),
) -> None:
    """Bring back a forgotten (archived) memory."""
    from fermix_core.memory.backend import MemoryStoreError

    context = _context()
    if _no_database(context):
        raise _fail(f"no memory yet: {context.home.memory_db} does not exist")

    async def work(backend: Any, stack: AsyncExitStack) -> tuple[bool, Any]:
        restored = await backend.restore(memory_id)
        return restored, await backend.get(memory_id)

    try:
        restored, fact = _run(context, work)
    except MemoryStoreError as exc:
        raise _fail(f"cannot restore: {exc}") from exc
    if fact is None:
        raise _fail(f"no memory with id {memory_id!r}; find ids with `fermix memory search`")
    if not restored:
        raise _fail(f"memory {memory_id} is not forgotten; nothing to restore")
    typer.echo(f"Restored memory {memory_id} [{fact.category.value}]: {fact.content}")


@app.command()
def search(
    query: str = typer.Argument(..., help="Words to search for (prefixes match)."),
    source: str = typer.Option(
        "memories", "--source", help="memories, history (past messages) or all."
    ),
    limit: int = typer.Option(10, "--limit", "-n", min=1, max=200, help="Results per source."),
    archived: bool = typer.Option(False, "--archived", help="Include forgotten memories."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """Search saved facts (and, with --source, conversation history)."""
    if source not in ("memories", "history", "all"):
        raise _fail(f"--source must be memories, history or all (got {source!r})", 2)
    context = _context()
    if _no_database(context):
        if as_json:
            print_json({"facts": [], "history": []})
        else:
            typer.echo("No memory yet.")
        return

    async def work(backend: Any, stack: AsyncExitStack) -> tuple[list[Any], list[Any]]:
        facts = history = []
        if source in ("memories", "all"):
            facts = await backend.search(query, limit=limit, include_archived=archived)
        if source in ("history", "all"):
            await backend.catch_up_history()  # a search alone leaves a large backlog
            history = await backend.search_history(query, limit=limit)
        return facts, history

    facts, history = _run(context, work)
    if as_json:
        print_json(
            {
                "facts": [f.model_dump(mode="json") for f in facts],
                "history": [m.model_dump(mode="json") for m in history],
            }
        )
        return
    if not facts and not history:
        typer.echo(f"Nothing matches {query!r}.")
        return
    if facts:
        rows = [
            (
                f.id + (" (forgotten)" if f.archived else ""),
                f.category.value,
                f.key or "",
                f.provenance.speaker
                if f.provenance.job_id is None
                else f"job {f.provenance.job_id}",
                f.updated_at.date().isoformat(),
                " ".join(f.content.split()),
            )
            for f in facts
        ]
        typer.echo(table(("ID", "CATEGORY", "KEY", "FROM", "UPDATED", "FACT"), rows))
    if history:
        if facts:
            typer.echo("")
        rows = [
            (
                str(m.id),
                ":".join(x for x in m.conversation_key if x),
                f"{m.speaker}/{m.role}",
                m.created_at.date().isoformat(),
                " ".join(m.text.split())[:200],
            )
            for m in history
        ]
        typer.echo(table(("MESSAGE", "CONVERSATION", "WHO", "DATE", "TEXT"), rows))
