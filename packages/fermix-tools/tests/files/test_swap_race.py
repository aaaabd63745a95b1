"""A directory swapped for a link between the sandbox's check and the tool's I/O.

The swap happens exactly in that window here (after ``resolve``, before the open), which
is what a racing process achieved 12 times in 150 reads: the canonical path is checked
while ``d`` is a directory, then ``d`` becomes a link to ``~/.ssh``.
"""

from __future__ import annotations

import os
import shutil

import pytest
from fermix_core.fsutil import PathSwapped, atomic_write_nofollow, open_nofollow
from fermix_core.tool import ToolError
from fermix_tools.files.common import open_regular
from fermix_tools.files.read import _read_lines
from fermix_tools.files.write import _edit, _write

from ..conftest import make_ctx


@pytest.fixture
def swapped(policy):
    """``ws/d/authorized_keys`` resolved while ``d`` was a directory; then the swap."""
    ssh = policy.os_home / ".ssh"
    (ssh / "authorized_keys").write_text("ssh-ed25519 AAAA owner\n")
    folder = policy.workspace / "d"
    folder.mkdir()
    (folder / "authorized_keys").write_text("decoy\n")
    (folder / "id_rsa").write_text("decoy\n")
    ctx = make_ctx(policy)
    checked_write = policy.resolve(folder / "authorized_keys", ctx, write=True)
    checked_read = policy.resolve(folder / "id_rsa", ctx)
    shutil.rmtree(folder)
    folder.symlink_to(ssh)  # the swap
    return checked_read, checked_write, ssh


def test_a_read_through_a_swapped_directory_is_refused(swapped) -> None:
    checked_read, _write_path, _ssh = swapped
    with pytest.raises(ToolError, match="changed while it was being opened"):
        open_regular(checked_read)
    with pytest.raises(ToolError, match="changed while it was being opened"):
        _read_lines(checked_read, 0, 100)


def test_a_write_through_a_swapped_directory_is_refused(swapped) -> None:
    _read_path, checked_write, ssh = swapped
    with pytest.raises(ToolError, match="changed while it was being opened"):
        _write(checked_write, b"ssh-ed25519 AAAA attacker\n", True)
    assert (ssh / "authorized_keys").read_text() == "ssh-ed25519 AAAA owner\n"
    assert sorted(p.name for p in ssh.iterdir()) == ["authorized_keys", "id_rsa"]


def test_an_edit_through_a_swapped_directory_is_refused(swapped) -> None:
    _read_path, checked_write, ssh = swapped
    with pytest.raises(ToolError, match="changed while it was being opened"):
        _edit(checked_write, "owner", "attacker", 1)
    assert (ssh / "authorized_keys").read_text() == "ssh-ed25519 AAAA owner\n"


def test_the_no_follow_helpers(tmp_path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    with pytest.raises(PathSwapped):
        open_nofollow(tmp_path / "link" / "x", os.O_RDONLY)
    with pytest.raises(PathSwapped):
        atomic_write_nofollow(tmp_path / "link" / "new.txt", "x")
    assert not (real / "new.txt").exists()
    atomic_write_nofollow(tmp_path / "made" / "deep" / "new.txt", "ok", mode=0o640)
    made = tmp_path / "made" / "deep" / "new.txt"
    assert made.read_text() == "ok" and (made.stat().st_mode & 0o777) == 0o640
    assert [p.name for p in made.parent.iterdir()] == ["new.txt"]  # no temp file left
    (tmp_path / "file").write_text("x")
    with pytest.raises(NotADirectoryError):
        atomic_write_nofollow(tmp_path / "file" / "child", "x")
