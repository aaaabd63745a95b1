from __future__ import annotations

from pathlib import Path

import pytest
from fermix_core.testing import ToolContract
from fermix_core.tool import ToolContext, Trust, build_tool
from fermix_tools.shell import output
from fermix_tools.shell.plugin import SHELL

pytestmark = pytest.mark.anyio


class TestShellContract(ToolContract):
    valid_args = {"command": "echo hello"}
    invalid_args = {"command": "echo", "timeout": -1}
    invalid_field = "timeout"

    @pytest.fixture(autouse=True)
    def _kit(self, sandbox_kit):
        self.build_policy, self.make_ctx = sandbox_kit

    def make_tool(self):
        return build_tool(SHELL)

    def make_context(self, tmp_path: Path):
        return self.make_ctx(self.build_policy(tmp_path))


@pytest.fixture
def shell():
    return build_tool(SHELL)


async def test_exit_code_and_both_streams(shell, ctx, workspace) -> None:
    out = await shell.invoke({"command": "pwd; echo oops >&2; exit 3"}, ctx)
    assert not out.is_error, "a non-zero exit is an answer, not a tool failure"
    assert out.text.startswith("exit code: 3")
    assert f"--- stdout ---\n{workspace}" in out.text
    assert "--- stderr ---\noops" in out.text
    assert out.data["exit_code"] == 3 and out.data["cwd"] == str(workspace)


async def test_pipes_and_quoting_work(shell, ctx) -> None:
    out = await shell.invoke({"command": "printf 'a b\\nc\\n' | wc -l | tr -d ' '"}, ctx)
    assert "--- stdout ---\n2" in out.text


async def test_cwd_argument_and_refusal_outside(shell, ctx, workspace, os_home) -> None:
    (workspace / "sub").mkdir()
    inside = await shell.invoke({"command": "pwd", "cwd": "sub"}, ctx)
    assert str(workspace / "sub") in inside.text
    outside = await shell.invoke({"command": "touch planted", "cwd": str(os_home)}, ctx)
    assert outside.is_error and "outside the sandbox" in outside.text
    assert not (os_home / "planted").exists()


async def test_catastrophic_command_is_refused_and_nothing_runs(shell, ctx, os_home) -> None:
    keep = os_home / "thesis.tex"
    keep.write_text("years of work")
    out = await shell.invoke({"command": "touch ran; rm -rf ~"}, ctx)
    assert out.is_error and "refused" in out.text
    assert keep.read_text() == "years of work"
    assert not (ctx.cwd / "ran").exists(), "a refused command line runs no part of itself"


async def test_profile_refuses_programs_outside_it(sandbox_kit, tmp_path, shell) -> None:
    build_policy, make_ctx = sandbox_kit
    ctx = make_ctx(build_policy(tmp_path, command_profile="bare"))
    out = await shell.invoke({"command": "ls && touch made"}, ctx)
    assert out.is_error and "touch" in out.text and "profile" in out.text
    assert not (ctx.cwd / "made").exists()


async def test_child_env_is_minimal_and_startup_files_are_not_sourced(
    sandbox_kit, tmp_path, shell
) -> None:
    build_policy, make_ctx = sandbox_kit
    policy = build_policy(tmp_path)
    startup = policy.workspace / "startup.sh"
    startup.write_text(f"touch {policy.workspace / 'sourced'}\n")
    policy = build_policy(
        tmp_path,
        environ={
            "PATH": "/usr/bin:/bin",
            "AWS_SECRET_ACCESS_KEY": "AKIA-very-secret",
            "BASH_ENV": str(startup),
        },
        env_allow=("BASH_ENV",),
    )
    out = await shell.invoke({"command": "env"}, make_ctx(policy))
    assert "AKIA-very-secret" not in out.text
    assert f"HOME={policy.os_home}" in out.text
    assert not (policy.workspace / "sourced").exists()


async def test_timeout_stops_the_command(shell, ctx) -> None:
    out = await shell.invoke({"command": "echo started; exec sleep 30", "timeout": 0.5}, ctx)
    assert out.is_error and out.data["timed_out"]
    assert "timed out after 0.5s" in out.text and "started" in out.text


async def test_output_flood_is_capped_and_announced(shell, ctx) -> None:
    out = await shell.invoke({"command": "yes 'flood line'"}, ctx)
    assert out.data["truncated"] and out.data["exit_code"] is None
    assert "capture limit" in out.text
    assert len(out.text) < output.HEAD_CHARS + output.TAIL_CHARS + 1000


async def test_long_output_keeps_head_and_tail(shell, ctx) -> None:
    out = await shell.invoke({"command": "seq 1 9000"}, ctx)
    assert not out.data["truncated"]
    lines = out.text.splitlines()
    assert lines[:3] == ["exit code: 0", "--- stdout ---", "1"]
    assert "characters omitted" in out.text and "9000" in lines
    assert "redirect it to a file" in out.text


async def test_no_output(shell, ctx) -> None:
    out = await shell.invoke({"command": "true"}, ctx)
    assert out.text == "exit code: 0\n(no output)"


async def test_stdin_is_empty(shell, ctx) -> None:
    """A command waiting for input gets end-of-file instead of hanging the turn."""
    out = await shell.invoke({"command": "cat; echo done"}, ctx)
    assert "--- stdout ---\ndone" in out.text


async def test_without_a_sandbox_service(shell, tmp_path) -> None:
    bare = ToolContext(trust=Trust.OPERATOR, cwd=tmp_path, home=type("H", (), {"path": tmp_path}))
    out = await shell.invoke({"command": "echo hi"}, bare)
    assert out.is_error and "sandbox is not available" in out.text
