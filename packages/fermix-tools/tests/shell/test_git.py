from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from fermix_core.sandbox import run_command
from fermix_core.testing import ToolContract
from fermix_core.tool import build_tool
from fermix_tools.shell.git import git_env
from fermix_tools.shell.plugin import GIT_READ, GIT_WRITE

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed"),
]


def git(repo: Path, *args: str) -> str:
    """Set-up only: the tests' own git, with a clean environment."""
    env = {"PATH": "/usr/bin:/bin", "HOME": str(repo), "GIT_CONFIG_NOSYSTEM": "1"}
    done = subprocess.run(
        ["git", *args], cwd=repo, env=env, capture_output=True, text=True, check=True
    )
    return done.stdout


def make_repo(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q", "-b", "main")
    git(path, "config", "user.name", "Fermix Test")
    git(path, "config", "user.email", "test@example.invalid")
    (path / "README.md").write_text("# repo\n")
    git(path, "add", "README.md")
    git(path, "commit", "-q", "-m", "initial")
    return path


class _Kit:
    @pytest.fixture(autouse=True)
    def _kit(self, sandbox_kit):
        self.build_policy, self.make_ctx = sandbox_kit

    def make_context(self, tmp_path: Path):
        policy = self.build_policy(tmp_path)
        repo = make_repo(policy.workspace / "repo")
        return self.make_ctx(policy, repo)


class TestGitReadContract(_Kit, ToolContract):
    valid_args = {"args": ["status", "--short"]}
    invalid_args = {"args": []}
    invalid_field = "args"

    def make_tool(self):
        return build_tool(GIT_READ)


class TestGitWriteContract(_Kit, ToolContract):
    valid_args = {"args": ["branch", "topic"]}
    invalid_args = {"args": ["status"], "force": True}
    invalid_field = "force"

    def make_tool(self):
        return build_tool(GIT_WRITE)


@pytest.fixture
def repo(workspace: Path) -> Path:
    return make_repo(workspace / "repo")


@pytest.fixture
def rctx(policy, repo, sandbox_kit):
    _, make_ctx = sandbox_kit
    return make_ctx(policy, repo)


@pytest.fixture
def gread():
    return build_tool(GIT_READ)


@pytest.fixture
def gwrite():
    return build_tool(GIT_WRITE)


async def test_read_status_and_log(gread, rctx, repo) -> None:
    (repo / "new.txt").write_text("x\n")
    status = await gread.invoke({"args": ["status", "--short"]}, rctx)
    assert not status.is_error, status.text
    assert status.text.startswith("$ git status --short\nexit code: 0")
    assert "?? new.txt" in status.text
    log = await gread.invoke({"args": "log --oneline -n 1"}, rctx)
    assert "initial" in log.text and log.data["repository"] == str(repo)


async def test_write_add_commit_branch_stash(gwrite, gread, rctx, repo) -> None:
    (repo / "a.txt").write_text("a\n")
    assert not (await gwrite.invoke({"args": ["add", "a.txt"]}, rctx)).is_error
    commit = await gwrite.invoke({"args": ["commit", "-m", "add a"]}, rctx)
    assert not commit.is_error, commit.text
    assert git(repo, "log", "--format=%s", "-n", "1").strip() == "add a"
    branch = await gwrite.invoke({"args": ["checkout", "-b", "topic"]}, rctx)
    assert not branch.is_error, branch.text
    assert git(repo, "branch", "--show-current").strip() == "topic"
    (repo / "a.txt").write_text("changed\n")
    assert not (await gwrite.invoke({"args": ["stash"]}, rctx)).is_error
    listed = await gread.invoke({"args": ["stash", "list"]}, rctx)
    assert "stash@{0}" in listed.text


async def test_read_branch_cannot_create(gread, rctx, repo) -> None:
    out = await gread.invoke({"args": ["branch", "sneaky"]}, rctx)
    assert not out.is_error
    assert "sneaky" not in git(repo, "branch")


async def test_commit_without_message_does_not_wait_for_an_editor(gwrite, rctx, repo) -> None:
    (repo / "b.txt").write_text("b\n")
    git(repo, "add", "b.txt")
    out = await gwrite.invoke({"args": ["commit"]}, rctx)
    assert out.is_error and "exit code" in out.text
    assert "initial" in git(repo, "log", "--format=%s", "-n", "1")


async def test_git_failure_is_an_error_with_stderr(gread, rctx) -> None:
    out = await gread.invoke({"args": ["show", "no-such-rev"]}, rctx)
    assert out.is_error and "--- stderr ---" in out.text


async def test_not_a_repository(gread, ctx, workspace) -> None:
    (workspace / "plain").mkdir()
    out = await gread.invoke({"args": ["status"], "cwd": "plain"}, ctx)
    assert out.is_error and "not inside a git work tree" in out.text


async def test_init_creates_a_repository_in_the_sandbox(gwrite, ctx, workspace) -> None:
    out = await gwrite.invoke({"args": ["init", "fresh"]}, ctx)
    assert not out.is_error, out.text
    assert (workspace / "fresh" / ".git").is_dir()
    outside = await gwrite.invoke({"args": ["init", "../../../elsewhere"]}, ctx)
    assert outside.is_error
    assert not (workspace.parents[2] / "elsewhere").exists()


async def test_repository_above_the_sandbox_is_refused(gread, gwrite, policy, sandbox_kit):
    """A dotfiles repository at $HOME must not expose ~/.ssh through git."""
    _, make_ctx = sandbox_kit
    home = policy.os_home
    git(home, "init", "-q")
    git(home, "config", "user.name", "x")
    git(home, "config", "user.email", "x@example.invalid")
    git(home, "add", "-f", ".ssh/id_rsa")
    git(home, "commit", "-q", "-m", "dotfiles")
    ctx = make_ctx(policy)  # the workspace, which has no repository of its own
    shown = await gread.invoke({"args": ["show", "HEAD:.ssh/id_rsa"]}, ctx)
    # Refused by the work-tree check, or (confined, with the home under a masked /tmp)
    # git does not even see the repository above the workspace.
    assert shown.is_error
    assert "outside the sandbox" in shown.text or "not inside a git work tree" in shown.text
    assert "PRIVATE KEY" not in shown.text
    removed = await gwrite.invoke({"args": ["rm", "-q", "--cached", ".ssh/id_rsa"]}, ctx)
    assert removed.is_error
    assert ".ssh/id_rsa" in git(home, "ls-files")


async def test_paths_outside_the_repository_are_refused(gread, gwrite, rctx, workspace) -> None:
    (workspace / "loose.txt").write_text("not in the repo\n")
    add = await gwrite.invoke({"args": ["add", "../loose.txt"]}, rctx)
    assert add.is_error and "outside the repository" in add.text
    leak = await gread.invoke({"args": ["diff", "/etc/passwd", "/dev/null"]}, rctx)
    assert leak.is_error and "root:" not in leak.text


async def test_push_is_refused_and_nothing_runs(gwrite, rctx, repo, tmp_path) -> None:
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    git(repo, "remote", "add", "origin", str(remote))
    out = await gwrite.invoke({"args": ["push", "origin", "main"]}, rctx)
    assert out.is_error and "never talk to remotes" in out.text
    assert git(remote, "for-each-ref") == ""


async def test_hooks_fsmonitor_and_pager_from_repo_config_never_run(
    gread, gwrite, rctx, repo
) -> None:
    marker = repo.parent / "executed"
    hook = repo / ".git" / "hooks" / "pre-commit"
    hook.write_text(f"#!/bin/sh\ntouch {marker}\n")
    hook.chmod(0o755)
    git(repo, "config", "core.fsmonitor", f"touch {marker}; echo")
    git(repo, "config", "core.pager", f"touch {marker}; cat")
    git(repo, "config", "core.editor", f"touch {marker}; true")
    (repo / "c.txt").write_text("c\n")
    assert not (await gread.invoke({"args": ["status"]}, rctx)).is_error
    assert not (await gread.invoke({"args": ["log"]}, rctx)).is_error
    assert not (await gwrite.invoke({"args": ["add", "c.txt"]}, rctx)).is_error
    commit = await gwrite.invoke({"args": ["commit", "-m", "c"]}, rctx)
    assert not commit.is_error, commit.text
    assert not marker.exists()


@pytest.mark.parametrize(
    ("key", "value", "attributes"),
    [
        ("filter.evil.clean", "touch {marker}; cat", "* filter=evil\n"),
        ("diff.evil.textconv", "touch {marker}; cat", "* diff=evil\n"),
        ("diff.external", "touch {marker}", ""),
        ("merge.evil.driver", "touch {marker}", "* merge=evil\n"),
    ],
)
async def test_repo_config_that_runs_programs_is_refused(
    gread, gwrite, rctx, repo, key, value, attributes
) -> None:
    marker = repo.parent / "executed"
    git(repo, "config", key, value.format(marker=marker))
    if attributes:
        (repo / ".gitattributes").write_text(attributes)
    (repo / "d.txt").write_text("d\n")
    for tool, args in ((gread, ["status"]), (gread, ["diff"]), (gwrite, ["add", "."])):
        out = await tool.invoke({"args": args}, rctx)
        assert out.is_error and key in out.text and "run a program" in out.text
    assert not marker.exists()


async def test_included_config_is_checked_too(gread, rctx, repo) -> None:
    extra = repo.parent / "extra.cfg"
    extra.write_text('[filter "x"]\n\tsmudge = touch /tmp/never\n')
    git(repo, "config", "include.path", str(extra))
    out = await gread.invoke({"args": ["status"]}, rctx)
    assert out.is_error and "filter.x.smudge" in out.text


async def test_ext_transport_is_inert_under_the_pinned_environment(policy, repo) -> None:
    """Even if an ext:: URL reached git, GIT_ALLOW_PROTOCOL stops it before it runs."""
    marker = repo.parent / "ext-ran"
    env = git_env(policy, read_only=False)
    assert env["GIT_ALLOW_PROTOCOL"] == "file:https:ssh"
    assert env["GIT_CONFIG_NOSYSTEM"] == "1" and env["GIT_TERMINAL_PROMPT"] == "0"
    result = await run_command(
        ["git", "-c", "protocol.ext.allow=always", "ls-remote", f"ext::sh -c touch% {marker}"],
        cwd=repo,
        env=env,
        timeout=30,
    )
    assert result.exit_code != 0
    assert "ext" in result.stderr and "not allowed" in result.stderr
    assert not marker.exists()


async def test_ext_urls_are_refused_by_the_tool(gwrite, rctx, repo) -> None:
    marker = repo.parent / "ext-ran"
    for args in (
        ["fetch", f"ext::sh -c touch% {marker}"],
        ["merge", f"ext::sh -c touch% {marker}"],
        ["clone", f"ext::sh -c touch% {marker}", "x"],
    ):
        out = await gwrite.invoke({"args": args}, rctx)
        assert out.is_error
    assert not marker.exists()


async def test_inherited_git_variables_are_dropped(sandbox_kit, tmp_path, gread) -> None:
    build_policy, make_ctx = sandbox_kit
    first = build_policy(tmp_path)
    repo = make_repo(first.workspace / "repo")
    decoy = make_repo(tmp_path / "decoy")
    policy = build_policy(
        tmp_path,
        environ={"PATH": "/usr/bin:/bin", "GIT_DIR": str(decoy / ".git")},
        env_allow=("GIT_DIR",),
    )
    assert policy.child_env()["GIT_DIR"] == str(decoy / ".git")
    out = await gread.invoke({"args": ["rev-parse", "--show-toplevel"]}, make_ctx(policy, repo))
    assert not out.is_error, out.text
    assert str(repo) in out.text and str(decoy) not in out.text
