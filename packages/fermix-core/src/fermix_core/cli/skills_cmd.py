"""``fermix skills``: list, view and reload skills.

Through the running daemon when there is one (``skills.*`` on the control socket, so
``reload`` refreshes the live agent in place); otherwise the skill roots are scanned in this
process, which shows exactly what the next daemon start will load. ``--json`` prints one
object for scripts.
"""

from __future__ import annotations

from typing import Any

import typer

from fermix_core.cli.app import APP_SETTINGS
from fermix_core.cli.output import print_json, table

app = typer.Typer(
    help="List, view and reload skills (SKILL.md packages).",
    no_args_is_help=True,
    **APP_SETTINGS,
)

JSON = typer.Option(False, "--json", help="Print one JSON object.")


def _local() -> Any:
    from fermix_core.cli.context import load_for_cli
    from fermix_core.skills import SkillRegistry, default_roots
    from fermix_core.specs import ToolSpec

    context = load_for_cli()
    registry = context.assembly.registry
    return SkillRegistry(
        default_roots(context.assembly.home, registry), reserved=set(registry.typed(ToolSpec))
    ).load()


def _call(method: str, params: dict[str, Any], as_json: bool) -> tuple[dict[str, Any], bool]:
    """(answer, from_daemon); a refused call exits 1 with the daemon's message."""
    import anyio

    from fermix_core.daemon.client import DaemonClient, DaemonUnavailable, RemoteError
    from fermix_core.home import FermixHome

    home = FermixHome.resolve()

    async def call() -> dict[str, Any]:
        async with DaemonClient(home.daemon_sock) as client:
            return await client.call(method, params)

    try:
        return anyio.run(call), True
    except DaemonUnavailable:
        pass
    except RemoteError as exc:
        _fail(exc.message, as_json)
    from fermix_core.skills import SkillError
    from fermix_core.skills.control import view_payload

    skills = _local()
    try:
        if method == "skills.view":
            return view_payload(skills, params["name"], params.get("file")), False
    except SkillError as exc:
        _fail(str(exc), as_json)
    if method == "skills.reload":
        return skills.reload(), False
    return skills.listing(), False


def _fail(message: str, as_json: bool) -> None:
    if as_json:
        print_json({"error": message})
    else:
        typer.echo(f"error: {message}", err=True)
    raise typer.Exit(1)


@app.command("list")
def list_(as_json: bool = JSON) -> None:
    """List the loaded skills and any that failed to load."""
    answer, _live = _call("skills.list", {}, as_json)
    if as_json:
        print_json(answer)
        return
    rows = [[s["name"], s["source"], s["trust"], s["description"][:60]] for s in answer["skills"]]
    typer.echo(table(["NAME", "SOURCE", "TRUST", "DESCRIPTION"], rows) if rows else "no skills")
    for problem in answer["errors"]:
        typer.echo(f"skipped: {problem}", err=True)


@app.command("view")
def view(
    name: str = typer.Argument(..., help="The skill's name."),
    file: str | None = typer.Option(None, "--file", help="A reference file instead of the body."),
    as_json: bool = JSON,
) -> None:
    """Print a skill's instructions (or one reference file)."""
    answer, _live = _call("skills.view", {"name": name, "file": file}, as_json)
    if as_json:
        print_json(answer)
        return
    if file:
        typer.echo(answer["text"])
        return
    typer.echo(f"{answer['name']} — {answer['description']}\n({answer['path']})\n")
    typer.echo(answer["body"])
    if answer["references"]:
        typer.echo("reference files: " + ", ".join(answer["references"]))


@app.command("reload")
def reload(as_json: bool = JSON) -> None:
    """Re-scan the skill directories (the running daemon refreshes in place)."""
    answer, live = _call("skills.reload", {}, as_json)
    answer["daemon"] = live
    if as_json:
        print_json(answer)
        return
    where = "the running daemon" if live else "no daemon is running; the next start"
    typer.echo(f"reloaded ({where} loads {len(answer['skills'])} skills)")
    for key in ("added", "removed", "changed"):
        if answer[key]:
            typer.echo(f"{key}: {', '.join(answer[key])}")
    for problem in answer["errors"]:
        typer.echo(f"skipped: {problem}", err=True)
