"""The sandbox against the hostile corpus in tests/hostile/ (paths.txt, commands.txt).

Every line of the corpus is a test case. Paths are resolved on a real tree with real
symlinks planted inside the roots; commands go through the real parser in every command
profile. Besides each line's expectation, one invariant holds for every path in every
mode: either it is denied, or the canonical result is inside a root and not protected.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
from fermix_core.home import FermixHome
from fermix_core.sandbox import CommandRefused, SandboxDenied, SandboxPolicy
from fermix_core.tool import ToolContext, Trust

CORPUS = Path(__file__).parent / "hostile"
MODES = ("strict", "standard", "open")
PROFILES = ("bare", "assistant", "extended")


def corpus(name: str) -> list[tuple[str, str]]:
    cases = []
    for number, line in enumerate((CORPUS / name).read_text().splitlines(), start=1):
        if not line.strip() or line.startswith("#"):
            continue
        expect, sep, value = line.partition("\t")
        kinds = ("deny", "allow", "refuse", "profile", "readonly")
        assert sep and expect in kinds, f"{name}:{number}: {line!r}"
        cases.append((expect, value))
    return cases


PATHS = corpus("paths.txt")
COMMANDS = corpus("commands.txt")


@dataclass
class Tree:
    home: Path
    fermix: FermixHome
    workspace: Path
    project: Path
    granted: Path

    def fill(self, text: str) -> str:
        specials = {"{empty}": "", "{spaces}": "   ", "{nul}": "a\x00b", "{long}": "a/" * 2500}
        if text in specials:
            return specials[text]
        return (
            text.replace("{home}", str(self.home))
            .replace("{fermix}", str(self.fermix.path))
            .replace("{workspace}", str(self.workspace))
            .replace("{project}", str(self.project))
            .replace("{granted}", str(self.granted))
            .replace("\\n", "\n")
            .replace("\\t", "\t")
        )

    def policy(self, mode: str, profile: str = "assistant") -> SandboxPolicy:
        return SandboxPolicy(
            mode=mode,  # type: ignore[arg-type]
            os_home=self.home,
            fermix_home=self.fermix.path,
            workspace=self.workspace,
            allowed_roots=(self.granted,),
            command_profile=profile,
            environ={},
        )

    def ctx(self) -> ToolContext:
        return ToolContext(
            trust=Trust.OPERATOR, cwd=self.project, home=self.fermix, local=True, attended=True
        )


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> Tree:
    root = tmp_path_factory.mktemp("hostile")
    home = root / "home"
    fermix = FermixHome(home / ".fermix")
    fermix.ensure()
    workspace = fermix.ensure_dir("workspace")
    project = home / "code" / "app"
    (project / "src").mkdir(parents=True)
    granted = home / "granted"
    granted.mkdir()
    for secret in (".ssh/id_ed25519", ".ssh/authorized_keys", ".gnupg/pubring.kbx"):
        (home / secret).parent.mkdir(parents=True, exist_ok=True)
        (home / secret).write_text("secret\n")
    fermix.config_file.write_text("")
    (workspace / "ssh-link").symlink_to(home / ".ssh")
    (workspace / "config-link").symlink_to(fermix.config_file)
    (workspace / "up").symlink_to(home)
    (workspace / "dangling").symlink_to(home / ".aws" / "credentials")
    (workspace / "loop-a").symlink_to(workspace / "loop-b")
    (workspace / "loop-b").symlink_to(workspace / "loop-a")
    (granted / "keys").symlink_to(home / ".ssh")
    (project / "escape").symlink_to(home / ".gnupg")
    # Scripts written with file_write, then run: checked by their contents.
    (project / "wipe.sh").write_text("#!/bin/sh\necho cleaning\nrm -rf ~\n")
    (project / "wipe.sh").chmod(0o755)
    (project / "wipe.py").write_text("import shutil, os\nshutil.rmtree(os.path.expanduser('~'))\n")
    (project / "notes.txt").write_text("notes\n")
    return Tree(home, fermix, workspace, project, granted)


def test_the_corpus_is_substantial() -> None:
    assert sum(1 for e, _ in PATHS if e == "deny") >= 90
    assert sum(1 for e, _ in COMMANDS if e == "refuse") >= 200
    assert any(e == "allow" for e, _ in PATHS) and any(e == "allow" for e, _ in COMMANDS)


@pytest.mark.parametrize(("expect", "raw"), PATHS, ids=[p for _, p in PATHS])
def test_hostile_paths(tree: Tree, expect: str, raw: str) -> None:
    path = tree.fill(raw)
    ctx = tree.ctx()
    if expect == "readonly":  # open mode: the home is a root; these may be read, not written
        policy = tree.policy("open")
        resolved = policy.resolve(path, ctx)
        assert policy.contains(resolved, ctx)
        with pytest.raises(SandboxDenied) as caught:
            policy.resolve(path, ctx, write=True)
        assert caught.value.reason == "protected", raw
        return
    for mode in MODES:
        policy = tree.policy(mode)
        for write in (False, True):
            try:
                resolved = policy.resolve(path, ctx, write=write)
            except SandboxDenied:
                assert expect == "deny" or mode != "standard", (mode, write, raw)
                continue
            assert expect == "allow", f"{raw!r} was admitted in {mode} mode as {resolved}"
            assert policy.contains(resolved, ctx), (mode, resolved)
            assert policy.protected_reason(resolved, write=write) is None, resolved


@pytest.mark.parametrize(("expect", "raw"), COMMANDS, ids=[c for _, c in COMMANDS])
def test_hostile_commands(tree: Tree, expect: str, raw: str) -> None:
    command = tree.fill(raw)
    if expect == "refuse":
        for profile in PROFILES:
            with pytest.raises(CommandRefused) as caught:
                tree.policy("standard", profile).check_command(command, cwd=tree.project)
            assert caught.value.reason == "catastrophic", (profile, str(caught.value))
    elif expect == "profile":
        for profile in ("bare", "assistant"):
            with pytest.raises(CommandRefused) as caught:
                tree.policy("standard", profile).check_command(command, cwd=tree.project)
            assert caught.value.reason == "profile", (profile, str(caught.value))
        tree.policy("standard", "extended").check_command(command, cwd=tree.project)
    else:
        tree.policy("standard", "extended").check_command(command, cwd=tree.project)
