"""Slash commands: the router the gateway runs them through, and core's own handlers.

Names are resolved on first use: :mod:`fermix_core.commands.plugin` is imported on every
boot, and importing this package for it must not pull in the router and its models.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

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


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'fermix_core.commands' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"fermix_core.commands.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
