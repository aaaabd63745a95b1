from __future__ import annotations

import os
from pathlib import Path

import pytest
from fermix_core.testing import ToolContract
from fermix_core.tool import build_tool
from fermix_tools.files import read as read_mod
from fermix_tools.files.plugin import FILE_READ

pytestmark = pytest.mark.anyio


class TestFileReadContract(ToolContract):
    valid_args = {"path": "notes.txt"}
    invalid_args = {"path": "notes.txt", "offset": -3}
    invalid_field = "offset"

    @pytest.fixture(autouse=True)
    def _kit(self, sandbox_kit):
        self.build_policy, self.make_ctx = sandbox_kit

    def make_tool(self):
        return build_tool(FILE_READ)

    def make_context(self, tmp_path: Path):
        policy = self.build_policy(tmp_path)
        (policy.workspace / "notes.txt").write_text("hello\n")
        return self.make_ctx(policy)


@pytest.fixture
def tool():
    return build_tool(FILE_READ)


async def test_numbered_lines_and_header(tool, ctx, workspace) -> None:
    (workspace / "a.py").write_text("import os\r\n\nprint('é')\n")
    out = await tool.invoke({"path": "a.py"}, ctx)
    assert not out.is_error, out.text
    lines = out.text.splitlines()
    assert lines[0] == f"{workspace / 'a.py'} — lines 1-3 of 3"
    assert lines[1:] == ["     1\timport os", "     2\t", "     3\tprint('é')"]
    assert out.data["total_lines"] == 3


async def test_window_and_continuation_note(tool, ctx, workspace) -> None:
    (workspace / "big.txt").write_text("".join(f"line {n}\n" for n in range(1, 101)))
    out = await tool.invoke({"path": "big.txt", "offset": 10, "limit": 5}, ctx)
    assert "lines 10-14 of 100" in out.text
    assert "    14\tline 14" in out.text and "line 15" not in out.text
    assert "offset=15" in out.text
    last = await tool.invoke({"path": "big.txt", "offset": 98}, ctx)
    assert "lines 98-100 of 100" in last.text and "more lines" not in last.text


async def test_file_without_final_newline(tool, ctx, workspace) -> None:
    (workspace / "n.txt").write_text("one\ntwo")
    out = await tool.invoke({"path": "n.txt", "limit": 1}, ctx)
    assert "lines 1-1 of 2" in out.text and "offset=2" in out.text


async def test_offset_past_the_end_is_an_error_with_the_length(tool, ctx, workspace) -> None:
    (workspace / "s.txt").write_text("a\nb\n")
    out = await tool.invoke({"path": "s.txt", "offset": 3}, ctx)
    assert out.is_error and "has 2 lines" in out.text


async def test_empty_file(tool, ctx, workspace) -> None:
    (workspace / "e.txt").write_bytes(b"")
    out = await tool.invoke({"path": "e.txt"}, ctx)
    assert not out.is_error and "is empty" in out.text


async def test_limit_is_capped(tool, ctx, workspace) -> None:
    (workspace / "many.txt").write_text("x\n" * (read_mod.MAX_LINES + 50))
    out = await tool.invoke({"path": "many.txt", "limit": 10**6}, ctx)
    assert out.data["last_line"] == read_mod.MAX_LINES
    assert f"offset={read_mod.MAX_LINES + 1}" in out.text


async def test_output_budget_cuts_and_says_so(tool, ctx, workspace) -> None:
    line = "y" * 1500
    (workspace / "wide.txt").write_text(f"{line}\n" * 100)
    out = await tool.invoke({"path": "wide.txt"}, ctx)
    assert len(out.text) < read_mod.MAX_OUTPUT_CHARS + 2000
    assert "output budget reached" in out.text
    nxt = out.data["last_line"] + 1
    more = await tool.invoke({"path": "wide.txt", "offset": nxt}, ctx)
    assert f"lines {nxt}-" in more.text


async def test_huge_single_line_is_cut_and_readable_by_bytes(tool, ctx, workspace) -> None:
    """A 3 MB line without a newline costs one bounded read, not 3 MB of output."""
    (workspace / "min.js").write_text("short\n" + "ab" * 1_500_000 + "\ntail\n")
    out = await tool.invoke({"path": "min.js"}, ctx)
    assert "     3\ttail" in out.text
    assert len(out.text) < 10_000
    assert "line 2 starts at offset=6" in out.text
    chunk = await tool.invoke({"path": "min.js", "unit": "bytes", "offset": 6, "limit": 10}, ctx)
    assert chunk.text.splitlines()[1] == "ababababab"
    assert "bytes 6-15 of" in chunk.text and "offset=16" in chunk.text


async def test_byte_range_aligns_to_characters(tool, ctx, workspace) -> None:
    (workspace / "u.txt").write_text("ééé")  # six bytes, two per character
    out = await tool.invoke({"path": "u.txt", "unit": "bytes", "offset": 1, "limit": 4}, ctx)
    assert not out.is_error, out.text
    assert out.text.splitlines()[1] == "é"
    assert out.data["first_byte"] == 2 and out.data["end_byte"] == 4
    past = await tool.invoke({"path": "u.txt", "unit": "bytes", "offset": 6}, ctx)
    assert past.is_error and "6 bytes" in past.text


@pytest.mark.parametrize(
    ("payload", "why"),
    [
        (b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR" + bytes(range(256)), "NUL"),
        ("café".encode("latin-1") + b"\n", "not valid UTF-8"),
    ],
)
async def test_binary_is_refused_with_its_size(tool, ctx, workspace, payload, why) -> None:
    (workspace / "blob.bin").write_bytes(payload)
    out = await tool.invoke({"path": "blob.bin"}, ctx)
    assert out.is_error
    assert why in out.text and f"{len(payload)} bytes" in out.text
    assert "not a text file" in out.text
    ranged = await tool.invoke({"path": "blob.bin", "unit": "bytes", "offset": 0}, ctx)
    assert ranged.is_error and why in ranged.text


async def test_nul_deep_in_the_file_is_caught_in_the_window(tool, ctx, workspace) -> None:
    (workspace / "late.txt").write_bytes(b"ok\n" * 5000 + b"bad\0line\n")
    out = await tool.invoke({"path": "late.txt", "offset": 4990}, ctx)
    assert out.is_error and "NUL" in out.text


async def test_directory_missing_and_fifo(tool, ctx, workspace) -> None:
    (workspace / "sub").mkdir()
    directory = await tool.invoke({"path": "sub"}, ctx)
    assert directory.is_error and "is a directory" in directory.text
    missing = await tool.invoke({"path": "nope.txt"}, ctx)
    assert missing.is_error and "does not exist" in missing.text
    os.mkfifo(workspace / "pipe")
    fifo = await tool.invoke({"path": "pipe"}, ctx)
    assert fifo.is_error and "not a regular file" in fifo.text


async def test_outside_the_sandbox_is_refused(tool, ctx, workspace, os_home) -> None:
    (os_home / "diary.txt").write_text("private\n")
    for path in ["../../diary.txt", str(os_home / "diary.txt"), "../../.ssh/id_rsa"]:
        out = await tool.invoke({"path": path}, ctx)
        assert out.is_error, path
        assert "private" not in out.text and "PRIVATE KEY" not in out.text
