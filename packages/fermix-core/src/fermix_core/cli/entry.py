"""Console-script entry point with a fast path for ``--version`` and ``--help``."""

from __future__ import annotations

import sys
from collections.abc import Sequence

_VERSION_FLAGS = frozenset({"--version", "-V"})
_HELP_FLAGS = frozenset({"--help", "-h"})


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
    from fermix_core.cli.app import run

    return run(args)
