"""``shell``: one command line in the sandbox, with its exit code and capped output.

The command is checked by the sandbox first (catastrophic commands, and every program in
it — through pipes, substitutions and ``sh -c`` bodies — against the command profile), then
run by ``bash -c`` in its own process group with the sandbox's minimal environment,
confined (bubblewrap) to what the sandbox mode allows. The
whole group is killed on timeout, cancellation or an output flood, so a backgrounded
child cannot outlive the call.
"""

from __future__ import annotations

import shutil

from fermix_core.tool import Tool, ToolContext, ToolOutput
from pydantic import BaseModel, ConfigDict, Field

from fermix_tools.files.common import sandbox, working_dir
from fermix_tools.shell.output import render

DEFAULT_TIMEOUT = 120.0
MAX_TIMEOUT = 1800.0
OUTPUT_CAP = 256_000
#: Variables that make a non-interactive shell source a file before the command.
_STARTUP_VARS = ("BASH_ENV", "ENV")


class ShellArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    command: str = Field(
        min_length=1,
        max_length=100_000,
        description="A bash command line (pipes, &&, redirections and quoting work).",
    )
    cwd: str | None = Field(
        default=None,
        max_length=4096,
        description="Directory to run in (default: the current directory).",
    )
    timeout: float = Field(
        default=DEFAULT_TIMEOUT,
        gt=0,
        le=MAX_TIMEOUT,
        description=f"Seconds before the command is stopped (default {DEFAULT_TIMEOUT:g}).",
    )


class Shell(Tool[ShellArgs]):
    async def run(self, args: ShellArgs, ctx: ToolContext) -> ToolOutput:
        policy = sandbox(ctx)
        cwd = working_dir(policy, ctx, args.cwd, what="cwd")
        policy.check_command(args.command, cwd=cwd)
        env = dict(policy.child_env())
        for name in _STARTUP_VARS:
            env.pop(name, None)
        program = shutil.which("bash", path=env.get("PATH")) or "/bin/sh"
        result = await policy.run(
            [program, "-c", args.command],
            cwd=cwd,
            env=env,
            ctx=ctx,
            timeout=args.timeout,
            output_cap=OUTPUT_CAP,
        )
        text, data = render(result, timeout=args.timeout, output_cap=OUTPUT_CAP)
        return ToolOutput(content=text, is_error=result.timed_out, data={**data, "cwd": str(cwd)})
