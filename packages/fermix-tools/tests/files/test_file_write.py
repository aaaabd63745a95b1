from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from fermix_core.testing import ToolContract
from fermix_core.tool import build_tool
from fermix_tools.files.plugin import FILE_EDIT, FILE_WRITE

pytestmark = pytest.mark.anyio


class _Kit:
    @pytest.fixture(autouse=True)
    def _kit(self, sandbox_kit):
        self.build_policy, self.make_ctx = sandbox_kit


class TestFileWriteContract(_Kit, ToolContract):
    valid_args = {"path": "out/new.txt", "content": "hi\n"}
    invalid_args = {"path": "x.txt"}
    invalid_field = "content"

    def make_tool(self):
        return build_tool(FILE_WRITE)

    def make_context(self, tmp_path: Path):
        return self.make_ctx(self.build_policy(tmp_path))


class TestFileEditContract(_Kit, ToolContract):
    valid_args = {"path": "e.txt", "old": "alpha", "new": "beta"}
    invalid_args = {"path": "e.txt", "old": "alpha", "new": "beta", "count": 0}
    invalid_field = "count"

    def make_tool(self):
        return build_tool(FILE_EDIT)

    def make_context(self, tmp_path: Path):
        policy = self.build_policy(tmp_path)
        (policy.workspace / "e.txt").write_text("alpha\n")
        return self.make_ctx(policy)


@pytest.fixture
def write():
    return build_tool(FILE_WRITE)


@pytest.fixture
def edit():
    return build_tool(FILE_EDIT)


def _temp_leftovers(directory: Path) -> list[str]:
    return [p.name for p in directory.iterdir() if p.name.endswith(".tmp")]


# --------------------------------------------------------------------------- file_write


async def test_creates_file_and_parents(write, ctx, workspace) -> None:
    out = await write.invoke({"path": "a/b/c.txt", "content": "x\ny\n"}, ctx)
    assert not out.is_error, out.text
    target = workspace / "a" / "b" / "c.txt"
    assert target.read_text() == "x\ny\n"
    assert out.data == {"path": str(target), "bytes": 4, "created": True}
    assert "Created" in out.text and "2 lines" in out.text
    assert stat.S_IMODE(target.stat().st_mode) == 0o644


async def test_refuses_to_overwrite_unless_asked(write, ctx, workspace) -> None:
    target = workspace / "keep.txt"
    target.write_text("precious")
    target.chmod(0o755)
    out = await write.invoke({"path": "keep.txt", "content": "new"}, ctx)
    assert out.is_error and "overwrite=true" in out.text
    assert target.read_text() == "precious"
    again = await write.invoke({"path": "keep.txt", "content": "new", "overwrite": True}, ctx)
    assert not again.is_error and "Replaced" in again.text
    assert target.read_text() == "new"
    assert stat.S_IMODE(target.stat().st_mode) == 0o755, "an existing file keeps its mode"
    assert _temp_leftovers(workspace) == []


async def test_directory_and_file_parent_are_refused(write, ctx, workspace) -> None:
    (workspace / "d").mkdir()
    (workspace / "f").write_text("file")
    out = await write.invoke({"path": "d", "content": "x", "overwrite": True}, ctx)
    assert out.is_error and "is a directory" in out.text
    nested = await write.invoke({"path": "f/child.txt", "content": "x"}, ctx)
    assert nested.is_error and "not a directory" in nested.text
    assert (workspace / "f").read_text() == "file"


async def test_write_through_symlink_replaces_the_target(write, ctx, workspace) -> None:
    (workspace / "real.txt").write_text("old")
    (workspace / "link.txt").symlink_to(workspace / "real.txt")
    out = await write.invoke({"path": "link.txt", "content": "new", "overwrite": True}, ctx)
    assert not out.is_error, out.text
    assert (workspace / "link.txt").is_symlink()
    assert (workspace / "real.txt").read_text() == "new"


async def test_write_outside_and_into_protected_is_refused(write, ctx, os_home) -> None:
    for path in ["../../escape.txt", str(os_home / ".ssh" / "authorized_keys"), "/etc/x.conf"]:
        out = await write.invoke({"path": path, "content": "ssh-ed25519 AAAA attacker"}, ctx)
        assert out.is_error, path
    assert not (os_home / "escape.txt").exists()
    assert not (os_home / ".ssh" / "authorized_keys").exists()


# --------------------------------------------------------------------------- file_edit


async def test_edit_replaces_once_and_shows_the_lines(edit, ctx, workspace) -> None:
    target = workspace / "m.py"
    target.write_text("def f():\n    return 1\n\n\ndef g():\n    return 2\n")
    target.chmod(0o700)
    out = await edit.invoke({"path": "m.py", "old": "return 1", "new": "return 10"}, ctx)
    assert not out.is_error, out.text
    assert target.read_text().startswith("def f():\n    return 10\n")
    assert "first at line 2" in out.text and "     2\t    return 10" in out.text
    assert stat.S_IMODE(target.stat().st_mode) == 0o700


async def test_edit_ambiguous_lists_lines_and_changes_nothing(edit, ctx, workspace) -> None:
    target = workspace / "dup.txt"
    original = "x = 1\ny = 2\nx = 1\n"
    target.write_text(original)
    out = await edit.invoke({"path": "dup.txt", "old": "x = 1", "new": "x = 3"}, ctx)
    assert out.is_error
    assert "occurs 2 times" in out.text and "lines 1, 3" in out.text and "count=2" in out.text
    assert target.read_text() == original
    both = await edit.invoke({"path": "dup.txt", "old": "x = 1", "new": "x = 3", "count": 2}, ctx)
    assert not both.is_error and target.read_text() == "x = 3\ny = 2\nx = 3\n"


async def test_edit_count_larger_than_found(edit, ctx, workspace) -> None:
    (workspace / "one.txt").write_text("a b a\n")
    out = await edit.invoke({"path": "one.txt", "old": "a", "new": "c", "count": 3}, ctx)
    assert out.is_error and "occurs 2 times" in out.text


@pytest.mark.parametrize(
    ("content", "old", "hint"),
    [
        ("if x:\n        pass\n", "if x:\n    pass", "whitespace"),
        ("Hello World\n", "hello world", "capitalisation"),
        ("a\r\nb\r\n", "a\nb", "CRLF"),
        ("abc\n", "zzz", "copy the exact text"),
    ],
)
async def test_edit_missing_old_explains(edit, ctx, workspace, content, old, hint) -> None:
    target = workspace / "h.txt"
    target.write_bytes(content.encode())
    out = await edit.invoke({"path": "h.txt", "old": old, "new": "Q"}, ctx)
    assert out.is_error and "not found" in out.text and hint in out.text
    assert target.read_bytes() == content.encode()


async def test_edit_refuses_noop_binary_and_missing(edit, ctx, workspace) -> None:
    (workspace / "t.txt").write_text("same")
    noop = await edit.invoke({"path": "t.txt", "old": "same", "new": "same"}, ctx)
    assert noop.is_error and "identical" in noop.text
    (workspace / "b.bin").write_bytes(b"abc\0def")
    binary = await edit.invoke({"path": "b.bin", "old": "abc", "new": "x"}, ctx)
    assert binary.is_error and "not a text file" in binary.text
    assert (workspace / "b.bin").read_bytes() == b"abc\0def"
    missing = await edit.invoke({"path": "gone.txt", "old": "a", "new": "b"}, ctx)
    assert missing.is_error and "does not exist" in missing.text


async def test_edit_via_symlink_into_protected_is_refused(edit, ctx, workspace, os_home) -> None:
    key = os_home / ".ssh" / "id_rsa"
    before = key.read_bytes()
    (workspace / "innocent.txt").symlink_to(key)
    out = await edit.invoke({"path": "innocent.txt", "old": "secret", "new": "owned"}, ctx)
    assert out.is_error
    assert "secret" not in out.text
    assert key.read_bytes() == before
    assert os.listdir(key.parent) == ["id_rsa"]
