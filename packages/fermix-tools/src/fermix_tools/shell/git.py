"""``git_read`` and ``git_write``: git without the ways git runs programs or leaves the sandbox.

Three layers, each closing what the others cannot:

1. **Arguments** (:mod:`fermix_tools.shell.gitargs`): an allowlist of subcommands, no
   global options, dangerous options refused — ``push`` and every remote-talking command
   are simply absent.
2. **The repository**: its work tree and git directory must be inside the sandbox (a
   dotfiles repository at ``$HOME`` would otherwise expose ``~/.ssh`` through
   ``git show``), and its *own* config must not name programs git would run on our behalf
   (filter drivers, merge drivers, external diff and textconv, signing programs). A
   repository's ``.git/config`` is just a file the agent — or whoever the repository came
   from — can write; ``~/.gitconfig`` is the owner's and the sandbox write-protects it.
3. **The process**: ``GIT_CONFIG_NOSYSTEM=1``, ``GIT_TERMINAL_PROMPT=0``,
   ``GIT_ALLOW_PROTOCOL=file:https:ssh`` (so an ``ext::`` URL that slipped through is
   inert), editors and pagers pinned to no-ops, hooks and fsmonitor switched off with
   ``-c`` (which outranks every config file), inherited ``GIT_*`` variables dropped.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
from pathlib import Path
from typing import Any, ClassVar

from fermix_core.tool import Tool, ToolContext, ToolError, ToolOutput
from pydantic import BaseModel, ConfigDict, Field, field_validator

from fermix_tools.files.common import sandbox, working_dir
from fermix_tools.shell import gitargs
from fermix_tools.shell.output import render

GIT_TIMEOUT = 120.0
GIT_OUTPUT_CAP = 256_000
#: Protocols git may use at all; ``ext`` (runs a command) and ``fd`` are not among them.
ALLOWED_PROTOCOLS = "file:https:ssh"

#: ``-c`` pins on every invocation: command-line config outranks system, global and
#: repository config, and is inherited by the git processes git itself starts.
PINS: tuple[str, ...] = (
    "--no-pager",
    "-c",
    "core.fsmonitor=false",
    "-c",
    "core.hooksPath=/dev/null",
    "-c",
    "core.pager=cat",
    "-c",
    "gc.auto=0",
    "-c",
    "maintenance.auto=false",
    "-c",
    "protocol.ext.allow=never",
    "-c",
    "protocol.fd.allow=never",
)

#: Inherited ``GIT_*`` variables that survive (who a commit is by); all others are dropped
#: (``GIT_DIR``, ``GIT_SSH_COMMAND``, ``GIT_EXTERNAL_DIFF``, ``GIT_CONFIG_PARAMETERS`` …).
_IDENTITY_VARS = frozenset(
    {
        "GIT_AUTHOR_NAME",
        "GIT_AUTHOR_EMAIL",
        "GIT_AUTHOR_DATE",
        "GIT_COMMITTER_NAME",
        "GIT_COMMITTER_EMAIL",
        "GIT_COMMITTER_DATE",
    }
)

#: Repository-level keys that make git run a program we cannot pin away with ``-c``.
_RISKY_KEY = re.compile(
    r"^(?:filter\..+\.(?:clean|smudge|process)"
    r"|merge\..+\.driver"
    r"|diff\..+\.(?:command|textconv)"
    r"|diff\.external"
    r"|gpg\.program|gpg\..+\.program"
    r"|core\.alternaterefscommand"
    r"|uploadpack\.packobjectshook)$",
    re.IGNORECASE,
)
_REPO_SCOPES = frozenset({"local", "worktree"})


class GitArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    args: list[str] = Field(
        min_length=1,
        max_length=200,
        description=(
            'The words after "git", starting with the subcommand, e.g. ["log", "--oneline", '
            '"-n", "5"].'
        ),
    )
    cwd: str | None = Field(
        default=None,
        max_length=4096,
        description="A directory inside the repository (default: the current directory).",
    )

    @field_validator("args", mode="before")
    @classmethod
    def _split_string(cls, value: Any) -> Any:
        """Models often send ``"log -n 5"``; split it the way a shell would."""
        if isinstance(value, str):
            try:
                return shlex.split(value)
            except ValueError as exc:
                raise ValueError(f"cannot split the arguments: {exc}") from None
        return value

    @field_validator("args")
    @classmethod
    def _bounded_words(cls, value: list[str]) -> list[str]:
        if any(len(word) > 8192 for word in value):
            raise ValueError("each argument must be at most 8192 characters")
        return value


def git_env(policy: Any, *, read_only: bool) -> dict[str, str]:
    """The environment git runs in: the sandbox's child env, hardened (see module doc)."""
    base = policy.child_env()
    env = {k: v for k, v in base.items() if not k.startswith("GIT_") or k in _IDENTITY_VARS}
    env.update(
        {
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_ATTR_NOSYSTEM": "1",
            "GIT_TERMINAL_PROMPT": "0",
            "GIT_ALLOW_PROTOCOL": ALLOWED_PROTOCOLS,
            "GIT_PROTOCOL_FROM_USER": "0",
            "GIT_PAGER": "cat",
            "PAGER": "cat",
            "GIT_EDITOR": "true",
            "GIT_SEQUENCE_EDITOR": "true",
        }
    )
    if read_only:
        env["GIT_OPTIONAL_LOCKS"] = "0"  # status must not take the index lock
    return env


def risky_keys(config_listing: str) -> list[str]:
    """Keys set by the repository itself that run programs, from ``config -l --show-scope -z``."""
    found: list[str] = []
    # NUL-separated records alternate: "<scope>", then "<key>\n<value>" (or just "<key>").
    entries = config_listing.split("\0")
    for scope, entry in zip(entries[::2], entries[1::2], strict=False):
        key = entry.split("\n", 1)[0]
        if scope in _REPO_SCOPES and _RISKY_KEY.match(key) and key not in found:
            found.append(key)
    return found


class _GitTool(Tool[GitArgs]):
    rules: ClassVar[dict[str, gitargs.Rule]]
    writes: ClassVar[bool]

    async def run(self, args: GitArgs, ctx: ToolContext) -> ToolOutput:
        policy = sandbox(ctx)
        checked = gitargs.check(args.args, self.rules, self.name)
        cwd = working_dir(policy, ctx, args.cwd, what="cwd")
        env = git_env(policy, read_only=not self.writes)
        git = shutil.which("git", path=env.get("PATH"))
        if git is None:
            raise ToolError("git is not installed (or not on the sandbox PATH)")
        top: Path | None = None
        if checked.subcommand != "init":
            top = await self._repository(git, cwd, env, policy, ctx)
        self._check_paths(checked, cwd, top, policy, ctx)
        result = await policy.run(
            [git, *PINS, *checked.argv],
            cwd=cwd,
            env=env,
            ctx=ctx,
            write=self.writes,
            timeout=GIT_TIMEOUT,
            output_cap=GIT_OUTPUT_CAP,
        )
        text, data = render(result, timeout=GIT_TIMEOUT, output_cap=GIT_OUTPUT_CAP)
        failed = result.timed_out or result.exit_code != 0
        return ToolOutput(
            content=f"$ git {shlex.join(args.args)}\n{text}",
            is_error=failed,
            data={**data, "cwd": str(cwd), "repository": str(top) if top else None},
        )

    async def _repository(
        self, git: str, cwd: Path, env: dict[str, str], policy: Any, ctx: ToolContext
    ) -> Path:
        probe = await policy.run(
            [git, *PINS, "rev-parse", "--show-toplevel", "--absolute-git-dir"],
            cwd=cwd,
            env=env,
            ctx=ctx,
            write=False,
            timeout=30.0,
            output_cap=64_000,
        )
        lines = probe.stdout.splitlines()
        if probe.exit_code != 0 or len(lines) < 2:
            said = probe.stderr.strip().splitlines()[-1:] or ["no answer"]
            raise ToolError(
                f"{cwd} is not inside a git work tree (git: {said[0]}). Pass cwd set to a "
                "directory inside the repository"
                + (", or create one with git_write ['init']." if self.writes else ".")
            )
        top, git_dir = Path(lines[0]), Path(lines[1])
        for what, path in (("work tree", top), ("git directory", git_dir)):
            try:
                policy.resolve(path, ctx)
            except ToolError as exc:
                raise ToolError(
                    f"the repository's {what} {path} is outside the sandbox, so git tools "
                    f"will not run in it ({exc})"
                ) from None
        listing = await policy.run(
            [git, *PINS, "config", "--list", "--show-scope", "-z"],
            cwd=cwd,
            env=env,
            ctx=ctx,
            write=False,
            timeout=30.0,
            output_cap=1_000_000,
        )
        risky = risky_keys(listing.stdout)
        if risky:
            raise ToolError(
                f"the repository's own git config ({git_dir / 'config'} or a file it includes) "
                f"sets {', '.join(risky)}, which makes git run a program. Git tools refuse to "
                "run in it; remove those settings, or ask the owner to run git themselves."
            )
        return top

    def _check_paths(
        self,
        checked: gitargs.Checked,
        cwd: Path,
        top: Path | None,
        policy: Any,
        ctx: ToolContext,
    ) -> None:
        creating = checked.subcommand == "init"
        for word in checked.path_args:
            absolute = word if os.path.isabs(word) else os.path.join(cwd, word)
            resolved = policy.resolve(absolute, ctx, write=creating)
            if top is None or checked.subcommand == "apply":
                continue
            if resolved != top and top not in resolved.parents:
                raise ToolError(
                    f"{word!r} is outside the repository {top}; git tools only take paths inside it"
                )


class GitRead(_GitTool):
    rules = gitargs.READ_RULES
    writes = False


class GitWrite(_GitTool):
    rules = gitargs.WRITE_RULES
    writes = True
