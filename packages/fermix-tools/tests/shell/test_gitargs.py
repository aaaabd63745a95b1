"""Argument checks for the git tools: pure, no repository needed."""

from __future__ import annotations

import pytest
from fermix_core.tool import ToolError
from fermix_tools.shell.git import risky_keys
from fermix_tools.shell.gitargs import READ_RULES, WRITE_RULES, check


def read(*args: str):
    return check(list(args), READ_RULES, "git_read")


def write(*args: str):
    return check(list(args), WRITE_RULES, "git_write")


@pytest.mark.parametrize(
    "args",
    [
        ["status", "--short"],
        ["log", "--oneline", "-n", "5"],
        ["log", "-n5", "--stat", "--", "src/app.py"],
        ["diff", "HEAD~1..HEAD", "--stat"],
        ["show", "HEAD:README.md"],
        ["branch", "-a", "-v"],
        ["tag"],
        ["stash", "list"],
        ["reflog"],
        ["reflog", "-n", "3"],
        ["grep", "-n", "-e", "--output", "src"],
        ["blame", "-L", "1,5", "app.py"],
        ["log", "--exit-code"],
        ["log", "--no-ext-diff"],
    ],
)
def test_read_accepts_ordinary_reads(args) -> None:
    checked = read(*args)
    assert checked.subcommand == args[0]
    assert checked.argv[0] == args[0]


def test_injected_safety_options() -> None:
    assert read("diff").argv == ("diff", "--no-ext-diff", "--no-textconv")
    assert read("branch", "newname").argv == ("branch", "--list", "newname")
    assert read("blame", "x").argv[:2] == ("blame", "--no-textconv")


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["push"], "never talk to remotes"),
        (["fetch", "origin"], "never talk to remotes"),
        (["clone", "ext::sh -c touch% /tmp/pwned", "x"], "never talk to remotes"),
        (["remote", "add", "x", "https://example.com"], "never talk to remotes"),
        (["config", "core.pager", "sh -c evil"], "run programs"),
        (["-c", "core.pager=touch /tmp/x", "log"], "before the subcommand"),
        (["-C", "/etc", "status"], "before the subcommand"),
        (["--git-dir=/root/.git", "log"], "before the subcommand"),
        (["commit", "-m", "x"], "use git_write"),
        (["diff", "--no-index", "/etc/passwd", "/dev/null"], "--no-index"),
        (["diff", "--no-ind", "/etc/passwd", "/dev/null"], "--no-index"),
        (["log", "-p", "--output=/tmp/leak"], "--output"),
        (["log", "--out=/tmp/leak"], "--output"),
        (["diff", "--ext-diff"], "--ext-diff"),
        (["show", "--textconv", "HEAD"], "--textconv"),
        (["diff", "-O/etc/shadow"], "-O"),
        (["grep", "-O", "needle"], "-O"),
        (["grep", "-iO", "needle"], "-O"),
        (["grep", "--open-files-in-pager=vim", "x"], "--open-files-in-pager"),
        (["grep", "-f", "/home/u/.ssh/id_rsa"], "-f"),
        (["blame", "--contents", "/etc/shadow", "x"], "--contents"),
        (["branch", "-D", "main"], "only lists branches"),
        (["branch", "--set-upstream-to=origin/x"], "only lists branches"),
        (["tag", "-d", "v1"], "only lists tags"),
        (["stash"], "only as: list, show"),
        (["stash", "pop"], "only as: list, show"),
        (["reflog", "expire", "--all"], "only as: show"),
        (["cat-file", "--filters", "HEAD:x"], "--filters"),
    ],
)
def test_read_refusals(args, needle) -> None:
    with pytest.raises(ToolError) as caught:
        read(*args)
    assert needle in str(caught.value)


@pytest.mark.parametrize(
    "args",
    [
        ["add", "-A"],
        ["commit", "-m", "fix: -p and -F in a message are fine"],
        ["commit", "-am", "msg"],
        ["commit", "-mFix"],
        ["checkout", "-b", "feature/x"],
        ["switch", "-c", "topic"],
        ["stash"],
        ["stash", "-m", "wip"],
        ["stash", "pop"],
        ["merge", "--no-ff", "topic"],
        ["merge", "-s", "ours", "topic"],
        ["merge", "--strategy=recursive", "-X", "theirs", "topic"],
        ["rebase", "-i", "main"],
        ["cherry-pick", "-x", "abc123"],
        ["reset", "--hard", "HEAD~1"],
        ["branch", "-D", "old"],
        ["tag", "-a", "v1", "-m", "release"],
        ["init"],
    ],
)
def test_write_accepts_ordinary_changes(args) -> None:
    assert write(*args).subcommand == args[0]


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["push", "origin", "main"], "never talk to remotes"),
        (["push", "--force"], "never talk to remotes"),
        (["pull"], "never talk to remotes"),
        (["remote", "set-url", "origin", "ext::sh"], "never talk to remotes"),
        (["submodule", "update", "--init"], "never talk to remotes"),
        (["config", "alias.x", "!sh"], "run programs"),
        (["worktree", "add", "/tmp/x"], "run programs"),
        (["rebase", "--exec", "touch /tmp/pwn", "main"], "--exec"),
        (["rebase", "-x", "touch /tmp/pwn", "main"], "-x"),
        (["rebase", "-ix", "make", "main"], "-x"),
        (["merge", "-s", "evil", "topic"], "merge strategy 'evil'"),
        (["merge", "-sevil", "topic"], "merge strategy 'evil'"),
        (["merge", "--strategy", "evil", "topic"], "merge strategy 'evil'"),
        (["cherry-pick", "--strat=evil", "x"], "merge strategy 'evil'"),
        (["commit", "-F", "/home/u/.ssh/id_rsa"], "-F"),
        (["commit", "--file=/etc/shadow"], "--file"),
        (["commit", "-t", "/etc/motd"], "-t"),
        (["add", "-p"], "interactive"),
        (["add", "--interactive"], "interactive"),
        (["init", "--template=/tmp/evil-hooks"], "--template"),
        (["init", "--separate-git-dir", "/tmp/x"], "--separate-git-dir"),
        (["apply", "--unsafe-paths", "p.diff"], "--unsafe-paths"),
        (["checkout", "--pathspec-from-file=/etc/passwd"], "--pathspec-from-file"),
        (["fetch", "ext::sh -c 'touch /tmp/x'"], "never talk to remotes"),
        (["merge", "ext::sh -c id"], "transport"),
        (["add", "fd::3"], "transport"),
        (["stash", "show", "-p"], "interactive"),
    ],
)
def test_write_refusals(args, needle) -> None:
    with pytest.raises(ToolError) as caught:
        write(*args)
    assert needle in str(caught.value)


def test_empty_and_nul_arguments() -> None:
    with pytest.raises(ToolError, match="needs a subcommand"):
        read()
    with pytest.raises(ToolError, match="NUL"):
        read("log", "a\0b")


def test_paths_leaving_the_directory_are_reported() -> None:
    checked = write("add", "src/a.py", "../../.ssh/id_rsa", "/etc/passwd", "HEAD~1", "a..b")
    assert checked.path_args == ("../../.ssh/id_rsa", "/etc/passwd")
    after_dashdash = read("log", "--", "../x")
    assert after_dashdash.path_args == ("../x",)


def test_risky_repository_config_is_found() -> None:
    listing = "\0".join(
        [
            "global",
            "filter.lfs.clean\ngit-lfs clean -- %f",
            "local",
            "core.bare\nfalse",
            "local",
            "filter.x.smudge\nsh -c evil",
            "local",
            "diff.pdf.textconv\npdftotext",
            "worktree",
            "merge.ours.driver\ntrue",
            "command",
            "core.hookspath\n/dev/null",
            "local",
            "user.name\nDev",
            "local",
            "gpg.ssh.program\n/tmp/sign",  # pinned to false on the command line: harmless
            "local",
            "trailer.sign.cmd\ntouch /tmp/x",
            "local",
            "core.worktree\n/elsewhere",
            "local",
            "include.path\n/elsewhere/cfg",
            "global",
            "trailer.x.command\nevil",
            "global",
            "alias.st\nstatus",
            "",
        ]
    )
    assert risky_keys(listing) == [
        "filter.x.smudge",
        "diff.pdf.textconv",
        "merge.ours.driver",
        "trailer.sign.cmd",
        "core.worktree",
        "include.path",
        "trailer.x.command",
    ]
