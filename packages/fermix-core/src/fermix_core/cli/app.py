"""The typer app behind ``fermix``: built-in groups load lazily, plugin commands on demand."""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence
from typing import Any

import typer
from typer.core import TyperGroup

from fermix_core import __version__
from fermix_core.cli.commands import (
    BY_NAME,
    COMMANDS,
    PROG,
    SUMMARY,
    installed_plugin_commands,
)
from fermix_core.cli.logsetup import configure_logging
from fermix_core.specs import resolve_ref

log = logging.getLogger("fermix.cli")

__all__ = ["APP_SETTINGS", "app", "configure_logging", "run"]


class HelpfulGroup(TyperGroup):
    """Every command group: bare ``fermix GROUP`` shows its help, and a mistyped
    subcommand is answered with the closest real one."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if not self.invoke_without_command:
            self.no_args_is_help = True

    def command_names(self, ctx: Any) -> list[str]:
        return list(self.list_commands(ctx))

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        """The command list with each one's whole first sentence, wrapped rather than cut
        off with "..." at the terminal width."""
        rows = []
        for name in self.list_commands(ctx):
            command = self.get_command(ctx, name)
            if command is not None and not command.hidden:
                rows.append((name, command.get_short_help_str(limit=1_000)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        name = args[0] if args else ""
        if name and not name.startswith("-") and self.get_command(ctx, name) is None:
            from fermix_core.config.messages import did_you_mean

            guess = did_you_mean(name, self.command_names(ctx))
            hint = f" (did you mean '{guess}'?)" if guess else ""
            ctx.fail(f"No such command '{name}'{hint}; `{ctx.command_path} --help` lists them.")
        return super().resolve_command(ctx, args)


APP_SETTINGS: dict[str, Any] = {
    "cls": HelpfulGroup,
    "add_completion": False,
    # Rich rendering costs an import on every help screen and its tracebacks would bypass
    # the redacting crash reporter, so both stay off.
    "rich_markup_mode": None,
    "pretty_exceptions_enable": False,
    "context_settings": {"help_option_names": ["-h", "--help"]},
}


def command_from_app(app: typer.Typer, name: str) -> Any:
    command = typer.main.get_command(app)
    command.name = name
    return command


class LazyRootGroup(HelpfulGroup):
    """Resolves built-in commands from the table and plugin commands from ``fermix_cli``."""

    _plugin_group: Any = None

    def list_commands(self, ctx: Any) -> list[str]:
        return [entry.name for entry in (*COMMANDS, *installed_plugin_commands())]

    def command_names(self, ctx: Any) -> list[str]:
        group = self._plugins()
        names = [*self.list_commands(ctx), *(group.list_commands(ctx) if group else [])]
        return list(dict.fromkeys(names))

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        entry = BY_NAME.get(cmd_name)
        if entry is not None:
            return command_from_app(resolve_ref(entry.target), entry.name)
        group = self._plugins()
        return group.get_command(ctx, cmd_name) if group is not None else None

    def _plugins(self) -> Any:
        """Assemble the commands plugins add; only reached for a name that is not built in."""
        if LazyRootGroup._plugin_group is None:
            from fermix_core.cli.context import load_for_cli

            context = load_for_cli()
            scratch = typer.Typer(**APP_SETTINGS)

            @scratch.callback()
            def _plugins_root() -> None:  # pragma: no cover - typer needs a group callback
                """Plugin commands."""

            context.host.extend_cli(scratch)
            LazyRootGroup._plugin_group = typer.main.get_group(scratch)
        return LazyRootGroup._plugin_group


def _version(value: bool) -> None:
    if value:
        typer.echo(f"{PROG} {__version__}")
        raise typer.Exit()


app = typer.Typer(help=SUMMARY, **{**APP_SETTINGS, "cls": LazyRootGroup})


@app.callback()
def root(
    version: bool = typer.Option(
        False,
        "--version",
        "-V",
        help="Show the version and exit.",
        callback=_version,
        is_eager=True,
    ),
) -> None:
    """Fermix — a personal AI agent daemon."""


def run(args: Sequence[str]) -> int:
    """Run the CLI with *args*; returns the exit code instead of exiting (tests call this)."""
    configure_logging(args[0] if args else None)
    command = typer.main.get_command(app)
    try:
        result = command.main(args=list(args), prog_name=PROG, standalone_mode=False)
    except typer.Exit as exc:
        return exc.exit_code
    except typer.Abort:
        sys.stderr.write("Aborted.\n")
        return 1
    except Exception as exc:  # click's usage errors carry their own exit code and message
        show = getattr(exc, "show", None)
        code = getattr(exc, "exit_code", None)
        if callable(show) and isinstance(code, int):
            show()
            return code
        from fermix_core.cli.errors import user_error

        message = user_error(exc)
        if message is None:
            raise
        sys.stderr.write(f"fermix: {message}\n")
        return 1
    return result if isinstance(result, int) else 0
