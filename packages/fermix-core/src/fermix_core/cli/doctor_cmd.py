"""``fermix doctor``: readable rows for people, ``--json`` for scripts; exit 1 on any failure."""

from __future__ import annotations

import typer

from fermix_core.cli.app import APP_SETTINGS
from fermix_core.cli.output import print_json

app = typer.Typer(
    help="Check configuration, plugins, permissions, keyring and secrets.", **APP_SETTINGS
)

_MARK = {"ok": "ok  ", "warn": "WARN", "fail": "FAIL", "skip": "skip"}


@app.command()
def doctor(
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object for scripts."),
) -> None:
    """Check configuration, plugins, permissions, keyring and secrets."""
    from fermix_core.cli.context import load_for_cli
    from fermix_core.doctor import DoctorContext, run_checks, summary

    context = load_for_cli(validate=True)
    doctor_context = DoctorContext(context.assembly, context.config, context.config_error)
    results = run_checks(doctor_context)
    counts = summary(results)
    if as_json:
        print_json({"checks": [r.as_dict() for r in results], "summary": counts})
    else:
        width = max((len(r.label) for r in results), default=0)
        for result in results:
            first, *rest = (result.detail or "").splitlines() or [""]
            typer.echo(f"[{_MARK[str(result.status)]}] {result.label.ljust(width)}  {first}")
            for line in rest:
                typer.echo(f"       {' ' * width}  {line}")
            if result.fix and str(result.status) in ("warn", "fail"):
                typer.echo(f"       {' ' * width}  → {result.fix}")
        typer.echo(f"\n{counts['ok']} ok, {counts['warn']} warning(s), {counts['fail']} failure(s)")
    if counts["fail"]:
        raise typer.Exit(1)
