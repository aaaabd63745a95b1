"""Console-script entry point with fast paths for ``--version``, ``--help``, ``ask`` and ``run``."""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # collections and typing load after the lean-code finder is in
if TYPE_CHECKING:  # pragma: no cover - typing only
    from collections.abc import Sequence

_VERSION_FLAGS = frozenset({"--version", "-V"})
_HELP_FLAGS = frozenset({"--help", "-h"})
#: Set when a console ``fermix ask`` ran the plain path: what it opened it has closed, and
#: the process may end without the interpreter's teardown (:func:`console`).
_one_off_done = False


def _skip_httpx_cli() -> None:
    """Keep httpx from importing its own command-line client.

    ``import httpx`` loads ``httpx._main`` (click, rich and pygments) whenever those happen
    to be installed, which costs a cold ``fermix ask`` about 6 MiB and tens of
    milliseconds; Fermix never runs that client. A ``None`` entry makes that one import
    fail, and httpx then defines a stub ``httpx.main`` instead. An httpx already imported
    (an embedding app) is left as it is.
    """
    sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]


def console() -> None:
    """The ``fermix`` console script: :func:`main`, and after a one-off ``fermix ask`` an
    exit without the interpreter's teardown.

    Tearing down the interpreter — clearing ~390 modules and freeing every object they
    made, one by one — was about 4% of a cold ask's CPU, spent after the answer was printed
    and everything was closed. What Python does before that teardown is done here, in its
    order: wait for threads that are not daemons, run the ``atexit`` callbacks (logging's
    flush and close among them), flush standard output and error; then the process exits
    with the ask's code. Output that cannot be written (a closed pipe) ends it with code
    1, quietly. Every other command, an embedding program and ``main()`` called directly
    end as usual.
    """
    try:
        code = main()
    except BrokenPipeError:
        # Whoever read the output went away (`fermix ask … | head -c0`): nothing is left to
        # say, and no traceback either. Later writes (the exit's flush) go nowhere.
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(1)
    if _one_off_done:
        _leave(code)
    sys.exit(code)


def _leave(code: int) -> None:
    """Python's exit up to its teardown (see :func:`console`), then the end of the process."""
    import atexit
    import contextlib
    import os
    import threading

    run_exit_callbacks = getattr(atexit, "_run_exitfuncs", None)
    if run_exit_callbacks is None:  # another interpreter: the usual exit
        sys.exit(code)
    for thread in threading.enumerate():
        if thread is not threading.current_thread() and not thread.daemon:
            thread.join()
    run_exit_callbacks()
    try:
        sys.stdout.flush()
    except (OSError, ValueError):  # a reader that went away (`fermix ask … | head -c1`)
        code = code or 1
    with contextlib.suppress(OSError, ValueError):
        sys.stderr.flush()
    os._exit(code)


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
    global _one_off_done
    if console:
        from fermix_core import startup

        startup.begin()
    try:
        from fermix_core.cli.ask_core import ask_command, parse_ask_args

        options = parse_ask_args(args)
        if options is not None:
            from fermix_core.cli.logsetup import configure_logging

            configure_logging()
            code = ask_command(**options)
            _one_off_done = console
            return code
        if console:
            startup.keep_docstrings()  # typer's help texts are the commands' docstrings
        from fermix_core.cli.app import run

        return run(["ask", *args])
    finally:
        if console:
            startup.end()
