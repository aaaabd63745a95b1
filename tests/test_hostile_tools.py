"""The hostile corpus (``tests/hostile/files/``) against the file, search, shell and git tools.

Each case runs against the real :class:`~fermix_core.sandbox.SandboxPolicy` in ``strict``
mode over a scratch OS home that holds a private key, and must end in a tool *error output*
(never an exception), with the key's contents absent from the output and the whole
scratch tree — every file's bytes, every directory's listing — exactly as it was.

Binary files and oversized inputs are generated here at test time; the repository keeps only
the tiny fixtures beside the corpus.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from fermix_core.sandbox import SandboxPolicy
from fermix_core.tool import ToolContext, Trust, build_tool
from fermix_tools.files.plugin import (
    CONTENT_SEARCH,
    FILE_EDIT,
    FILE_READ,
    FILE_WRITE,
    GLOB_SEARCH,
)
from fermix_tools.shell.plugin import GIT_READ, GIT_WRITE, SHELL

pytestmark = pytest.mark.anyio

CORPUS = Path(__file__).parent / "hostile" / "files"
SECRET = "secret-key-material-7f3a"
KEY_TEXT = f"-----BEGIN OPENSSH PRIVATE KEY-----\n{SECRET}\n-----END OPENSSH PRIVATE KEY-----\n"
HAS_GIT = shutil.which("git") is not None


def _lines(name: str) -> list[str]:
    out = []
    for line in (CORPUS / name).read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            out.append(line)
    return out


PATHS = _lines("paths.txt")
LINKS = [tuple(part.strip() for part in line.split(" -> ", 1)) for line in _lines("symlinks.txt")]
GIT_CASES = [
    (line.split(" ", 1)[0], json.loads(line.split(" ", 1)[1])) for line in _lines("git_args.txt")
]
BINARY_FIXTURES = ["tiny.png", "latin1.txt", "utf16le-bom.txt", "truncated-utf8.txt"]


@dataclass
class _Home:
    path: Path


@dataclass
class Sandbox:
    root: Path
    policy: SandboxPolicy
    ctx: ToolContext

    @property
    def home(self) -> Path:
        return self.policy.os_home

    @property
    def workspace(self) -> Path:
        return self.policy.workspace

    @property
    def marker(self) -> Path:
        return self.root / "MARKER-program-ran"

    def fill(self, text: str) -> str:
        return (
            text.replace("{home}", str(self.home))
            .replace("{fermix}", str(self.policy.fermix_home))
            .replace("{workspace}", str(self.workspace))
            .replace("{marker}", str(self.marker))
            .replace("{long}", "a/" * 2500)
            .replace("\\0", "\0")
        )

    def snapshot(self) -> dict[str, Any]:
        """Every entry under the scratch root: type, bytes (hashed) or listing, link target."""
        state: dict[str, Any] = {}
        for current, dirs, files in os.walk(self.root, followlinks=False):
            base = Path(current)
            state[str(base)] = ("dir", sorted(dirs + files))
            for name in files + dirs:
                path = base / name
                if path.is_symlink():
                    state[str(path)] = ("link", os.readlink(path))
                elif path.is_file():
                    digest = hashlib.sha256(path.read_bytes()).hexdigest()
                    state[str(path)] = ("file", digest, path.stat().st_mode)
        return state


def git(cwd: Path, *args: str) -> None:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(cwd), "GIT_CONFIG_NOSYSTEM": "1"}
    subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, check=True)


@pytest.fixture
def box(tmp_path: Path) -> Sandbox:
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text(KEY_TEXT)
    (home / ".ssh" / "authorized_keys").write_text("ssh-ed25519 AAAA owner\n")
    (home / ".bashrc").write_text("# owner's shell\n")
    (home / "Documents").mkdir()
    (home / "Documents" / "diary.txt").write_text(f"dear diary {SECRET}\n")
    fermix = home / ".fermix"
    (fermix / "workspace").mkdir(parents=True)
    (fermix / "config.toml").write_text("[sandbox]\nmode = 'strict'\n")
    (fermix / "auth.json").write_text('{"token": "' + SECRET + '"}')
    policy = SandboxPolicy(
        mode="strict",
        os_home=home,
        fermix_home=fermix,
        workspace=fermix / "workspace",
        environ={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"},
    )
    (policy.workspace / "README.md").write_text("# workspace\n")
    ctx = ToolContext(
        trust=Trust.OPERATOR,
        cwd=policy.workspace,
        home=_Home(fermix),
        session_id="hostile",
        attended=True,
        local=True,
        services={"sandbox": policy},
    )
    return Sandbox(tmp_path, policy, ctx)


def assert_clean(box: Sandbox, out: Any, before: dict[str, Any]) -> None:
    assert SECRET not in out.text
    assert "PRIVATE KEY" not in out.text
    assert not box.marker.exists()
    assert box.snapshot() == before, "the scratch tree changed"


def test_the_corpus_is_substantial() -> None:
    assert len(PATHS) >= 50
    assert len(LINKS) >= 12
    assert len(GIT_CASES) >= 60


# --------------------------------------------------------------------------- paths


def _path_calls(path: str) -> list[tuple[Any, dict[str, Any]]]:
    calls = [
        (FILE_READ, {"path": path}),
        (FILE_READ, {"path": path, "unit": "bytes"}),
        (FILE_WRITE, {"path": path, "content": "pwned", "overwrite": True}),
        (FILE_EDIT, {"path": path, "old": SECRET, "new": "pwned"}),
        (GLOB_SEARCH, {"pattern": "*", "root": path}),
        (CONTENT_SEARCH, {"pattern": "PRIVATE|secret", "root": path}),
        (SHELL, {"command": "echo planted > planted.txt; cat id_rsa", "cwd": path}),
    ]
    if HAS_GIT:
        calls += [
            (GIT_READ, {"args": ["status"], "cwd": path}),
            (GIT_WRITE, {"args": ["init"], "cwd": path}),
        ]
    return calls


@pytest.mark.parametrize("raw", PATHS)
async def test_hostile_paths_are_refused_by_every_tool(box: Sandbox, raw: str) -> None:
    path = box.fill(raw)
    before = box.snapshot()
    for spec, args in _path_calls(path):
        out = await build_tool(spec).invoke(args, box.ctx)
        assert out.is_error, f"{spec.name} accepted {raw!r}: {out.text[:300]}"
        assert_clean(box, out, before)


# --------------------------------------------------------------------------- symlinks


@pytest.fixture
def planted(box: Sandbox) -> Sandbox:
    for name, target in LINKS:
        (box.workspace / name).symlink_to(box.fill(target))
    return box


@pytest.mark.parametrize("name", [name for name, _ in LINKS])
async def test_symlink_escapes_are_refused(planted: Sandbox, name: str) -> None:
    before = planted.snapshot()
    for spec, args in _path_calls(name):
        out = await build_tool(spec).invoke(args, planted.ctx)
        assert out.is_error, f"{spec.name} followed {name!r}: {out.text[:300]}"
        assert_clean(planted, out, before)


async def test_searches_never_follow_planted_links(planted: Sandbox) -> None:
    before = planted.snapshot()
    listing = await build_tool(GLOB_SEARCH).invoke({"pattern": "**"}, planted.ctx)
    assert not listing.is_error
    assert listing.data["paths"] == [str(planted.workspace / "README.md")]
    assert "symlink(s) pointing outside the sandbox were skipped" in listing.text
    found = await build_tool(CONTENT_SEARCH).invoke(
        {"pattern": "PRIVATE|secret|root:"}, planted.ctx
    )
    assert not found.is_error and found.data["matches"] == []
    assert_clean(planted, found, before)


# --------------------------------------------------------------------------- git


@pytest.fixture
def repo_box(box: Sandbox) -> Sandbox:
    repo = box.workspace / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.name", "Owner")
    git(repo, "config", "user.email", "owner@example.invalid")
    (repo / "README.md").write_text("# repo\n")
    git(repo, "add", "README.md")
    git(repo, "commit", "-q", "-m", "initial")
    box.ctx.cwd = repo
    return box


@pytest.mark.skipif(not HAS_GIT, reason="git is not installed")
@pytest.mark.parametrize(("tool", "args"), GIT_CASES, ids=[" ".join(a)[:60] for _, a in GIT_CASES])
async def test_hostile_git_invocations_are_refused(repo_box: Sandbox, tool: str, args) -> None:
    spec = GIT_READ if tool == "read" else GIT_WRITE
    filled = [repo_box.fill(word) for word in args]
    before = repo_box.snapshot()
    out = await build_tool(spec).invoke({"args": filled}, repo_box.ctx)
    assert out.is_error, f"{spec.name} ran {filled}: {out.text[:300]}"
    assert_clean(repo_box, out, before)


# --------------------------------------------------------------------------- binary


def _generated_binaries(workspace: Path) -> list[Path]:
    random_blob = workspace / "random.bin"
    random_blob.write_bytes(os.urandom(1 << 20))
    late_nul = workspace / "late-nul.log"
    late_nul.write_bytes(b"plain text line\n" * 20_000 + b"\0\0\0binary tail\n")
    sqlite_like = workspace / "memory-copy.db"
    sqlite_like.write_bytes(b"SQLite format 3\0" + bytes(4080))
    return [random_blob, late_nul, sqlite_like]


async def test_binary_files_are_refused_and_untouched(box: Sandbox) -> None:
    files = _generated_binaries(box.workspace)
    for name in BINARY_FIXTURES:
        target = box.workspace / name
        shutil.copyfile(CORPUS / name, target)
        files.append(target)
    before = box.snapshot()
    read = build_tool(FILE_READ)
    edit = build_tool(FILE_EDIT)
    for path in files:
        size = path.stat().st_size
        # The late NUL sits past the sniffed head: a window that reaches it must refuse.
        offset = 19_990 if path.name == "late-nul.log" else 1
        out = await read.invoke({"path": str(path), "offset": offset}, box.ctx)
        assert out.is_error and "not a text file" in out.text, (path.name, out.text)
        assert f"{size} bytes" in out.text or "KB" in out.text or "MB" in out.text
        changed = await edit.invoke({"path": str(path), "old": "a", "new": "b"}, box.ctx)
        assert changed.is_error, path.name
    found = await build_tool(CONTENT_SEARCH).invoke({"pattern": "hello|binary|PNG"}, box.ctx)
    assert not found.is_error
    assert {Path(m["path"]).name for m in found.data["matches"]} <= {"late-nul.log"}
    assert box.snapshot() == before


# --------------------------------------------------------------------------- oversized


async def test_oversized_inputs_give_bounded_outputs(box: Sandbox) -> None:
    huge_line = box.workspace / "one-line.json"
    huge_line.write_bytes((b'{"k":"' + b"v" * (1 << 20) + b'"},') * 20)
    many_lines = box.workspace / "big.log"
    many_lines.write_bytes(b"match this line\n" * 400_000)
    for index in range(3000):
        (box.workspace / f"f{index:05}.txt").write_text("match\n")
    read = await build_tool(FILE_READ).invoke({"path": str(huge_line)}, box.ctx)
    assert not read.is_error and len(read.text) < 5_000 and "unit='bytes'" in read.text
    window = await build_tool(FILE_READ).invoke({"path": str(many_lines)}, box.ctx)
    assert len(window.text) < 80_000 and "offset=2001" in window.text
    listed = await build_tool(GLOB_SEARCH).invoke({"pattern": "*.txt"}, box.ctx)
    assert listed.data["total"] == 3000 and len(listed.data["paths"]) == 500
    hits = await build_tool(CONTENT_SEARCH).invoke({"pattern": "match"}, box.ctx)
    assert len(hits.data["matches"]) == 200 and hits.data["more"]
    assert len(hits.text) < 40_000
    flood = await build_tool(SHELL).invoke({"command": f"cat {huge_line}; yes"}, box.ctx)
    assert flood.data["truncated"] and len(flood.text) < 25_000
    assert "capture limit" in flood.text
