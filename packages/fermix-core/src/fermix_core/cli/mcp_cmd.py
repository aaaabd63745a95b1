"""``fermix mcp``: the running daemon's MCP servers (``mcp.*`` on the control socket).

Servers only run inside the daemon, so every subcommand asks it; without one the command
says how to start it. ``--json`` prints one object for scripts.
"""

from __future__ import annotations

from typing import Any

import typer

from fermix_core.cli.app import APP_SETTINGS
from fermix_core.cli.output import print_json, table

app = typer.Typer(
    help="List the MCP servers, their tools, and restart one (through the daemon).",
    no_args_is_help=True,
    **APP_SETTINGS,
)

JSON = typer.Option(False, "--json", help="Print one JSON object.")
NO_DAEMON = (
    "the daemon is not running, and MCP servers run only inside it; start it with "
    "`fermix start` (servers are configured under [mcp.servers.<name>], see docs/mcp.md)"
)


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
        _fail(NO_DAEMON, as_json, code=3)
    except RemoteError as exc:
        _fail(exc.message, as_json)
    raise AssertionError("unreachable")


def _fail(message: str, as_json: bool, code: int = 1) -> None:
    if as_json:
        print_json({"error": message})
    else:
        typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


@app.command("list")
def list_(as_json: bool = JSON) -> None:
    """Every configured server: transport, state, tool count, last error."""
    answer = _call("mcp.list", {}, as_json)
    if as_json:
        print_json(answer)
        return
    rows = [
        [s["name"], s["transport"], s["state"], str(len(s["tools"])), s["error"] or ""]
        for s in answer["servers"]
    ]
    if not rows:
        typer.echo("no MCP servers are configured (see docs/mcp.md)")
        return
    typer.echo(table(["NAME", "TRANSPORT", "STATE", "TOOLS", "ERROR"], rows))


@app.command("tools")
def tools(name: str = typer.Argument(..., help="The server's name."), as_json: bool = JSON) -> None:
    """The tools one server registered (and any refused by a name clash)."""
    answer = _call("mcp.tools", {"name": name}, as_json)
    if as_json:
        print_json(answer)
        return
    rows = [
        [t["name"], t["remote"], t["description"].splitlines()[0][:60]] for t in answer["tools"]
    ]
    typer.echo(table(["TOOL", "ON THE SERVER", "DESCRIPTION"], rows) if rows else "no tools")
    for line in answer["refused"]:
        typer.echo(f"refused: {line}", err=True)


@app.command("restart")
def restart(
    name: str = typer.Argument(..., help="The server's name."), as_json: bool = JSON
) -> None:
    """Drop one server's connection and connect again now."""
    answer = _call("mcp.restart", {"name": name}, as_json)
    if as_json:
        print_json(answer)
        return
    typer.echo(f"restarting MCP server {answer['name']}")
