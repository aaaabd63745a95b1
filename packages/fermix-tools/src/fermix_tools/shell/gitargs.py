"""Which git invocations ``git_read`` and ``git_write`` accept — decided before git runs.

Git is a program runner in disguise: ``-c core.pager=…``, ``--ext-diff``, ``rebase --exec``,
``merge -s <name>`` (which runs ``git-merge-<name>``), ``ext::`` transports and filter
drivers all execute programs, and ``--output``, ``--no-index`` or ``blame --contents``
read or write files outside the repository. So the subcommand must be on an allowlist,
global options (``-c``, ``-C``, ``--git-dir``) cannot be passed at all, and each
subcommand's dangerous options are refused, including git's unambiguous abbreviations of
them (``--out`` is ``--output`` to git). Everything refused says what to do instead.

This module is pure argument checking; :mod:`fermix_tools.shell.git` adds the checks that
need the repository (where it is, and what its local config runs).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from fermix_core.tool import ToolError

#: Long options refused for every subcommand: they run programs, read or write arbitrary
#: files, or point git at another repository.
GLOBAL_REFUSED: tuple[str, ...] = (
    "--output",
    "--ext-diff",
    "--textconv",
    "--exec",
    "--exec-path",
    "--upload-pack",
    "--receive-pack",
    "--git-dir",
    "--work-tree",
    "--namespace",
    "--separate-git-dir",
    "--template",
    "--no-index",
    "--open-files-in-pager",
    "--contents",
    "--ignore-revs-file",
    "--orderfile",
    "--pathspec-from-file",
    "--exclude-from",
    "--file",
    "--remote",
    "--config-env",
    "--unsafe-paths",
    "--filters",
)

#: Built-in merge strategies; any other name makes git run ``git-merge-<name>`` from PATH.
MERGE_STRATEGIES = frozenset({"ort", "recursive", "resolve", "octopus", "ours", "subtree"})

#: ``transport::address`` (``ext::sh -c …`` runs a command; ``fd::`` reads descriptors).
_TRANSPORT = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*::")


@dataclass(frozen=True)
class Rule:
    """How one subcommand is checked and what is added to make it safe."""

    #: Extra long options refused for this subcommand.
    refused: tuple[str, ...] = ()
    #: Short option letters refused for this subcommand.
    refused_short: str = ""
    #: Short option letters that take a value (scanning a cluster stops there).
    values: str = ""
    #: Options inserted right after the subcommand.
    inject: tuple[str, ...] = ()
    #: Allowed first positional words (``stash list``); empty means anything.
    actions: tuple[str, ...] = ()
    #: With *actions*: whether the bare subcommand (git's default action) is allowed.
    bare_ok: bool = False
    #: Why a refused option is refused, shown to the model.
    hint: str = ""
    #: Whether ``-s``/``--strategy`` values must be built-in strategies.
    strategies: bool = False


_DIFF_SAFE = ("--no-ext-diff", "--no-textconv")
_INTERACTIVE = ("--patch", "--interactive", "--edit")
_INTERACTIVE_HINT = "interactive modes need a terminal; pass explicit paths instead"

READ_RULES: dict[str, Rule] = {
    "status": Rule(),
    "log": Rule(refused_short="O", values="n", inject=_DIFF_SAFE),
    "show": Rule(refused_short="O", values="n", inject=_DIFF_SAFE),
    "diff": Rule(refused_short="O", inject=_DIFF_SAFE),
    "whatchanged": Rule(refused_short="O", values="n", inject=_DIFF_SAFE),
    "diff-tree": Rule(refused_short="O", inject=_DIFF_SAFE),
    "range-diff": Rule(inject=_DIFF_SAFE),
    "branch": Rule(
        refused=(
            "--delete",
            "--move",
            "--copy",
            "--force",
            "--set-upstream-to",
            "--unset-upstream",
            "--edit-description",
            "--track",
            "--create-reflog",
        ),
        refused_short="dDmMcCfut",
        inject=("--list",),
        hint="git_read only lists branches; use git_write to change them",
    ),
    "tag": Rule(
        refused=("--delete", "--force", "--annotate", "--sign", "--local-user", "--message"),
        refused_short="dfasumF",
        inject=("--list",),
        hint="git_read only lists tags; use git_write to create or delete them",
    ),
    "stash": Rule(actions=("list", "show")),
    "rev-parse": Rule(),
    "rev-list": Rule(values="n"),
    "ls-files": Rule(refused_short="X"),
    "ls-tree": Rule(),
    "cat-file": Rule(),
    "blame": Rule(refused_short="S", values="L", inject=("--no-textconv",)),
    "grep": Rule(refused_short="Of", values="eABCm", hint="pass patterns with -e instead"),
    "shortlog": Rule(),
    "describe": Rule(),
    "reflog": Rule(actions=("show",), bare_ok=True),
    "merge-base": Rule(),
    "show-ref": Rule(),
    "for-each-ref": Rule(),
    "name-rev": Rule(),
    "count-objects": Rule(),
    "check-ignore": Rule(refused=("--stdin",)),
    "cherry": Rule(),
}

WRITE_RULES: dict[str, Rule] = {
    "add": Rule(refused=_INTERACTIVE, refused_short="pie", hint=_INTERACTIVE_HINT),
    "rm": Rule(),
    "mv": Rule(),
    "commit": Rule(
        refused=("--patch", "--interactive", "--template"),
        refused_short="pFt",
        values="mCcS",
        hint="give the message with -m; interactive modes need a terminal",
    ),
    "checkout": Rule(refused=("--patch",), refused_short="p", values="bB"),
    "switch": Rule(values="cC"),
    "restore": Rule(refused=("--patch",), refused_short="p", values="s"),
    "reset": Rule(refused=("--patch",), refused_short="p"),
    "stash": Rule(
        refused=("--patch",),
        refused_short="p",
        values="m",
        actions=("push", "save", "pop", "apply", "drop", "list", "show", "branch", "clear"),
        bare_ok=True,
        hint=_INTERACTIVE_HINT,
    ),
    "branch": Rule(refused=("--edit-description",)),
    "tag": Rule(refused_short="F", values="mu", hint="give the message with -m"),
    "merge": Rule(refused_short="F", values="msX", strategies=True),
    "rebase": Rule(refused_short="x", values="sX", strategies=True),
    "cherry-pick": Rule(values="msX", strategies=True),
    "revert": Rule(values="msX", strategies=True),
    "init": Rule(),
    "apply": Rule(),
}


@dataclass(frozen=True)
class Checked:
    """A validated invocation: the subcommand, the argv after ``git``, and path-like args."""

    subcommand: str
    argv: tuple[str, ...]
    #: Positional arguments that name files outside the current directory's subtree
    #: (absolute, ``~`` or with ``..``); the caller checks them against the sandbox.
    path_args: tuple[str, ...]


def check(args: Sequence[str], rules: dict[str, Rule], tool: str) -> Checked:
    """Validate *args* (the words after ``git``) against *rules*; :class:`ToolError` if not."""
    if not args:
        raise ToolError(f"{tool} needs a subcommand, e.g. {_example(rules)}")
    sub = args[0]
    if sub.startswith("-"):
        raise ToolError(
            f"{tool} does not accept git options before the subcommand ({sub!r}); "
            "options like -c, -C and --git-dir are refused. Start args with the subcommand "
            "and use cwd to choose the repository."
        )
    rule = rules.get(sub)
    if rule is None:
        raise ToolError(_unknown(sub, rules, tool))
    rest = list(args[1:])
    for word in args:
        if "\0" in word:
            raise ToolError(f"{tool}: arguments cannot contain NUL bytes")
    if rule.actions:
        first = rest[0] if rest else None
        bare = first is None or first.startswith("-")
        if (bare and not rule.bare_ok) or (not bare and first not in rule.actions):
            raise ToolError(
                f"{tool} runs git {sub} only as: {', '.join(rule.actions)} "
                f"(e.g. [{sub!r}, {rule.actions[0]!r}])"
            )
    paths = _scan(sub, rest, rule, tool)
    return Checked(sub, (sub, *rule.inject, *rest), tuple(paths))


def _scan(sub: str, rest: list[str], rule: Rule, tool: str) -> list[str]:
    refused_long = GLOBAL_REFUSED + rule.refused
    paths: list[str] = []
    options_done = False
    skip_value = False
    expect_strategy = False
    for word in rest:
        if _TRANSPORT.match(word):
            raise ToolError(
                f"{tool}: {word.split('::', 1)[0]}:: transport addresses are refused; "
                "git tools never talk to remotes"
            )
        if expect_strategy:
            _check_strategy(word, tool)
            expect_strategy = False
            continue
        if skip_value:
            skip_value = False
            continue
        if options_done or not word.startswith("-") or word == "-":
            if _is_outside_path(word):
                paths.append(word)
            continue
        if word in ("--", "--end-of-options"):
            options_done = True
            continue
        if word.startswith("--"):
            name, eq, value = word.partition("=")
            _check_long(name, refused_long, rule, sub, tool)
            if rule.strategies and _abbreviates(name, "--strategy"):
                if eq:
                    _check_strategy(value, tool)
                else:
                    expect_strategy = True
            continue
        # A short-option cluster: letters up to the first one that takes a value.
        for index, letter in enumerate(word[1:], start=1):
            if letter in rule.refused_short:
                raise ToolError(_refusal(f"-{letter}", sub, rule, tool))
            if letter in rule.values:
                attached = word[index + 1 :]
                if rule.strategies and letter == "s":
                    if attached:
                        _check_strategy(attached, tool)
                    else:
                        expect_strategy = True
                elif not attached:
                    skip_value = True
                break
    return paths


def _check_long(name: str, refused: tuple[str, ...], rule: Rule, sub: str, tool: str) -> None:
    for option in refused:
        if _abbreviates(name, option):
            raise ToolError(_refusal(option, sub, rule, tool))


def _abbreviates(given: str, option: str) -> bool:
    """*given* is *option* or an abbreviation git would expand to it (``--out``)."""
    return given == option or (len(given) > 2 and option.startswith(given))


def _check_strategy(name: str, tool: str) -> None:
    if name not in MERGE_STRATEGIES:
        raise ToolError(
            f"{tool}: merge strategy {name!r} is refused (a custom strategy runs a program); "
            f"use one of {', '.join(sorted(MERGE_STRATEGIES))}"
        )


def _is_outside_path(word: str) -> bool:
    if word.startswith(("/", "~")):
        return True
    return ".." in word.split("/")


def _refusal(option: str, sub: str, rule: Rule, tool: str) -> str:
    hint = rule.hint or (
        "it can run programs or touch files outside the repository; do without it, or ask "
        "the owner to run that command themselves"
    )
    return f"{tool}: option {option} is not allowed with git {sub} ({hint})"


def _unknown(sub: str, rules: dict[str, Rule], tool: str) -> str:
    names = ", ".join(sorted(rules))
    extra = ""
    if sub in ("push", "fetch", "pull", "clone", "remote", "ls-remote", "submodule"):
        extra = " Git tools never talk to remotes or change them; the owner runs those."
    elif sub in ("config", "worktree", "filter-branch", "bisect", "difftool", "mergetool"):
        extra = " It can run programs or change git configuration; the owner runs it."
    elif sub in WRITE_RULES and rules is READ_RULES:
        extra = " It changes the repository: use git_write."
    return f"{tool} does not run 'git {sub}'.{extra} Allowed subcommands: {names}."


def _example(rules: dict[str, Rule]) -> str:
    return '["status"]' if "status" in rules else '["commit", "-m", "message"]'
