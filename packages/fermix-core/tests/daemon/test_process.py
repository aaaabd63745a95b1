from __future__ import annotations

import os
import subprocess
import sys

from fermix_core.daemon.process import (
    PidInfo,
    alive,
    current_state,
    read_pidfile,
    remove_pidfile,
    stop_process,
    wait_for_exit,
    write_pidfile,
)


def test_pidfile_round_trip_and_ownership(tmp_path) -> None:
    path = tmp_path / "daemon.pid"
    info = write_pidfile(path, tmp_path / "d.sock")
    assert read_pidfile(path) == info and alive(info)
    remove_pidfile(path, pid=info.pid + 1)  # not ours: kept
    assert path.exists()
    remove_pidfile(path, pid=info.pid)
    assert not path.exists()


def test_recycled_pid_is_not_trusted(tmp_path) -> None:
    me = read_pidfile(tmp_path / "missing")
    assert me is None
    fake = PidInfo(os.getpid(), started=1.0, version="0", socket="x")  # wrong start time
    assert not alive(fake)


def test_stale_files_are_cleaned(tmp_path) -> None:
    import socket

    pid_file, sock = tmp_path / "daemon.pid", tmp_path / "d.sock"
    pid_file.write_text('{"pid": 999999, "started": 1, "version": "0", "socket": "x"}')
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(sock))
    s.close()
    state = current_state(pid_file, sock)
    assert not state.running
    assert set(state.cleaned) == {str(pid_file), str(sock)}
    assert not pid_file.exists() and not sock.exists()


def test_corrupt_pidfile_is_cleaned(tmp_path) -> None:
    pid_file = tmp_path / "daemon.pid"
    pid_file.write_text("garbage")
    assert not current_state(pid_file, tmp_path / "d.sock").running
    assert not pid_file.exists()


def test_stop_escalates_to_sigkill_for_a_process_ignoring_sigterm(tmp_path) -> None:
    code = (
        "import signal, sys; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        "print('ready', flush=True); sys.stdin.read()"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert child.stdout.readline().strip() == "ready"
    from fermix_core.daemon.process import process_start_time

    info = PidInfo(child.pid, process_start_time(child.pid), "0", "x")
    assert stop_process(info, timeout=0.5) == "killed"
    assert child.wait() == -9


def test_wait_for_exit_sees_a_graceful_stop(tmp_path) -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE
    )
    from fermix_core.daemon.process import process_start_time

    info = PidInfo(child.pid, process_start_time(child.pid), "0", "x")
    assert stop_process(info, timeout=5) == "stopped"
    child.wait()
    assert wait_for_exit(child.pid, 0.1)


def test_a_killed_but_unreaped_process_is_not_alive() -> None:
    """A SIGKILLed daemon stays a zombie until reaped; `fermix start` must not wait on it."""
    import signal

    from fermix_core.daemon.process import process_start_time

    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        info = PidInfo(child.pid, process_start_time(child.pid), "0", "/nonexistent")
        assert alive(info) is True
        os.kill(child.pid, signal.SIGKILL)
        assert wait_for_exit(child.pid, 10)  # exited, but not reaped: a zombie
        assert alive(info) is False
    finally:
        child.kill()
        child.wait()
