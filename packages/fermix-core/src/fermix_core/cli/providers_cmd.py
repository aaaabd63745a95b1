"""``fermix providers``: which providers are installed, configured, primary or fallback."""

from __future__ import annotations

import typer

from fermix_core import install_hint
from fermix_core.cli.app import APP_SETTINGS
from fermix_core.cli.output import print_json, table

app = typer.Typer(help="List model providers and how turns are routed.", **APP_SETTINGS)


@app.callback()
def providers() -> None:
    """List model providers and how turns are routed."""


def _overlay_line(purpose: str, overlay: dict | None) -> str | None:
    if overlay is None:
        return None
    if overlay.get("error"):
        return f"{purpose}: ERROR {overlay['error']}"
    effort = f", effort {overlay['reasoning_effort']}" if overlay.get("reasoning_effort") else ""
    return f"{purpose}: {overlay['provider']} ({overlay['model']}{effort})"


@app.command("list")
def list_providers(
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object for scripts."),
) -> None:
    """Show every provider: status (Primary / Fallback / Not configured), model, effort,
    auth mode and where its key comes from (never the key itself)."""
    from fermix_core.cli.context import load_for_cli
    from fermix_core.routing.report import providers_report

    context = load_for_cli(validate=True)
    if context.config is None:
        typer.echo(f"error: config.toml is invalid:\n{context.config_error}", err=True)
        typer.echo("fix it (`fermix config validate` shows every problem) and retry", err=True)
        raise typer.Exit(1)
    report = providers_report(context.config, context.registry, context.environ, host=context.host)
    if as_json:
        print_json(report)
        return
    rows = [
        (
            p["name"],
            p["status"],
            p["model"] or "-",
            p["reasoning_effort"] or "-",
            p["auth_mode"],
            p["key_source"],
            "; ".join([*([p["problem"]] if p["problem"] else []), *p["notes"]]),
        )
        for p in report["providers"]
    ]
    if not rows:
        typer.echo(f"no provider plugins are installed; {install_hint('providers')}")
    else:
        typer.echo(table(("NAME", "STATUS", "MODEL", "EFFORT", "AUTH", "KEY", "NOTE"), rows))
    for purpose, overlay in report["routing"].items():
        line = _overlay_line("sub-agents" if purpose == "subagent" else "scheduled jobs", overlay)
        if line:
            typer.echo(line)
    if report["problem"]:
        typer.echo(f"\n{report['problem']}", err=True)
