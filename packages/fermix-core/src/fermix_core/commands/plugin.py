"""Registration of core's own slash commands, through the hook third-party plugins use.

Imported on every boot (the CLI included), so it names handlers by import path and
imports nothing but the hook marker and the spec records.
"""

from __future__ import annotations

from fermix_core.hookspecs import hookimpl
from fermix_core.specs import CommandSpec, Role

_H = "fermix_core.commands.builtin"


@hookimpl
def fermix_commands():
    yield CommandSpec(
        name="help",
        help="list the commands you can run",
        handler=f"{_H}:help_command",
        role=Role.ANY,
    )
    yield CommandSpec(
        name="whoami",
        help="show your stable user id on this channel and whether you are operator or guest",
        handler=f"{_H}:whoami_command",
        role=Role.ANY,
    )
    yield CommandSpec(
        name="new",
        help=(
            "clear the conversation window (long-term memory, resource revisions and "
            "scheduled jobs are preserved)"
        ),
        handler=f"{_H}:new_command",
        aliases=("clear",),
    )
    yield CommandSpec(
        name="compact",
        help="summarize the conversation window now and keep the summary in history",
        handler=f"{_H}:compact_command",
    )
    yield CommandSpec(
        name="stop",
        help="stop everything now: the running turn, queued messages and background work",
        handler=f"{_H}:stop_command",
    )
    yield CommandSpec(
        name="background",
        help="run a request as detached background work (at most 8 at once)",
        handler=f"{_H}:background_command",
        aliases=("bg",),
    )
    yield CommandSpec(
        name="tasks",
        help="list running and recent background work from this conversation",
        handler=f"{_H}:tasks_command",
    )
    yield CommandSpec(
        name="ultra",
        help="run a request as a normal turn in exhaustive multi-agent (ultra) mode",
        handler=f"{_H}:ultra_command",
    )
    yield CommandSpec(
        name="sandbox",
        help="inspect and change the sandbox: folders, command profile, environment",
        handler=f"{_H}:sandbox_command",
        aliases=("grant", "revoke", "confirm"),
        sandbox_mutation=True,
    )
