"""Registers the shell, git and directory-access tools. Imports nothing but spec records."""

from __future__ import annotations

from collections.abc import Iterable

from fermix_core.hookspecs import hookimpl
from fermix_core.specs import PolicyClass, ToolSpec

_CWD = "cwd outside the sandbox: refused before anything runs"
_GIT_REPO = "not in a git work tree, or the repository lies outside the sandbox: refused; pass cwd"
_GIT_CONFIG = (
    "the repository's own config names programs git would run (filter/merge drivers, "
    "external diff, textconv, signing program): refused, with the keys named"
)

SHELL = ToolSpec(
    name="shell",
    description=(
        "Run a bash command line in the sandbox and get its exit code, stdout and stderr "
        "(capped). Programs are limited by the command profile."
    ),
    factory="fermix_tools.shell.exec:Shell",
    args_model="fermix_tools.shell.exec:ShellArgs",
    policy=PolicyClass.EXEC,
    read_only=False,
    owner_only=True,
    guidance=(
        "Prefer file_read, file_edit, glob_search and content_search for files, and "
        "git_read/git_write for git. Standard input is empty; nothing is interactive. For "
        "long output redirect to a file and read it with file_read. Background processes "
        "are stopped when the command returns."
    ),
    failure_modes=(
        _CWD,
        "catastrophic command (rm -rf ~, mkfs, fork bomb …): refused in every mode",
        "a program outside the command profile: refused, naming the program",
        "timeout: the whole process group is stopped; partial output is returned",
        "output over 256 KB: the command is stopped and the cut is announced",
    ),
    # The command's own timeout goes up to 1800 s and answers with partial output; the call
    # deadline only catches a shell tool that fails to stop.
    timeout_seconds=1860,
)

_GIT_ARGS = "fermix_tools.shell.git:GitArgs"

GIT_READ = ToolSpec(
    name="git_read",
    description=(
        "Run a read-only git subcommand (status, log, diff, show, branch, blame, grep …) "
        "in a repository inside the sandbox."
    ),
    factory="fermix_tools.shell.git:GitRead",
    args_model=_GIT_ARGS,
    policy=PolicyClass.OWNER_DATA_READ,
    read_only=True,
    owner_only=False,
    guidance=(
        'args are the words after "git", subcommand first: ["log", "--oneline", "-n", '
        '"10"]. branch and tag only list. No options before the subcommand (-C, -c); use '
        "cwd to pick the repository."
    ),
    failure_modes=(
        "subcommand not on the read list, or an option that runs programs or touches files "
        "outside the repository (--output, --no-index, --ext-diff …): refused",
        _GIT_REPO,
        _GIT_CONFIG,
        "git itself fails: its exit code and stderr are returned as an error",
    ),
)

GIT_WRITE = ToolSpec(
    name="git_write",
    description=(
        "Change a local git repository inside the sandbox: add, commit, checkout -b, switch, "
        "stash, reset, merge, rebase, tag … Never push, fetch or change remotes."
    ),
    factory="fermix_tools.shell.git:GitWrite",
    args_model=_GIT_ARGS,
    policy=PolicyClass.WRITE,
    read_only=False,
    owner_only=False,
    guidance=(
        'Commit with ["commit", "-m", "message"] (no editor opens). Hooks do not run. '
        "push, pull, fetch, clone, remote, submodule and config are refused: the owner "
        "does those."
    ),
    failure_modes=(
        "push/fetch/remote/config or an option that runs programs (rebase --exec, custom "
        "merge strategy, ext:: addresses) or reads files outside the repository: refused",
        _GIT_REPO,
        _GIT_CONFIG,
        "git itself fails (conflict, nothing to commit, no identity): its exit code and "
        "stderr are returned as an error",
    ),
)

REQUEST_DIRECTORY_ACCESS = ToolSpec(
    name="request_directory_access",
    description=(
        "Ask the owner to grant the sandbox access to a directory outside its roots. The "
        "owner sees the exact path, your reason and the config change, and approves with "
        "/confirm."
    ),
    factory="fermix_tools.shell.access:RequestDirectoryAccess",
    args_model="fermix_tools.shell.access:RequestDirectoryAccessArgs",
    policy=PolicyClass.WRITE,
    read_only=False,
    owner_only=True,
    guidance=(
        "Only after a file operation was refused as outside the sandbox and the task "
        "genuinely needs that directory. Ask for the narrowest directory, give a concrete "
        "reason, then stop and wait for the owner; do not retry until they confirm."
    ),
    failure_modes=(
        "not an attended operator chat turn (guest, job, subagent, background): refused",
        "a path no grant may name ($HOME itself, FERMIX_HOME, protected paths, OS roots): "
        "refused without prompting",
        "already inside the sandbox: nothing to request",
    ),
)

TOOLS = (SHELL, GIT_READ, GIT_WRITE, REQUEST_DIRECTORY_ACCESS)


@hookimpl
def fermix_tools() -> Iterable[ToolSpec]:
    return TOOLS
