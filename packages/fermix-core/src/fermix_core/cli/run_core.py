"""``fermix run`` without the CLI framework.

The foreground daemon is the one long-lived process the CLI starts, so it should not keep
typer resident (about 5.5 MiB) for the argument parsing of a command that has no options:
the entry point's fast path calls :func:`run_foreground` for a bare ``fermix run``, and the
typer command (``fermix run --help``, a root option before it) calls the same function.
"""

from __future__ import annotations

import sys


def run_foreground() -> int:
    """Run the daemon in the foreground until it stops; the process's exit code."""
    import anyio

    from fermix_core.daemon.main import serve
    from fermix_core.home import FermixHome

    FermixHome.resolve().ensure()
    try:
        return anyio.run(serve, _print_ready)
    except KeyboardInterrupt:
        return 0
    except Exception as exc:
        sys.stderr.write(f"error: {error_reason(exc)}\n")
        sys.stderr.flush()
        return 1


def _print_ready(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()  # `fermix start` and supervisors wait for this line on a pipe


def error_reason(exc: BaseException) -> str:
    """The message of the one real error inside nested task-group exception groups."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return str(exc)
