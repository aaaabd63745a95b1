"""``git_read`` and ``git_write``: git without the ways git runs programs or leaves the sandbox.

Three layers, each closing what the others cannot:

1. **Arguments** (:mod:`fermix_tools.shell.gitargs`): an allowlist of subcommands, no
   global options, dangerous options refused — ``push`` and every remote-talking command
   are simply absent.
2. **The repository**: its work tree, git directory, common directory, object store and
   alternates must be inside the sandbox, its work tree must not contain a protected path
   (a dotfiles repository at ``$HOME`` would expose ``~/.ssh`` through ``git show``), and
   its *own* config may only set keys on an allowlist (:data:`_REPO_ALLOWED`). A
   repository's ``.git/config`` is just a file the agent — or whoever the repository came
   from — can write; ``~/.gitconfig`` is the owner's and the sandbox write-protects it.
3. **The process**: confined like every child (read-only for ``git_read``),
   ``GIT_CONFIG_NOSYSTEM=1``, ``GIT_TERMINAL_PROMPT=0``, ``GIT_ALLOW_PROTOCOL=file:https:ssh``
   (so an ``ext::`` URL that slipped through is inert), every program-running key pinned
   with ``-c`` (which outranks every config file), signing off, submodules never entered,
   inherited ``GIT_*`` variables dropped.
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
#: repository config, and is inherited by the git processes git itself starts. Every key
#: that names a program git could run for these subcommands is pinned to a no-op (or to
#: ``false``, which fails closed), signing is off, and submodules are never entered.
_PINNED: tuple[tuple[str, str], ...] = (
    ("core.fsmonitor", "false"),
    ("core.hooksPath", "/dev/null"),
    ("core.pager", "cat"),
    ("core.editor", "true"),
    ("sequence.editor", "true"),
    ("core.askPass", "true"),
    ("core.sshCommand", "false"),
    ("core.gitProxy", "false"),
    ("core.alternateRefsCommand", "false"),
    ("credential.helper", ""),  # an empty value clears the helper list
    ("commit.gpgSign", "false"),
    ("tag.gpgSign", "false"),
    ("tag.forceSignAnnotated", "false"),
    ("push.gpgSign", "false"),
    ("log.showSignature", "false"),
    ("gpg.program", "false"),
    ("gpg.openpgp.program", "false"),
    ("gpg.ssh.program", "false"),
    ("gpg.x509.program", "false"),
    ("gpg.ssh.defaultKeyCommand", "false"),
    ("submodule.recurse", "false"),
    ("diff.ignoreSubmodules", "all"),
    ("status.submoduleSummary", "false"),
    ("fetch.recurseSubmodules", "false"),
    ("uploadpack.packObjectsHook", "false"),
    ("gc.auto", "0"),
    ("maintenance.auto", "false"),
    ("protocol.allow", "never"),
    ("protocol.ext.allow", "never"),
    ("protocol.fd.allow", "never"),
    ("init.templateDir", ""),
)
PINS: tuple[str, ...] = (
    "--no-pager",
    *(part for key, value in _PINNED for part in ("-c", f"{key}={value}")),
)
_PINNED_KEYS = frozenset(key.lower() for key, _value in _PINNED)

#: Subcommands that take ``--ignore-submodules``; it is added so status and diff never
#: start git inside a submodule (whose own config could name filters).
_IGNORE_SUBMODULES = frozenset({"status", "diff"})

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

#: Keys of the owner's global config that make git run a program on content the agent
#: chose and that no pin covers (a trailer command's name is the owner's choice). Driver
#: definitions there (filters such as git-lfs, merge and diff drivers) are the owner's own
#: programs and only run where a repository's attributes select them.
_RISKY_KEY = re.compile(r"^(?:trailer\..+\.(?:cmd|command)|diff\.external)$", re.IGNORECASE)

#: What a repository's *own* config (``.git/config``, worktree config and anything they
#: include) may set: an allowlist. Anything else — a program (filter, merge and diff
#: drivers, signing, trailer commands), a path outside the repository (``core.worktree``,
#: ``include.path``, ``commit.template``) — makes the git tools refuse the repository,
#: naming the keys.
_REPO_ALLOWED = re.compile(
    r"^(?:core\.(?:repositoryformatversion|filemode|bare|logallrefupdates|ignorecase"
    r"|precomposeunicode|symlinks|autocrlf|eol|safecrlf|quotepath|abbrev|compression"
    r"|loosecompression|bigfilethreshold|sparsecheckout|sparsecheckoutcone|untrackedcache"
    r"|splitindex|commentchar|commentstring|whitespace|checkstat|trustctime|preloadindex"
    r"|multipackindex|commitgraph|protectntfs|protecthfs|sharedrepository|warnambiguousrefs)"
    r"|extensions\.[a-z]+"
    r"|remote\..+\.(?:url|pushurl|fetch|push|tagopt|prune|prunetags|mirror"
    r"|skipdefaultupdate|skipfetchall|partialclonefilter|promisor)"
    r"|branch\..+\.(?:remote|merge|rebase|pushremote|description)"
    r"|user\.(?:name|email|signingkey|useconfigonly)|(?:author|committer)\.(?:name|email)"
    r"|init\.defaultbranch"
    r"|submodule\..+\.(?:url|active|branch|ignore|fetchrecursesubmodules|shallow)"
    r"|submodule\.active"
    r"|(?:color|advice|i18n|rerere|lfs|http|pack|index|feature|maintenance|fetch|gc)\..+"
    r"|diff\.(?:renames|renamelimit|algorithm|context|mnemonicprefix|noprefix|colormoved"
    r"|indentheuristic|interhunkcontext|statgraphwidth|suppressblankempty|wserrorhighlight)"
    r"|merge\.(?:conflictstyle|ff|renames|renamelimit|log|stat|verbosity|autostash)"
    r"|pull\.(?:rebase|ff|twohead|octopus)|push\.(?:default|autosetupremote|followtags)"
    r"|rebase\.(?:autosquash|autostash|updaterefs|stat|missingcommitscheck)"
    r"|status\.(?:showuntrackedfiles|short|branch|relativepaths|showstash|aheadbehind)"
    r"|log\.(?:date|decorate|abbrevcommit|follow|mailmap|showroot)"
    r"|commit\.(?:verbose|cleanup|status)|tag\.sort|column\..+|format\.pretty"
    r"|worktree\.guessremote|clean\.requireforce|checkout\.(?:defaultremote|workers)"
    r"|blame\.(?:date|coloring|showemail|blankboundary|showroot)|grep\..+"
    r"|protocol\.version)$",
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
    """Keys git must not honour, from ``config -l --show-scope -z``: in the repository's own
    config, anything off :data:`_REPO_ALLOWED`; in the owner's global config, keys that run
    a program and that no ``-c`` pin overrides."""
    found: list[str] = []
    # NUL-separated records alternate: "<scope>", then "<key>\n<value>" (or just "<key>").
    entries = config_listing.split("\0")
    for scope, entry in zip(entries[::2], entries[1::2], strict=False):
        key = entry.split("\n", 1)[0]
        if scope in ("command", "") or key.lower() in _PINNED_KEYS:
            continue
        rule = _REPO_ALLOWED.match if scope in _REPO_SCOPES else _RISKY_KEY.match
        bad = (rule(key) is None) if scope in _REPO_SCOPES else (rule(key) is not None)
        if bad and key not in found:
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
        argv = list(checked.argv)
        if checked.subcommand in _IGNORE_SUBMODULES and argv[:1] == [checked.subcommand]:
            argv.insert(1, "--ignore-submodules=all")
        result = await policy.run(
            [git, *PINS, *argv],
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
            [
                git,
                *PINS,
                "rev-parse",
                "--show-toplevel",
                "--absolute-git-dir",
                "--path-format=absolute",
                "--git-common-dir",
            ],
            cwd=cwd,
            env=env,
            ctx=ctx,
            write=False,
            timeout=30.0,
            output_cap=64_000,
        )
        lines = probe.stdout.splitlines()
        if probe.exit_code != 0 or len(lines) < 3:
            said = probe.stderr.strip().splitlines()[-1:] or ["no answer"]
            raise ToolError(
                f"{cwd} is not inside a git work tree (git: {said[0]}). Pass cwd set to a "
                "directory inside the repository"
                + (", or create one with git_write ['init']." if self.writes else ".")
            )
        top, git_dir, common = Path(lines[0]), Path(lines[1]), Path(lines[2])
        places = [("work tree", top), ("git directory", git_dir), ("common git directory", common)]
        places.append(("object store", common / "objects"))
        places.extend(("alternate object store", alt) for alt in _alternates(common / "objects"))
        for what, path in places:
            try:
                policy.resolve(path, ctx)
            except ToolError as exc:
                raise ToolError(
                    f"the repository's {what} {path} is outside the sandbox, so git tools "
                    f"will not run in it ({exc})"
                ) from None
        hidden = _protected_inside(policy, top)
        if hidden:
            raise ToolError(
                f"the repository at {top} contains protected paths ({', '.join(hidden[:3])}"
                f"{', …' if len(hidden) > 3 else ''}), which git could show from its objects "
                "(git show HEAD:.ssh/id_rsa). Git tools do not run in it; use a repository "
                "that does not hold your home's private files."
            )
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


def _alternates(objects: Path, depth: int = 0) -> list[Path]:
    """Object stores *objects* borrows from (``objects/info/alternates``, recursively: an
    alternate's own alternates count too)."""
    found: list[Path] = []
    try:
        text = (objects / "info" / "alternates").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return found
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith('"'):
            line = line.strip('"')
        path = Path(line) if os.path.isabs(line) else objects / line
        found.append(path)
        if depth < 5:
            found.extend(_alternates(path, depth + 1))
    return found


def _protected_inside(policy: Any, top: Path) -> list[str]:
    """Protected locations that lie inside the work tree *top* (a dotfiles repository)."""
    inside: list[str] = []
    for entry in policy.protected:
        path = entry.path
        if path == top or top not in path.parents:
            continue
        if policy.protected_reason(path) is None:  # a carve-out such as the workspace
            continue
        inside.append(str(path))
    return inside


class GitRead(_GitTool):
    rules = gitargs.READ_RULES
    writes = False


class GitWrite(_GitTool):
    rules = gitargs.WRITE_RULES
    writes = True
