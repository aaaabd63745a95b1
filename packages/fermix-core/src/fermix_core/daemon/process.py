"""Finding, starting and stopping the daemon process without trusting stale files.

The pid file records the pid *and* that process's start time, so a pid recycled by the
OS after a crash is never mistaken for the daemon. Start-up readiness is an event, not a
poll: the parent passes a pipe and the daemon writes one line to it once its control
socket is listening (or the reason it could not start). Stopping waits on the exact
process with a pidfd where the kernel offers one, and escalates to SIGKILL after a bound.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from fermix_core import __version__
from fermix_core.fsutil import atomic_write

READY_FD_ENV = "FERMIX_READY_FD"
START_TIMEOUT = 30.0
STOP_TIMEOUT = 10.0


@dataclass(frozen=True)
class PidInfo:
    pid: int
    started: float | None
    version: str
    socket: str


def process_start_time(pid: int) -> float | None:
    """Kernel start time of *pid* in clock ticks since boot (Linux); None where unknown."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name is parenthesised and may contain spaces; fields follow the last ')'.
    fields = stat.rsplit(")", 1)[1].split()
    return float(fields[19])


def _zombie(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


def alive(info: PidInfo) -> bool:
    try:
        os.kill(info.pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return False  # not ours: another user's process reusing the pid
    if _zombie(info.pid):
        return False  # exited (killed) and not reaped yet: it serves nothing
    started = process_start_time(info.pid)
    return info.started is None or started is None or started == info.started


def write_pidfile(path: Path, socket_path: Path) -> PidInfo:
    info = PidInfo(os.getpid(), process_start_time(os.getpid()), __version__, str(socket_path))
    atomic_write(path, json.dumps(asdict(info)) + "\n", mode=0o600)
    return info


def read_pidfile(path: Path) -> PidInfo | None:
    try:
        data = json.loads(path.read_text())
        return PidInfo(
            int(data["pid"]),
            data.get("started"),
            str(data.get("version", "?")),
            str(data["socket"]),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


def remove_pidfile(path: Path, pid: int | None = None) -> None:
    """Remove the pid file, but only our own when *pid* is given."""
    if pid is not None:
        info = read_pidfile(path)
        if info is not None and info.pid != pid:
            return
    with contextlib.suppress(FileNotFoundError):
        path.unlink()


@dataclass
class DaemonState:
    running: bool
    pid: int | None = None
    version: str | None = None
    cleaned: tuple[str, ...] = ()


def current_state(pid_file: Path, socket_path: Path) -> DaemonState:
    """What the files say, after removing any left by a daemon that is gone."""
    info = read_pidfile(pid_file)
    cleaned: list[str] = []
    if info is not None and alive(info):
        return DaemonState(True, info.pid, info.version)
    if info is not None or pid_file.exists():
        remove_pidfile(pid_file)
        cleaned.append(str(pid_file))
    if os.path.lexists(socket_path) and not _socket_answers(socket_path):
        with contextlib.suppress(FileNotFoundError):
            socket_path.unlink()
        cleaned.append(str(socket_path))
    return DaemonState(False, cleaned=tuple(cleaned))


def _socket_answers(path: Path) -> bool:
    import socket

    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(1.0)
    try:
        probe.connect(str(path))
    except OSError:
        return False
    finally:
        probe.close()
    return True


class StartError(RuntimeError):
    pass


def start_detached(log_path: Path, *, environ: dict[str, str] | None = None) -> int:
    """Run ``fermix run`` in a new session and wait until it reports ready (or why not)."""
    read_fd, write_fd = os.pipe()
    env = dict(os.environ if environ is None else environ)
    env[READY_FD_ENV] = str(write_fd)
    log_path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    with open(log_path, "ab") as out:
        os.chmod(log_path, 0o600)
        child = subprocess.Popen(
            [sys.executable, "-m", "fermix_core.cli", "run"],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=out,
            env=env,
            pass_fds=(write_fd,),
            start_new_session=True,
        )
    os.close(write_fd)
    try:
        line = _read_line(read_fd, START_TIMEOUT)
    finally:
        os.close(read_fd)
    if line == "ready":
        return child.pid
    if child.poll() is None and not line:
        raise StartError(
            f"the daemon did not report ready within {START_TIMEOUT:.0f}s; see {log_path}"
        )
    reason = line.removeprefix("error: ") if line else f"it exited with status {child.wait()}"
    raise StartError(f"the daemon could not start: {reason} (details in {log_path})")


def _read_line(fd: int, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    data = b""
    while b"\n" not in data:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return ""
        ready, _, _ = select.select([fd], [], [], remaining)
        if not ready:
            return ""
        chunk = os.read(fd, 4096)
        if not chunk:
            break  # the writer closed: the daemon exited without a word
        data += chunk
    return data.decode("utf-8", "replace").strip()


def report_ready(message: str = "ready") -> None:
    """Called by the daemon: tell the starting parent (if any) that we are up, or why not."""
    raw = os.environ.pop(READY_FD_ENV, None)
    if not raw:
        return
    try:
        from fermix_core.logs import redact

        fd = int(raw)
        # The parent prints this to the user; a boot error may quote a secret.
        os.write(fd, (redact(message) + "\n").encode())
        os.close(fd)
    except (ValueError, OSError):
        pass


def wait_for_exit(pid: int, timeout: float) -> bool:
    """Wait for *pid* to exit; True when it did. Uses a pidfd (an event) where available."""
    opener = getattr(os, "pidfd_open", None)
    if opener is not None:
        try:
            fd = opener(pid)
        except ProcessLookupError:
            return True
        except OSError:
            fd = None
        if fd is not None:
            try:
                ready, _, _ = select.select([fd], [], [], timeout)
                return bool(ready)
            finally:
                os.close(fd)
    deadline = time.monotonic() + timeout  # pragma: no cover - kernels without pidfd
    while time.monotonic() < deadline:  # pragma: no cover
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False  # pragma: no cover


def stop_process(info: PidInfo, timeout: float = STOP_TIMEOUT) -> str:
    """SIGTERM the exact daemon process, then SIGKILL after *timeout*. Returns how it ended."""
    if not alive(info):
        return "not running"
    os.kill(info.pid, signal.SIGTERM)
    if wait_for_exit(info.pid, timeout):
        return "stopped"
    with contextlib.suppress(ProcessLookupError):
        os.kill(info.pid, signal.SIGKILL)
    wait_for_exit(info.pid, 5.0)
    return "killed"
