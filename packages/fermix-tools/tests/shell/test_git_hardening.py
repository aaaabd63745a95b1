"""git must not run repository-chosen programs or read outside the sandbox.

Each case executed a marker command or read outside the roots before. They run with
confinement off, so the git layer itself is what holds (the fallback when bubblewrap is
missing); one case runs confined as well.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from fermix_core.sandbox.confine import probe
from fermix_core.tool import build_tool
from fermix_tools.shell.plugin import GIT_READ, GIT_WRITE

from .test_git import git, make_repo

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed"),
]


@pytest.fixture(params=["off", "auto"])
def confinement(request) -> str:
    if request.param == "auto" and not probe().available:
        pytest.skip(f"confinement cannot run here: {probe().detail}")
    return request.param


@pytest.fixture
def kit(tmp_path, sandbox_kit, confinement):
    build_policy, make_ctx = sandbox_kit
    policy = build_policy(tmp_path, confinement=confinement)
    repo = make_repo(policy.workspace / "repo")
    return policy, repo, make_ctx(policy, repo)


@pytest.fixture
def gread():
    return build_tool(GIT_READ)


@pytest.fixture
def gwrite():
    return build_tool(GIT_WRITE)


def marker_command(marker: Path) -> str:
    return f"touch {marker}; echo key::ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFake"


async def test_ssh_default_key_command_never_runs_on_commit(gwrite, kit) -> None:
    _policy, repo, ctx = kit
    marker = repo.parent / "signed"
    git(repo, "config", "gpg.format", "ssh")
    git(repo, "config", "commit.gpgSign", "true")
    git(repo, "config", "gpg.ssh.defaultKeyCommand", marker_command(marker))
    (repo / "n.txt").write_text("n\n")
    await gwrite.invoke({"args": ["add", "n.txt"]}, ctx)
    out = await gwrite.invoke({"args": ["commit", "-m", "n"]}, ctx)
    assert out.is_error and "gpg.format" in out.text  # off the repository allowlist
    assert not marker.exists()


async def test_global_signing_config_is_pinned_off(gwrite, kit) -> None:
    """The owner's ~/.gitconfig asks for signing with a key command: commits stay unsigned."""
    policy, repo, ctx = kit
    marker = repo.parent / "signed-global"
    (policy.os_home / ".gitconfig").write_text(
        "[gpg]\n\tformat = ssh\n[commit]\n\tgpgSign = true\n"
        f'[gpg "ssh"]\n\tdefaultKeyCommand = "{marker_command(marker)}"\n'
    )
    (repo / "g.txt").write_text("g\n")
    await gwrite.invoke({"args": ["add", "g.txt"]}, ctx)
    out = await gwrite.invoke({"args": ["commit", "-m", "g"]}, ctx)
    assert not out.is_error, out.text
    assert not marker.exists()


async def test_trailer_commands_never_run(gwrite, kit) -> None:
    policy, repo, ctx = kit
    marker = repo.parent / "trailer-ran"
    git(repo, "config", "trailer.sign.cmd", f"touch {marker}; echo")
    (repo / "t.txt").write_text("t\n")
    await gwrite.invoke({"args": ["add", "t.txt"]}, ctx)
    out = await gwrite.invoke({"args": ["commit", "-m", "t", "--trailer", "sign=me"]}, ctx)
    assert out.is_error and "trailer.sign.cmd" in out.text
    assert not marker.exists()
    # The same key in the owner's global config is refused too: no pin can name it.
    git(repo, "config", "--unset", "trailer.sign.cmd")
    assert not (await gwrite.invoke({"args": ["add", "t.txt"]}, ctx)).is_error
    (policy.os_home / ".gitconfig").write_text(f'[trailer "x"]\n\tcommand = touch {marker}\n')
    out = await gwrite.invoke({"args": ["commit", "-m", "t", "--trailer", "x=1"]}, ctx)
    if policy.confinement == "off":
        assert out.is_error and "trailer.x.command" in out.text
    # Confined, this test's home lies under the private /tmp: git never sees the file.
    assert not marker.exists()


async def test_a_submodules_own_filter_never_runs_on_status(gread, kit, tmp_path) -> None:
    policy, repo, ctx = kit
    marker = repo.parent / "submodule-filter"
    sub = make_repo(policy.workspace / "subsrc")
    git(repo, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(sub), "sub")
    git(repo, "commit", "-q", "-m", "add sub")
    module_git = repo / ".git" / "modules" / "sub"
    git(module_git, "config", "filter.evil.clean", f"touch {marker}; cat")
    (repo / "sub" / ".gitattributes").write_text("* filter=evil\n")
    (repo / "sub" / "README.md").write_text("# REPO\n")  # same size: git must filter to compare
    out = await gread.invoke({"args": ["status"]}, ctx)
    assert not out.is_error, out.text
    out = await gread.invoke({"args": ["diff"]}, ctx)
    assert not out.is_error, out.text
    assert not marker.exists()


async def test_alternates_outside_the_roots_are_refused(gread, kit, tmp_path) -> None:
    _policy, repo, ctx = kit
    outside = make_repo(tmp_path / "outside-repo")
    info = repo / ".git" / "objects" / "info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "alternates").write_text(f"{outside / '.git' / 'objects'}\n")
    out = await gread.invoke({"args": ["log", "--all", "--oneline"]}, ctx)
    assert out.is_error and "alternate object store" in out.text
    assert "outside the sandbox" in out.text


async def test_a_commondir_outside_the_roots_is_refused(gread, kit, tmp_path) -> None:
    """A linked work tree whose git directory borrows refs and objects from outside."""
    policy, _repo, ctx = kit
    outside = make_repo(tmp_path / "outside-common")
    linked = policy.workspace / "linked"
    linked.mkdir()
    gitdir = policy.workspace / "linked-gitdir"
    gitdir.mkdir()
    (gitdir / "commondir").write_text(f"{outside / '.git'}\n")
    (gitdir / "HEAD").write_text("ref: refs/heads/main\n")
    (gitdir / "gitdir").write_text(f"{linked / '.git'}\n")
    (linked / ".git").write_text(f"gitdir: {gitdir}\n")
    out = await gread.invoke({"args": ["log", "--oneline"], "cwd": str(linked)}, ctx)
    assert out.is_error
    assert "initial" not in out.text
    if policy.confinement == "off":
        assert "common git directory" in out.text and "outside the sandbox" in out.text


async def test_a_dotfiles_repository_never_shows_protected_files(
    gread, sandbox_kit, tmp_path, confinement
) -> None:
    """Open mode: ~ is a root, and a repository at ~ tracks ~/.ssh/id_rsa."""
    build_policy, make_ctx = sandbox_kit
    policy = build_policy(tmp_path, mode="open", confinement=confinement)
    home = policy.os_home
    git(home, "init", "-q")
    git(home, "config", "user.name", "x")
    git(home, "config", "user.email", "x@example.invalid")
    git(home, "add", "-f", ".ssh/id_rsa")
    git(home, "commit", "-q", "-m", "dotfiles")
    ctx = make_ctx(policy, home)
    for args in (["show", "HEAD:.ssh/id_rsa"], ["grep", "-I", "PRIVATE", "HEAD"]):
        out = await gread.invoke({"args": args}, ctx)
        assert out.is_error and "protected" in out.text, out.text
        assert "PRIVATE KEY" not in out.text
