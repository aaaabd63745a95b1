"""``fermix setup``: run the registered setup steps, or migrate plaintext secrets."""

from __future__ import annotations

import sys

import typer

from fermix_core.cli.app import APP_SETTINGS

app = typer.Typer(
    help="Configure Fermix step by step (or non-interactively with flags).", **APP_SETTINGS
)


@app.command(
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
    epilog=(
        "Steps contributed by plugins add their own --flags; "
        "unknown flags are reported with the valid ones."
    ),
)
def setup(
    ctx: typer.Context,
    non_interactive: bool = typer.Option(
        False, "--non-interactive", help="Never prompt; take every value from flags or defaults."
    ),
    migrate_secrets: bool = typer.Option(
        False,
        "--migrate-secrets",
        help="Move plaintext secrets in config.toml into the OS keyring.",
    ),
    step: list[str] = typer.Option(
        [], "--step", help="Run only this step (repeatable), e.g. --step provider."
    ),
    reconfigure: bool = typer.Option(
        False,
        "--reconfigure",
        help="Ask again for what is already set up (channels, their ids and credentials).",
    ),
) -> None:
    """Configure Fermix step by step (or non-interactively with flags)."""
    from fermix_core.cli.context import load_for_cli
    from fermix_core.setup import SetupError, SetupStoreError, parse_step_args, run_setup

    context = load_for_cli()
    if migrate_secrets:
        from fermix_core.secrets import SecretStoreError
        from fermix_core.secrets import migrate_secrets as migrate

        try:
            report = migrate(context.assembly)
        except SecretStoreError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(1) from exc
        for path in report.moved:
            typer.echo(f"moved {path} to the keyring")
        for warning in report.warnings:
            typer.echo(f"warning: {warning}", err=True)
        if not report.moved:
            typer.echo("no plaintext secrets to migrate")
        return

    interactive = not non_interactive and sys.stdin.isatty()
    try:
        options = parse_step_args(context.assembly, ctx.args)
        if reconfigure:
            options["--reconfigure"] = True
        result = run_setup(
            context.assembly, interactive=interactive, options=options, only=step or None
        )
    except SetupStoreError as exc:
        typer.echo(f"error: {exc}", err=True)
        _answers_kept(context, interactive)
        raise typer.Exit(1) from exc
    except SetupError as exc:
        typer.echo(f"error: {exc}", err=True)
        _answers_kept(context, interactive)
        raise typer.Exit(2) from exc
    for note in result.notes:
        typer.echo(note)
    for path in result.moved_secrets:
        typer.echo(f"stored {path} in the keyring")
    typer.echo("config.toml written" if result.written else "nothing changed")
    if result.written and context.home.daemon_sock.exists():
        typer.echo("a running daemon keeps its settings until `fermix restart`")


def _answers_kept(context: object, interactive: bool) -> None:
    from fermix_core import setup_answers

    home = context.home  # type: ignore[attr-defined]
    if interactive and setup_answers.kept(home):
        typer.echo(
            f"your answers (not the secrets) are kept in {home.path / setup_answers.FILE_NAME} "
            "and offered again by the next `fermix setup`",
            err=True,
        )
