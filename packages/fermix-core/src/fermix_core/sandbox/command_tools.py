"""Local programs exposed as tools of their own (``[sandbox] expose_commands``).

A command profile decides which programs the shell tool may start; exposing one of them
as ``cmd_<name>`` gives the model a narrow, well-described tool instead of a free-form
shell line. The program runs with an argument list (never through a shell), in the
sandbox's child environment, in its own process group, with the same catastrophic-command
screen and output caps as ``shell``.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from fermix_core.specs import PolicyClass, ToolSpec
from fermix_core.tool import Tool, ToolContext, ToolError, ToolOutput

MAX_OUTPUT = 64_000


class CommandArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    args: list[str] = Field(default_factory=list, max_length=200, description="Arguments.")
    cwd: str | None = Field(default=None, description="Working directory inside the sandbox.")
    timeout: int = Field(default=120, ge=1, le=1800, description="Seconds before it is killed.")


def tool_name(command: str) -> str:
    return "cmd_" + re.sub(r"[^a-z0-9_]", "_", command.lower())


class LocalCommand(Tool[CommandArgs]):
    def __init__(self, spec: ToolSpec, *, command: str) -> None:
        super().__init__(spec)
        self.command = command

    async def run(self, args: CommandArgs, ctx: ToolContext) -> ToolOutput:
        policy = ctx.service("sandbox")
        if not policy.command_allowed(self.command):
            raise ToolError(
                f"the {policy.command_profile!r} command profile does not allow {self.command}"
            )
        argv = [self.command, *args.args]
        cwd = policy.resolve(args.cwd, ctx) if args.cwd else Path(ctx.cwd)
        policy.check_command(argv, cwd=cwd)
        result = await policy.run(
            argv,
            cwd=cwd,
            env=policy.child_env(),
            ctx=ctx,
            timeout=args.timeout,
            output_cap=MAX_OUTPUT,
        )
        if result.timed_out:
            raise ToolError(f"{self.command} did not finish in {args.timeout}s and was stopped")
        parts = [f"exit code: {result.exit_code}"]
        if result.stdout:
            parts.append(f"stdout:\n{result.stdout}")
        if result.stderr:
            parts.append(f"stderr:\n{result.stderr}")
        if result.truncated:
            parts.append(f"(output was cut at {MAX_OUTPUT} bytes)")
        return ToolOutput(content="\n".join(parts), data={"exit_code": result.exit_code})


def command_tool_specs(commands: Iterable[str]) -> list[ToolSpec]:
    """One owner-only EXEC tool spec per exposed program."""
    specs = []
    for command in dict.fromkeys(commands):
        specs.append(
            ToolSpec(
                name=tool_name(command),
                description=(
                    f"Run the local `{command}` program with an argument list (no shell). "
                    "Returns its exit code and output."
                ),
                factory=functools.partial(LocalCommand, command=command),
                args_model=CommandArgs,
                policy=PolicyClass.EXEC,
                owner_only=True,
                read_only=False,
                guidance=f'Pass arguments as a list, e.g. ["--help"]; `{command}` runs in the '
                "request directory unless cwd names another folder inside the sandbox.",
                failure_modes=(
                    "the command profile does not allow the program",
                    "a path outside the sandbox",
                    "timeout (the process group is killed)",
                ),
            )
        )
    return specs
