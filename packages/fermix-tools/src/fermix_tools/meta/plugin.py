"""Registers the meta tools. Registration imports nothing but spec records."""

from __future__ import annotations

from collections.abc import Iterable

from fermix_core.hookspecs import hookimpl
from fermix_core.specs import PolicyClass, ToolSpec

TOOL_HELP = ToolSpec(
    name="tool_help",
    description=(
        "Explain one tool you can call on this turn: its argument schema, when to use it, "
        "and how it fails. Use it before calling an unfamiliar tool."
    ),
    factory="fermix_tools.meta.tool_help:ToolHelp",
    args_model="fermix_tools.meta.tool_help:ToolHelpArgs",
    policy=PolicyClass.READ_ONLY,
    read_only=True,
    owner_only=False,
    guidance=(
        "Pass the exact tool name as listed in the capability catalog. The answer covers only "
        "tools available to this conversation right now."
    ),
    failure_modes=(
        "unknown or unavailable tool name: the error lists the tools you can ask about",
    ),
)


@hookimpl
def fermix_tools() -> Iterable[ToolSpec]:
    return (TOOL_HELP,)
