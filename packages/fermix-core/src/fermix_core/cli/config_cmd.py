"""``fermix config``: show, read, change and check ``config.toml`` from the shell.

The runtime pieces (home, plugin host, registry, unavailable plugins, environment) come
from :func:`fermix_core.cli.context.load_for_cli`, so this command sees exactly the schema
the daemon would: the same plugins, the same disabled list, the same environment.
"""

from __future__ import annotations

import json
from typing import Any

import typer

from fermix_core.cli.app import APP_SETTINGS
from fermix_core.config.errors import ConfigError, ConfigProblem

app = typer.Typer(
    help="Show, read, change and validate config.toml.", no_args_is_help=True, **APP_SETTINGS
)

RESTART_NOTE = "a running daemon keeps its settings until `fermix restart`"


def _context() -> Any:
    from fermix_core.cli import context

    return context.load_for_cli(validate=False)


def _fail(header: str, problems: list[ConfigProblem], hint: str | None = None) -> None:
    typer.echo(header, err=True)
    for problem in problems:
        typer.echo(f"  {problem}", err=True)
    if hint:
        typer.echo(hint, err=True)
    raise typer.Exit(code=1)


def _warn(warnings: list[ConfigProblem]) -> None:
    for warning in warnings:
        typer.echo(f"warning: {warning}", err=True)


def _load(ctx: Any) -> Any:
    from fermix_core.config.loader import load_config

    try:
        return load_config(ctx.home, ctx.registry, unavailable=ctx.unavailable, environ=ctx.environ)
    except ConfigError as exc:
        _fail(
            f"{ctx.home.config_file} is invalid:",
            exc.problems,
            "fix these lines (or use `fermix config set/unset`), then run `fermix config validate`",
        )
        raise  # unreachable: _fail exits


def _drop_none(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _drop_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_drop_none(v) for v in value if v is not None]
    return value


def _as_text(value: Any) -> str:
    import tomlkit

    if isinstance(value, dict):
        return tomlkit.dumps(_drop_none(value)).rstrip("\n")
    if isinstance(value, str):
        return value
    return tomlkit.item(value).as_string()


@app.command()
def show(
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of TOML."),
    show_secrets: bool = typer.Option(
        False, "--show-secrets", help="Print plaintext secrets instead of ********."
    ),
) -> None:
    """Print the effective config: defaults, config.toml and the environment overlay."""
    from fermix_core.config.writer import render_config

    ctx = _context()
    loaded = _load(ctx)
    data = render_config(loaded, show_secrets=show_secrets)
    if as_json:
        typer.echo(json.dumps(data, indent=2))
    else:
        typer.echo("# effective configuration: built-in defaults < config.toml < environment")
        if loaded.env_applied:
            typer.echo("# from the environment: " + ", ".join(loaded.env_applied))
        typer.echo(_as_text(data))
    _warn(loaded.warnings)


@app.command()
def get(
    key: str = typer.Argument(..., help="Dotted key, e.g. fermix_core.agent.timezone"),
    as_json: bool = typer.Option(False, "--json", help="Print the value as JSON."),
) -> None:
    """Print one effective value (secrets masked)."""
    from fermix_core.config.writer import masked_value

    ctx = _context()
    loaded = _load(ctx)
    try:
        value = masked_value(loaded, key)
    except ConfigError as exc:
        _fail("cannot read that key:", exc.problems)
    if as_json:
        typer.echo(json.dumps(value))
    elif value is not None:
        typer.echo(_as_text(value))
    if value is None:
        # A known key with no value and no default: say so rather than print a blank line.
        if not as_json:
            typer.echo(f"{key} is not set; `fermix config set {key} VALUE` sets it", err=True)
        raise typer.Exit(1)


def _report_change(ctx: Any, change: Any) -> None:
    typer.echo(change.describe())
    if change.overridden_by:
        typer.echo(
            f"note: {change.overridden_by} in the environment overrides this key at run time"
        )
    for problem in change.remaining:
        typer.echo(f"still invalid: {problem}", err=True)
    if change.changed and ctx.home.daemon_sock.exists():
        typer.echo(RESTART_NOTE)


@app.command("set")
def set_(
    key: str = typer.Argument(..., help="Dotted key, e.g. fermix_core.compaction.threshold"),
    value: str = typer.Argument(..., help='A TOML literal (true, 3, ["a"], "x") or plain text.'),
) -> None:
    """Set one key in config.toml, keeping comments and formatting; refused if invalid."""
    from fermix_core.config.writer import set_value
    from fermix_core.secrets import SecretError

    ctx = _context()
    try:
        change = set_value(
            ctx.home, key, value, ctx.registry, unavailable=ctx.unavailable, environ=ctx.environ
        )
    except ConfigError as exc:
        _fail("config.toml was not changed:", exc.problems)
    except SecretError as exc:
        typer.echo(f"config.toml was not changed: {exc}", err=True)
        raise typer.Exit(1) from exc
    _report_change(ctx, change)
    for line in change.also:
        typer.echo(line)
    for slot in change.moved_to_keyring:
        typer.echo(f'{slot}: stored in the OS keyring; config.toml holds "@keyring"')
    for warning in change.secret_warnings:
        typer.echo(f"warning: {warning}", err=True)


@app.command()
def unset(key: str = typer.Argument(..., help="Dotted key or table to remove")) -> None:
    """Remove a key (or table) from config.toml so its default applies again."""
    from fermix_core.config.writer import unset_value

    ctx = _context()
    try:
        change = unset_value(
            ctx.home, key, ctx.registry, unavailable=ctx.unavailable, environ=ctx.environ
        )
    except ConfigError as exc:
        _fail("config.toml was not changed:", exc.problems)
    _report_change(ctx, change)


@app.command()
def validate(as_json: bool = typer.Option(False, "--json", help="Print a JSON report.")) -> None:
    """Check config.toml against every loaded plugin; exit 1 when it is invalid."""
    from fermix_core.config.loader import check_config

    ctx = _context()
    report = check_config(ctx.home, ctx.registry, unavailable=ctx.unavailable, environ=ctx.environ)
    if as_json:
        typer.echo(
            json.dumps(
                {
                    "path": str(report.path),
                    "valid": report.valid,
                    "problems": [p.as_dict() for p in report.problems],
                    "warnings": [w.as_dict() for w in report.warnings],
                },
                indent=2,
            )
        )
    else:
        for problem in report.problems:
            typer.echo(str(problem))
        for warning in report.warnings:
            typer.echo(f"warning: {warning}")
        if report.valid:
            typer.echo(f"{report.path}: valid")
    if not report.valid:
        raise typer.Exit(code=1)
