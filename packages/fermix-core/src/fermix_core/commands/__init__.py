"""Slash commands: the router the gateway runs them through, and core's own handlers.

Names are resolved on first use: :mod:`fermix_core.commands.plugin` is imported on every
boot, and importing this package for it must not pull in the router and its models.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fermix_core.lazyexports import lazy_exports

if TYPE_CHECKING:  # pragma: no cover - typing only
    from fermix_core.commands.router import CommandConflictError as CommandConflictError
    from fermix_core.commands.router import CommandContext as CommandContext
    from fermix_core.commands.router import CommandResult as CommandResult
    from fermix_core.commands.router import CommandRouter as CommandRouter
    from fermix_core.commands.router import HelpEntry as HelpEntry
    from fermix_core.commands.router import ParsedCommand as ParsedCommand

_LAZY = {
    "CommandConflictError": "router",
    "CommandContext": "router",
    "CommandResult": "router",
    "CommandRouter": "router",
    "HelpEntry": "router",
    "ParsedCommand": "router",
}

__all__ = sorted(_LAZY)


__getattr__ = lazy_exports(__name__, _LAZY, globals())


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
