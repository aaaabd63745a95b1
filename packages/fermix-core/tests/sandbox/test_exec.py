"""run_command with real processes: nothing it starts may outlive it.

Synchronisation is on the child's own output (``on_output``) or on the process-group id
(``on_start``), never on sleeps; "no process left" is ``os.killpg(pgid, 0)`` raising
ProcessLookupError once run_command has returned.
"""

from __future__ import annotations

import os
import shutil
import sys

import anyio
import pytest
from fermix_core.sandbox import run_command
from fermix_core.tool import ToolError

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(sys.platform == "win32", reason="process groups are POSIX"),
]

SH = shutil.which("sh") or "/bin/sh"


def group_gone(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    return False


def pid_gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


@pytest.fixture
def env(layout):
    return layout.policy().child_env()


@pytest.fixture
def subreaper():
    """Make this test process a child subreaper (Linux), as a supervising daemon would be.

    Orphaned grandchildren then re-parent to us and run_command reaps them at once,
    instead of waiting for PID 1 — which in some containers reaps only every few seconds.
    """
    if not sys.platform.startswith("linux"):
        yield
        return
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    pr_set_child_subreaper = 36
    if libc.prctl(pr_set_child_subreaper, 1, 0, 0, 0) != 0:
        yield
        return
    try:
        yield
    finally:
        libc.prctl(pr_set_child_subreaper, 0, 0, 0, 0)


async def test_output_exit_code_and_stderr(tmp_path, env) -> None:
    result = await run_command(
        [SH, "-c", "echo out; echo err >&2; pwd; exit 3"], cwd=tmp_path, env=env
    )
    assert result.exit_code == 3 and not result.ok
    assert result.stdout == f"out\n{tmp_path}\n"
    assert result.stderr == "err\n"
    assert not result.truncated and not result.timed_out


async def test_stdin_is_fed_and_closed(tmp_path, env) -> None:
    result = await run_command(["cat"], cwd=tmp_path, env=env, stdin=b"line 1\nline 2\n")
    assert result.ok and result.stdout == "line 1\nline 2\n"


async def test_without_stdin_the_child_reads_eof(tmp_path, env) -> None:
    result = await run_command(["cat"], cwd=tmp_path, env=env, timeout=30)
    assert result.ok and result.stdout == "" and not result.timed_out


async def test_the_child_gets_exactly_the_given_environment(tmp_path, layout) -> None:
    policy = layout.policy(environ={"PATH": os.environ["PATH"], "OPENAI_API_KEY": "sk-x"})
    result = await run_command(["env"], cwd=tmp_path, env=policy.child_env())
    names = {line.split("=", 1)[0] for line in result.stdout.splitlines()}
    assert "OPENAI_API_KEY" not in names and "HOME" in names
    assert f"HOME={layout.home}" in result.stdout.splitlines()


async def test_missing_program_and_bad_cwd(tmp_path, env) -> None:
    result = await run_command(["fermix-no-such-program"], cwd=tmp_path, env=env)
    assert result.exit_code == 127 and "command not found" in result.stderr
    script = tmp_path / "script.txt"
    script.write_text("not executable")
    result = await run_command([str(script)], cwd=tmp_path, env=env)
    assert result.exit_code == 126
    with pytest.raises(ToolError, match="does not exist"):
        await run_command(["true"], cwd=tmp_path / "missing", env=env)
    with pytest.raises(ToolError, match="empty"):
        await run_command([], cwd=tmp_path, env=env)


async def test_invalid_utf8_output_is_replaced_not_raised(tmp_path, env) -> None:
    result = await run_command([SH, "-c", r"printf '\377\376ok'"], cwd=tmp_path, env=env)
    assert result.stdout.endswith("ok") and "\ufffd" in result.stdout


async def test_timeout_kills_the_whole_group(tmp_path, env, subreaper) -> None:
    groups: list[int] = []
    result = await run_command(
        [SH, "-c", "sleep 1000 & echo child $!; sleep 1000"],
        cwd=tmp_path,
        env=env,
        timeout=1.5,
        on_start=groups.append,
    )
    assert result.timed_out and result.exit_code is None
    assert group_gone(groups[0])
    line = result.stdout.split()
    assert line[0] == "child" and pid_gone(int(line[1]))


async def test_cancellation_kills_the_whole_group(tmp_path, env, subreaper) -> None:
    groups: list[int] = []
    ready = anyio.Event()
    seen: dict[str, bytes] = {"stdout": b""}

    def on_output(stream: str, chunk: bytes) -> None:
        seen[stream] = seen.get(stream, b"") + chunk
        if b"\n" in seen["stdout"]:
            ready.set()

    async with anyio.create_task_group() as group:

        async def run() -> None:
            await run_command(
                [SH, "-c", "sleep 1000 & echo $!; wait"],
                cwd=tmp_path,
                env=env,
                on_start=groups.append,
                on_output=on_output,
            )

        group.start_soon(run)
        await ready.wait()  # the grandchild exists: its pid has been printed
        group.cancel_scope.cancel()
    grandchild = int(seen["stdout"].split()[0])
    assert group_gone(groups[0])
    assert pid_gone(grandchild)


async def test_output_cap_truncates_and_kills(tmp_path, env, subreaper) -> None:
    groups: list[int] = []
    result = await run_command(
        [SH, "-c", "sleep 1000 & yes fermix"],
        cwd=tmp_path,
        env=env,
        output_cap=10_000,
        on_start=groups.append,
    )
    assert result.truncated and result.exit_code is None and not result.timed_out
    assert len(result.stdout.encode()) == 10_000
    assert result.stdout.startswith("fermix\nfermix\n")
    assert group_gone(groups[0])


async def test_background_children_do_not_outlive_a_normal_exit(tmp_path, env) -> None:
    """Without the subreaper: init reaps the orphan and run_command waits for that."""
    groups: list[int] = []
    result = await run_command(
        [SH, "-c", "sleep 1000 & echo $!; exit 0"],
        cwd=tmp_path,
        env=env,
        on_start=groups.append,
    )
    assert result.ok and not result.timed_out
    assert group_gone(groups[0])
    assert pid_gone(int(result.stdout.split()[0]))


async def test_output_written_just_before_exit_is_kept(tmp_path, env) -> None:
    script = "i=0; while [ $i -lt 2000 ]; do echo line $i; i=$((i+1)); done"
    result = await run_command([SH, "-c", script], cwd=tmp_path, env=env)
    lines = result.stdout.splitlines()
    assert len(lines) == 2000 and lines[-1] == "line 1999"


async def test_a_child_ignoring_sigterm_is_killed(tmp_path, env, subreaper, monkeypatch) -> None:
    from fermix_core.sandbox import exec as exec_module

    monkeypatch.setattr(exec_module, "TERM_GRACE", 0.2)
    groups: list[int] = []
    armed = anyio.Event()

    def on_output(stream: str, chunk: bytes) -> None:
        if b"armed" in chunk:
            armed.set()

    async with anyio.create_task_group() as group:

        async def run() -> None:
            await run_command(
                [SH, "-c", "trap '' TERM; echo armed; sleep 1000"],
                cwd=tmp_path,
                env=env,
                on_start=groups.append,
                on_output=on_output,
            )

        group.start_soon(run)
        await armed.wait()
        group.cancel_scope.cancel()
    assert group_gone(groups[0])
