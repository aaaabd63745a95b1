from __future__ import annotations

import shutil
from pathlib import Path

import anyio
import pytest
from fermix_core.testing import ToolContract
from fermix_core.tool import ToolError, build_tool
from fermix_tools.files import grep, search
from fermix_tools.files.plugin import CONTENT_SEARCH, GLOB_SEARCH
from fermix_tools.files.walk import compile_glob

pytestmark = pytest.mark.anyio

HAS_RG = shutil.which("rg") is not None


class _Kit:
    @pytest.fixture(autouse=True)
    def _kit(self, sandbox_kit):
        self.build_policy, self.make_ctx = sandbox_kit

    def make_context(self, tmp_path: Path):
        policy = self.build_policy(tmp_path)
        (policy.workspace / "a.py").write_text("import os\n")
        return self.make_ctx(policy)


class TestGlobSearchContract(_Kit, ToolContract):
    valid_args = {"pattern": "*.py"}
    invalid_args = {"pattern": ""}
    invalid_field = "pattern"

    def make_tool(self):
        return build_tool(GLOB_SEARCH)


class TestContentSearchContract(_Kit, ToolContract):
    valid_args = {"pattern": "import", "glob": "*.py"}
    invalid_args = {"pattern": "x", "case_insensitive": "perhaps"}
    invalid_field = "case_insensitive"

    def make_tool(self):
        return build_tool(CONTENT_SEARCH)


@pytest.fixture(params=["python", "ripgrep"])
def backend(request, monkeypatch):
    """Run content tests against both backends (ripgrep only where it is installed)."""
    if request.param == "python":
        monkeypatch.setattr(grep, "find_rg", lambda: None)
    elif not HAS_RG:
        pytest.skip("ripgrep is not installed")
    return request.param


@pytest.fixture
def glob_tool():
    return build_tool(GLOB_SEARCH)


@pytest.fixture
def grep_tool():
    return build_tool(CONTENT_SEARCH)


@pytest.fixture
def tree(workspace: Path) -> Path:
    files = {
        "README.md": "# Project\nTODO: write docs\n",
        "src/app/main.py": "def main():\n    return 'hello'  # TODO\n",
        "src/app/util.py": "HELLO = 1\n",
        "src/lib.rs": "fn main() {}\n",
        "docs/guide.md": "hello guide\n",
        ".git/config": "[core]\nTODO = yes\n",
        ".hidden/notes.txt": "todo hidden\n",
    }
    for name, text in files.items():
        path = workspace / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return workspace


# --------------------------------------------------------------------------- globs


@pytest.mark.parametrize(
    ("pattern", "hits", "misses"),
    [
        ("*.py", ["a.py", "src/x/b.py"], ["a.pyc", "src/b.txt"]),
        ("src/**/*.py", ["src/a.py", "src/x/y/b.py"], ["a.py", "lib/src/a.py"]),
        ("**/test_*.py", ["test_a.py", "t/test_b.py"], ["t/atest_b.py"]),
        ("*.{md,rst}", ["a.md", "d/b.rst"], ["c.txt"]),
        ("file[0-9].txt", ["file1.txt"], ["filex.txt"]),
        ("file[!0-9].txt", ["filex.txt"], ["file1.txt"]),
        ("docs/", ["docs/a", "docs/x/y"], ["src/docs"]),
        ("./src/*.c", ["src/a.c"], ["src/x/a.c"]),
        ("a?c", ["abc", "d/abc"], ["a/c", "abbc"]),
    ],
)
def test_glob_dialect(pattern, hits, misses) -> None:
    regex = compile_glob(pattern)
    for path in hits:
        assert regex.match(path), (pattern, path)
    for path in misses:
        assert not regex.match(path), (pattern, path)


@pytest.mark.parametrize("pattern", ["/etc/*", "~/.ssh/*", "../*.py", "src/../../x", "C:\\x", " "])
def test_glob_refuses_escaping_patterns(pattern) -> None:
    with pytest.raises(ToolError):
        compile_glob(pattern)


async def test_glob_finds_files_and_skips_vcs(glob_tool, ctx, tree) -> None:
    out = await glob_tool.invoke({"pattern": "*.py"}, ctx)
    assert not out.is_error, out.text
    assert out.data["paths"] == [str(tree / "src/app/main.py"), str(tree / "src/app/util.py")]
    config = await glob_tool.invoke({"pattern": "config"}, ctx)
    assert config.data["total"] == 0, ".git internals are not listed"
    hidden = await glob_tool.invoke({"pattern": "*.txt", "root": str(tree / ".hidden")}, ctx)
    assert hidden.data["total"] == 1


async def test_glob_cap_is_announced(glob_tool, ctx, workspace) -> None:
    many = workspace / "many"
    many.mkdir()
    for n in range(search.MAX_GLOB_RESULTS + 7):
        (many / f"f{n:04}.txt").touch()
    out = await glob_tool.invoke({"pattern": "*.txt"}, ctx)
    assert len(out.data["paths"]) == search.MAX_GLOB_RESULTS
    assert out.data["total"] == search.MAX_GLOB_RESULTS + 7
    assert f"showing the first {search.MAX_GLOB_RESULTS}" in out.text


async def test_root_outside_or_not_a_directory(glob_tool, ctx, tree, os_home) -> None:
    outside = await glob_tool.invoke({"pattern": "*", "root": str(os_home)}, ctx)
    assert outside.is_error and "outside" in outside.text
    notdir = await glob_tool.invoke({"pattern": "*", "root": "README.md"}, ctx)
    assert notdir.is_error and "not a directory" in notdir.text
    missing = await glob_tool.invoke({"pattern": "*", "root": "nope"}, ctx)
    assert missing.is_error and "does not exist" in missing.text


async def test_cwd_outside_the_sandbox_falls_back_to_workspace(
    glob_tool, policy, tree, tmp_path, sandbox_kit
) -> None:
    _, make_ctx = sandbox_kit
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "secret.py").write_text("x")
    out = await glob_tool.invoke({"pattern": "*.py"}, make_ctx(policy, elsewhere))
    assert not out.is_error
    assert str(elsewhere) not in out.text and out.data["root"] == str(tree)


async def test_symlinks_out_of_the_sandbox_are_not_followed(
    glob_tool, grep_tool, ctx, workspace, os_home, backend
) -> None:
    outside = os_home / "private"
    outside.mkdir()
    (outside / "plans.md").write_text("TOP SECRET plans\n")
    (workspace / "escape_dir").symlink_to(outside)
    (workspace / "escape_file.md").symlink_to(outside / "plans.md")
    (workspace / "key").symlink_to(os_home / ".ssh" / "id_rsa")
    (workspace / "loop").symlink_to(workspace)
    (workspace / "inside.md").write_text("fine\n")
    (workspace / "alias.md").symlink_to(workspace / "inside.md")
    found = await glob_tool.invoke({"pattern": "**"}, ctx)
    assert sorted(Path(p).name for p in found.data["paths"]) == ["alias.md", "inside.md"]
    assert "symlink(s) pointing outside the sandbox were skipped" in found.text
    hits = await grep_tool.invoke({"pattern": "SECRET|PRIVATE|fine"}, ctx)
    assert "SECRET" not in hits.text and "PRIVATE" not in hits.text
    assert {Path(m["path"]).name for m in hits.data["matches"]} == {"alias.md", "inside.md"}


async def test_protected_paths_inside_a_granted_root_are_skipped(
    glob_tool, grep_tool, tmp_path, sandbox_kit, backend
) -> None:
    """``open`` mode makes the whole OS home a root; ~/.ssh and FERMIX_HOME stay out."""
    build_policy, make_ctx = sandbox_kit
    policy = build_policy(tmp_path, mode="open")
    (policy.os_home / "todo.txt").write_text("PRIVATE KEY rotation\n")
    ctx = make_ctx(policy, policy.os_home)
    found = await glob_tool.invoke({"pattern": "*", "root": str(policy.os_home)}, ctx)
    names = {Path(p).name for p in found.data["paths"]}
    assert "todo.txt" in names
    assert "id_rsa" not in names and "config.toml" not in names
    assert "protected path(s) were skipped" in found.text
    hits = await grep_tool.invoke({"pattern": "PRIVATE KEY", "root": str(policy.os_home)}, ctx)
    assert [Path(m["path"]).name for m in hits.data["matches"]] == ["todo.txt"]


# --------------------------------------------------------------------------- content


async def test_content_matches_grouped_by_file(grep_tool, ctx, tree, backend) -> None:
    out = await grep_tool.invoke({"pattern": "TODO"}, ctx)
    assert not out.is_error, out.text
    assert out.data["backend"] == backend
    assert [(Path(m["path"]).name, m["line"]) for m in out.data["matches"]] == [
        ("README.md", 2),
        ("main.py", 2),
    ]
    assert f"{tree / 'README.md'}\n  2: TODO: write docs" in out.text


async def test_content_glob_and_case(grep_tool, ctx, tree, backend) -> None:
    out = await grep_tool.invoke({"pattern": "hello", "glob": "*.py"}, ctx)
    assert [m["line"] for m in out.data["matches"]] == [2]
    loose = await grep_tool.invoke(
        {"pattern": "hello", "glob": "src/**", "case_insensitive": True}, ctx
    )
    assert {Path(m["path"]).name for m in loose.data["matches"]} == {"main.py", "util.py"}


async def test_python_only_regex_features_still_work(grep_tool, ctx, tree, backend) -> None:
    """Look-ahead is not in ripgrep's dialect; the search falls back to Python re."""
    out = await grep_tool.invoke({"pattern": r"hello(?=')"}, ctx)
    assert not out.is_error, out.text
    assert [Path(m["path"]).name for m in out.data["matches"]] == ["main.py"]
    assert out.data["backend"] == "python"


async def test_invalid_regex_is_explained(grep_tool, ctx, tree) -> None:
    out = await grep_tool.invoke({"pattern": "foo("}, ctx)
    assert out.is_error and "not a valid regular expression" in out.text


async def test_binary_files_are_skipped(grep_tool, ctx, workspace, backend) -> None:
    (workspace / "img.png").write_bytes(b"\x89PNG\0\0needle\0" * 10)
    (workspace / "t.txt").write_text("a needle\n")
    out = await grep_tool.invoke({"pattern": "needle"}, ctx)
    assert [Path(m["path"]).name for m in out.data["matches"]] == ["t.txt"]


async def test_match_cap_and_long_lines(grep_tool, ctx, workspace, backend) -> None:
    (workspace / "log.txt").write_text("hit\n" * (search.MAX_CONTENT_MATCHES + 50))
    (workspace / "wide.txt").write_text("hit" + "x" * 50_000 + "\n")
    out = await grep_tool.invoke({"pattern": "hit"}, ctx)
    assert len(out.data["matches"]) == search.MAX_CONTENT_MATCHES
    assert out.data["more"] and "stopped at" in out.text
    wide = await grep_tool.invoke({"pattern": "hit", "glob": "wide.txt"}, ctx)
    assert len(wide.data["matches"][0]["text"]) < grep.MAX_COLUMNS + 60
    assert "line cut" in wide.text


async def test_no_matches(grep_tool, ctx, tree, backend) -> None:
    out = await grep_tool.invoke({"pattern": "zebra"}, ctx)
    assert not out.is_error and "no lines matching" in out.text


async def test_a_huge_matching_line_does_not_end_the_search(grep_tool, ctx, workspace, backend):
    (workspace / "a-minified.js").write_text("x" * 3_000_000 + "needle\n")
    (workspace / "b-later.txt").write_text("a needle here\n")
    out = await grep_tool.invoke({"pattern": "needle"}, ctx)
    assert [Path(m["path"]).name for m in out.data["matches"]] == ["a-minified.js", "b-later.txt"]
    assert not out.data["more"] and len(out.text) < 2_000


# --------------------------------------------------------------------------- no freezing

PATHOLOGICAL_GLOB = "*a" * 18 + "b"


@pytest.mark.parametrize(
    ("pattern", "hits", "misses"),
    [
        ("{src,docs}/**/*.{py,md}", ["src/x/a.py", "docs/a.md"], ["lib/a.py", "src/a.rs"]),
        ("[a-c]x", ["bx", "d/cx"], ["dx", "b/x"]),
        ("**", ["a", "a/b/c"], []),
        ("a/**/b", ["a/b", "a/x/y/b"], ["a/xb", "b"]),
        ("***.py", ["x.py", "d/x.py"], ["x.pyc"]),
    ],
)
def test_glob_dialect_more(pattern, hits, misses) -> None:
    glob = compile_glob(pattern)
    for path in hits:
        assert glob.match(path), (pattern, path)
    for path in misses:
        assert not glob.match(path), (pattern, path)


def test_a_backtracking_glob_matches_in_linear_time() -> None:
    """The 37-character pattern that pinned a core for 30 s as a regex."""
    glob = compile_glob(PATHOLOGICAL_GLOB)
    assert not glob.match("a" * 60)
    assert glob.match("a" * 18 + "b")
    assert not compile_glob("*" * 500 + "x").match("y" * 4000)


def test_brace_bombs_are_refused() -> None:
    with pytest.raises(ToolError, match="alternatives"):
        compile_glob("{a,b}" * 12)


async def test_the_loop_answers_while_glob_search_runs(glob_tool, ctx, workspace) -> None:
    (workspace / ("a" * 60)).write_text("x")
    done: list[str] = []

    async def search() -> None:
        out = await glob_tool.invoke({"pattern": PATHOLOGICAL_GLOB}, ctx)
        assert "no files matching" in out.text
        done.append("search")

    with anyio.fail_after(60):
        async with anyio.create_task_group() as group:
            group.start_soon(search)
    assert done == ["search"]


async def test_a_backtracking_regex_stops_and_the_loop_answers(ctx, workspace, monkeypatch):
    """Python fallback (look-around is not ripgrep's dialect): the match runs with the GIL
    released and a per-line limit, so other work on the loop goes on meanwhile."""
    monkeypatch.setattr(grep, "LINE_MATCH_LIMIT", 0.5)
    (workspace / "bomb.txt").write_text("a" * 34 + "!\n")
    tool = build_tool(CONTENT_SEARCH)
    order: list[str] = []
    started = anyio.Event()

    async def search() -> None:
        started.set()
        out = await tool.invoke({"pattern": "(?=a)^(a|aa)+$"}, ctx)
        assert "backtracks" in out.text, out.text
        order.append("search")

    async def heartbeat() -> None:
        await started.wait()
        for _ in range(5):
            await anyio.sleep(0.01)
        order.append("heartbeat")

    with anyio.fail_after(60):
        async with anyio.create_task_group() as group:
            group.start_soon(search)
            group.start_soon(heartbeat)
    assert order == ["heartbeat", "search"]


async def test_stop_abandons_a_slow_search_at_once(ctx, workspace, monkeypatch) -> None:
    """/stop cancels the turn: the search's worker thread is abandoned (it ends at its own
    limit later), so the cancellation does not wait for the match."""
    import threading

    monkeypatch.setattr(grep, "LINE_MATCH_LIMIT", 8.0)
    (workspace / "bomb.txt").write_text("a" * 40 + "!\n")
    started, done = threading.Event(), threading.Event()
    original = grep.search_python

    def watched(*args, **kwargs):
        started.set()
        try:
            return original(*args, **kwargs)
        finally:
            done.set()

    monkeypatch.setattr(grep, "search_python", watched)
    tool = build_tool(CONTENT_SEARCH)

    async def search() -> None:
        await tool.invoke({"pattern": "(?=a)^(a|aa)+$"}, ctx)

    async with anyio.create_task_group() as group:
        group.start_soon(search)
        await anyio.to_thread.run_sync(started.wait)
        group.cancel_scope.cancel()
    assert not done.is_set()  # cancelled while the match was still running
