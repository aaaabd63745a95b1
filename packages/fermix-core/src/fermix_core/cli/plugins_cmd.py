"""``fermix plugins``: what is installed, what loaded, what each plugin implements."""

from __future__ import annotations

import typer

from fermix_core.cli.app import APP_SETTINGS
from fermix_core.cli.output import print_json, table

app = typer.Typer(help="List installed plugins and what they register.", **APP_SETTINGS)


@app.callback()
def plugins() -> None:
    """List installed plugins and what they register."""


def plugins_report(context) -> dict:
    registry = context.registry
    registry.check_tool_schemas()
    return {
        "plugins": [record.as_dict() for record in context.host.records],
        "errors": [
            {"kind": e.kind, "name": e.name, "message": e.message, "sources": list(e.sources)}
            for e in registry.errors
        ],
    }


@app.command("list")
def list_plugins(
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object for scripts."),
) -> None:
    """Show every plugin: name, distribution, version, hooks, status and error."""
    from fermix_core.cli.context import load_for_cli

    context = load_for_cli()
    report = plugins_report(context)
    if as_json:
        print_json(report)
    else:
        rows = [
            (
                p["name"],
                p["distribution"] or "(in-process)",
                p["version"] or "",
                ", ".join(h.removeprefix("fermix_") for h in p["hooks"]) or "-",
                p["status"],
                p["error"] or (f"warning: {p['warning']}" if p.get("warning") else ""),
            )
            for p in report["plugins"]
        ]
        typer.echo(table(("NAME", "DISTRIBUTION", "VERSION", "HOOKS", "STATUS", "ERROR"), rows))
        for error in report["errors"]:
            typer.echo(
                f"error: {error['kind']} {error['name']!r}: {error['message']} "
                f"(from {', '.join(error['sources'])})",
                err=True,
            )
    failed = [p for p in report["plugins"] if p["status"] in ("failed", "conflict")]
    if failed or report["errors"]:
        raise typer.Exit(1)
