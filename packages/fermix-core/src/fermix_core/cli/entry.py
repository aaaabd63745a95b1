"""Console-script entry point with fast paths for ``--version``, ``--help``, ``ask`` and ``run``."""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # collections and typing load after the lean-code finder is in
if TYPE_CHECKING:  # pragma: no cover - typing only
    from collections.abc import Sequence

_VERSION_FLAGS = frozenset({"--version", "-V"})
_HELP_FLAGS = frozenset({"--help", "-h"})


def _skip_httpx_cli() -> None:
    """Keep httpx from importing its own command-line client.

    ``import httpx`` loads ``httpx._main`` (click, rich and pygments) whenever those happen
    to be installed, which costs a cold ``fermix ask`` about 6 MiB and tens of
    milliseconds; Fermix never runs that client. A ``None`` entry makes that one import
    fail, and httpx then defines a stub ``httpx.main`` instead. An httpx already imported
    (an embedding app) is left as it is.
    """
    sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) == 1 and args[0] in _VERSION_FLAGS:
        from fermix_core import __version__

        sys.stdout.write(f"fermix {__version__}\n")
        return 0
    if not args or (len(args) == 1 and args[0] in _HELP_FLAGS):
        from fermix_core.cli.commands import render_help

        sys.stdout.write(render_help() + "\n")
        return 0
    _skip_httpx_cli()  # after the help/version paths, which import no httpx at all
    if args[0] == "ask":
        return _ask(args[1:], console=argv is None)
    if args == ["run"]:
        # The foreground daemon: no options to parse, so typer is never imported.
        from fermix_core.cli.logsetup import configure_logging
        from fermix_core.cli.run_core import run_foreground

        configure_logging("run")
        return run_foreground()
    from fermix_core.cli.app import run

    return run(args)


def _ask(args: list[str], *, console: bool) -> int:
    """``fermix ask``: the plain form without the CLI framework, the rest through typer.

    Run as the console script (*console*), the process starts the cheap way
    (:mod:`fermix_core.startup`); a caller that passes its own argv (an embedding program,
    a test) keeps its interpreter as it is.
    """
    if console:
        from fermix_core import startup

        startup.begin()
    try:
        from fermix_core.cli.ask_core import ask_command, parse_ask_args

        options = parse_ask_args(args)
        if options is not None:
            from fermix_core.cli.logsetup import configure_logging

            configure_logging()
            return ask_command(**options)
        if console:
            startup.keep_docstrings()  # typer's help texts are the commands' docstrings
        from fermix_core.cli.app import run

        return run(["ask", *args])
    finally:
        if console:
            startup.end()
