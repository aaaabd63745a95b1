"""``fermix capabilities``: the tools the agent has, and which a guest sees."""

from __future__ import annotations

import typer

from fermix_core.cli.app import APP_SETTINGS
from fermix_core.cli.output import print_json, table

app = typer.Typer(help="List the agent's tools and who can use them.", **APP_SETTINGS)


@app.command()
def capabilities(
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """List the agent's tools and who can use them."""
    from fermix_core.cli.capabilities import describe_capabilities
    from fermix_core.cli.context import load_for_cli

    report = describe_capabilities(load_for_cli().registry)
    if as_json:
        print_json(report)
        return
    rows = [
        (
            t["name"],
            t["policy"],
            "yes" if t["guest"] else "no",
            "inline" if t["inline"] else "deferred",
            t["description"].split(".")[0],
        )
        for t in report["tools"]
    ]
    typer.echo(table(("TOOL", "POLICY", "GUEST", "SCHEMA", "WHAT IT DOES"), rows))
