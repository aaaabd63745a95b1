"""Confinement: commands run inside bubblewrap for real (skipped only where it cannot start)."""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from fermix_core.sandbox import ConfinementUnavailable
from fermix_core.sandbox.confine import Plan, Probe, bwrap_args, probe, sandbox_exec_profile, wrap

from .conftest import Layout

FOUND = probe()
needs_bwrap = pytest.mark.skipif(
    FOUND.backend != "bubblewrap", reason=f"bubblewrap cannot run here: {FOUND.detail}"
)
SH = "/bin/sh"
pytestmark = pytest.mark.anyio


async def sh(
    layout: Layout,
    script: str,
    *,
    mode: str = "strict",
    cwd: Path | None = None,
    timeout: float = 30,
    **kw,
):
    policy = layout.policy(mode, **kw)
    ctx = layout.ctx(cwd=cwd or layout.workspace)
    return await policy.run(
        [SH, "-c", script],
        cwd=cwd or layout.workspace,
        env=policy.child_env(),
        ctx=ctx,
        timeout=timeout,
    )


@needs_bwrap
async def test_the_daemon_and_its_environment_are_out_of_reach(layout, monkeypatch) -> None:
    monkeypatch.setenv("FERMIX_TEST_DAEMON_SECRET", "sk-daemon-only")
    me = os.getpid()
    result = await sh(
        layout,
        f"cat /proc/{me}/environ; cat /proc/$PPID/environ; kill -0 {me} && echo ALIVE; "
        "echo ppid=$PPID; ls /proc | grep -c '^[0-9]'",
    )
    assert "sk-daemon-only" not in result.stdout + result.stderr
    assert "ALIVE" not in result.stdout
    assert "ppid=0" in result.stdout  # PID 1 of its own namespace: no parent in sight


@needs_bwrap
async def test_writes_outside_the_roots_fail_and_inside_succeed(layout) -> None:
    target = layout.outside / "planted"
    result = await sh(
        layout,
        f"echo x > {target}; echo y > {layout.workspace}/ok.txt; touch /usr/fermix-probe",
    )
    assert not target.exists()
    assert not Path("/usr/fermix-probe").exists()
    assert (layout.workspace / "ok.txt").read_text() == "y\n"
    assert "Read-only file system" in result.stderr or "No such file" in result.stderr


@needs_bwrap
async def test_root_cannot_remount_its_way_out(layout) -> None:
    result = await sh(
        layout, "mount -o remount,rw / && touch /usr/fermix-remount; grep CapEff /proc/self/status"
    )
    assert not Path("/usr/fermix-remount").exists()
    assert "CapEff:\t0000000000000000" in result.stdout


@needs_bwrap
async def test_protected_paths_and_fermix_state_are_masked_in_open_mode(layout) -> None:
    home = layout.home
    (layout.fermix.path / "auth.json").write_text('{"token": "oauth-secret"}')
    result = await sh(
        layout,
        f"cat {home}/.ssh/id_ed25519; ls -a {home}/.ssh; cat {layout.fermix.config_file}; "
        f"cat {layout.fermix.path}/auth.json; ls {layout.fermix.path}; "
        f"echo pwned >> {home}/.bashrc; echo w > {home}/notes.txt; echo v > ok.txt",
        mode="open",
    )
    out = result.stdout + result.stderr
    assert "PRIVATE KEY" not in out and "oauth-secret" not in out and "my settings" not in out
    assert (home / ".bashrc").read_text() == "# shell\n"
    assert (home / "notes.txt").read_text() == "w\n"  # open mode: the home is writable
    assert (layout.workspace / "ok.txt").read_text() == "v\n"  # the workspace inside FERMIX_HOME


@needs_bwrap
async def test_read_only_launch_writes_nothing(layout) -> None:
    policy = layout.policy("strict")
    result = await policy.run(
        [SH, "-c", "echo x > planted; cat marker"],
        cwd=layout.workspace,
        env=policy.child_env(),
        ctx=layout.ctx(),
        write=False,
        timeout=30,
    )
    assert not (layout.workspace / "planted").exists()
    assert result.exit_code != 0


@needs_bwrap
async def test_network_is_off_unless_allowed(layout) -> None:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(4)
    port = server.getsockname()[1]
    script = f"exec 3<>/dev/tcp/127.0.0.1/{port} && echo CONNECTED"
    try:
        policy = layout.policy("strict")
        bash = "/bin/bash"
        off = await policy.run(
            [bash, "-c", script], cwd=layout.workspace, env=policy.child_env(), timeout=30
        )
        assert "CONNECTED" not in off.stdout
        on_policy = layout.policy("strict", network=True)
        on = await on_policy.run(
            [bash, "-c", script], cwd=layout.workspace, env=on_policy.child_env(), timeout=30
        )
        assert "CONNECTED" in on.stdout
        assert layout.policy("strict", command_profile="extended").network_allowed
    finally:
        server.close()


@needs_bwrap
async def test_nothing_outlives_the_call(layout) -> None:
    marker = "4242.25"
    result = await sh(layout, f"setsid sleep {marker} > /dev/null 2>&1 & echo started")
    assert "started" in result.stdout
    assert _pids_running(f"sleep {marker}") == []


@needs_bwrap
def test_a_killed_daemon_takes_its_children_with_it(layout) -> None:
    """SIGKILL of the process that started a command ends the command too."""
    fifo = layout.workspace / "ready"
    os.mkfifo(fifo)
    marker = "4343.75"
    helper = textwrap.dedent(
        f"""
        import anyio, sys
        from fermix_core.sandbox import SandboxPolicy
        policy = SandboxPolicy(mode="strict", os_home={str(layout.home)!r},
            fermix_home={str(layout.fermix.path)!r}, workspace={str(layout.workspace)!r},
            environ={{"PATH": "/usr/bin:/bin"}})
        async def main():
            await policy.run(["/bin/sh", "-c", "echo go > ready; exec sleep {marker}"],
                cwd=policy.workspace, env=policy.child_env(), timeout=600)
        anyio.run(main)
        """
    )
    daemon = subprocess.Popen([sys.executable, "-c", helper])
    try:
        with open(fifo) as ready:  # blocks until the confined command has started
            assert ready.read().strip() == "go"
        # The shell wrote "go" and then execs sleep: the same pid either way (exec keeps
        # it), so count the command by its program, not by whether exec has happened yet.
        pids = _pids_running(f"sleep {marker}", programs=("sleep", "/bin/sh"))
        assert len(pids) == 1
        watch = os.pidfd_open(pids[0])
        daemon.send_signal(signal.SIGKILL)
        daemon.wait()
        gone, _, _ = select.select([watch], [], [], 20)
        os.close(watch)
        assert gone, "the confined command outlived the killed daemon"
    finally:
        if daemon.poll() is None:
            daemon.kill()
            daemon.wait()


def _pids_running(needle: str, programs: tuple[str, ...] = ()) -> list[int]:
    """Live processes whose command line contains *needle*: by default only those without
    a ``-c`` argument (not the shells and interpreters that merely mention it); with
    *programs*, those whose program (argv[0]) is one of them."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        cmdline = b" ".join(argv).decode(errors="replace")
        if needle not in cmdline or state == "Z":
            continue
        if programs:
            if argv[0].decode(errors="replace") in programs:
                found.append(int(entry.name))
        elif "-c" not in cmdline.split():
            found.append(int(entry.name))
    return found


# ----------------------------------------------------------------- settings and fallback


def _plan(tmp_path: Path, **kw) -> Plan:
    values = dict(
        cwd=tmp_path,
        roots=(tmp_path,),
        masked=(tmp_path / "secret",),
        rebind=(),
        read_only=(),
        network=False,
    )
    values.update(kw)
    return Plan(**values)


MISSING = Probe(None, None, "bubblewrap (bwrap) is not installed", "apt install bubblewrap")


def test_required_refuses_without_a_backend(tmp_path) -> None:
    with pytest.raises(ConfinementUnavailable) as caught:
        wrap(["true"], {}, _plan(tmp_path), setting="required", found=MISSING)
    assert "required" in str(caught.value) and "apt install bubblewrap" in str(caught.value)


def test_auto_falls_back_to_screening_and_says_why(tmp_path) -> None:
    launch = wrap(["true"], {"A": "1"}, _plan(tmp_path), setting="auto", found=MISSING)
    assert launch.argv == ["true"] and not launch.confined
    assert launch.note == MISSING.detail


def test_off_never_confines(tmp_path) -> None:
    found = Probe("bubblewrap", "/usr/bin/bwrap", "bubblewrap")
    launch = wrap(["true"], {}, _plan(tmp_path), setting="off", found=found)
    assert launch.argv == ["true"] and not launch.confined


def test_bwrap_mount_order(tmp_path) -> None:
    ws = tmp_path / "fh" / "workspace"
    ws.mkdir(parents=True)
    args = bwrap_args(
        _plan(tmp_path, roots=(ws,), masked=(tmp_path / "fh",), rebind=(ws,), network=True)
    )
    assert "--unshare-net" not in args and "--die-with-parent" in args
    assert args[args.index("--cap-drop") + 1] == "ALL"
    tmpfs_fh = args.index(str(tmp_path / "fh"))
    last_bind = len(args) - 1 - args[::-1].index(str(ws))
    assert last_bind > tmpfs_fh  # the workspace is bound again after FERMIX_HOME is masked


def test_sandbox_exec_profile_has_the_same_rules(tmp_path) -> None:
    profile = sandbox_exec_profile(_plan(tmp_path, read_only=(tmp_path / ".bashrc",)))
    assert f'(deny file-read* file-write* (subpath "{tmp_path / "secret"}"))' in profile
    assert f'(subpath "{tmp_path}")' in profile
    assert f'(deny file-write* (subpath "{tmp_path / ".bashrc"}"))' in profile
    assert "(deny network*" in profile


def test_status_is_shown_everywhere(layout, caplog, monkeypatch) -> None:
    from fermix_core.sandbox import confine
    from fermix_core.sandbox.policy import log_confinement

    monkeypatch.setitem(confine._probed, sys.platform, MISSING)
    policy = layout.policy("strict")
    info = policy.describe()["confinement"]
    assert info["active"] is False and "NOT confined" in info["detail"]
    assert info["fix"] == "apt install bubblewrap"
    json.dumps(info)
    with caplog.at_level("WARNING", logger="fermix.sandbox"):
        log_confinement(policy)
    assert "NOT confined" in caplog.text and "apt install bubblewrap" in caplog.text


def _doctor_row(tmp_path: Path, config: dict):
    from fermix_core.boot import assemble
    from fermix_core.doctor import DoctorContext, run_checks
    from fermix_core.home import FermixHome

    home = FermixHome(tmp_path / "doctor-home")
    home.ensure()
    assembly = assemble(
        home, environ={"FERMIX_HOME": str(home.path)}, entry_points=False, config=config
    )
    ctx = DoctorContext(assembly, config=assembly.load_config())
    rows = [r for r in run_checks(ctx) if r.check == "sandbox"]
    assert len(rows) == 1
    return rows[0]


def test_doctor_row_warns_with_the_install_command(tmp_path, monkeypatch) -> None:
    from fermix_core.doctor import Status
    from fermix_core.sandbox import confine

    monkeypatch.setitem(confine._probed, sys.platform, MISSING)
    row = _doctor_row(tmp_path, {})
    assert row.status is Status.WARN and "NOT confined" in row.detail
    assert row.fix == "apt install bubblewrap"
    required = _doctor_row(tmp_path, {"sandbox": {"confinement": "required"}})
    assert required.status is Status.FAIL


@needs_bwrap
def test_doctor_row_ok_when_confined(tmp_path) -> None:
    from fermix_core.doctor import Status

    row = _doctor_row(tmp_path, {})
    assert row.status is Status.OK and "bubblewrap" in row.detail


@needs_bwrap
async def test_caches_go_to_the_private_tmp_outside_open_mode(layout) -> None:
    result = await sh(layout, 'mkdir -p "$XDG_CACHE_HOME/pip" && echo ok; echo "$TMPDIR"')
    assert result.stdout.split() == ["ok", "/tmp"]


@needs_bwrap
async def test_a_timeout_leaves_nothing_behind(layout) -> None:
    marker = "4545.125"
    result = await sh(layout, f"sleep {marker} & setsid sleep {marker} & sleep {marker}", timeout=1)
    assert result.timed_out
    assert _pids_running(f"sleep {marker}") == []


@needs_bwrap
async def test_launch_is_the_entry_point_for_long_lived_children(layout) -> None:
    """What an MCP stdio server starts through: the confined argv and env, then any
    process API (here a line echoed back over stdin/stdout)."""
    import anyio

    policy = layout.policy("strict")
    launch = policy.launch(
        [SH, "-c", "read line; echo got:$line; cat ~/.ssh/id_ed25519"],
        cwd=layout.workspace,
        env=policy.child_env(),
        ctx=layout.ctx(cwd=layout.workspace),
    )
    assert launch.confined and launch.backend == "bubblewrap"
    assert launch.argv[0] == FOUND.program and launch.env["TMPDIR"] == "/tmp"
    process = await anyio.run_process(
        launch.argv, input=b"hello\n", env=launch.env, cwd=layout.workspace, check=False
    )
    assert process.stdout.decode().splitlines()[0] == "got:hello"
    assert b"PRIVATE KEY" not in process.stdout
