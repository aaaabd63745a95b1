"""Running one command so that nothing it starts outlives it.

A shell command is rarely one process: ``make`` starts compilers, ``npm test`` starts a
server, ``sh -c 'x & y'`` leaves ``x`` behind. Killing the direct child would orphan the
rest, so every command runs in a session of its own (``start_new_session=True``) and on
timeout, output overflow or cancellation the whole process group gets SIGTERM, then
SIGKILL, and :func:`run_command` returns only once the group is gone.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import signal
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from subprocess import DEVNULL, PIPE

import anyio
from anyio.abc import ByteReceiveStream, Process

from fermix_core.tool import ToolError

__all__ = [
    "DEFAULT_OUTPUT_CAP",
    "DEFAULT_TIMEOUT",
    "CommandResult",
    "kill_process_group",
    "run_command",
]

log = logging.getLogger("fermix.sandbox.exec")

DEFAULT_TIMEOUT = 120.0
DEFAULT_OUTPUT_CAP = 256_000
#: How long a group gets between SIGTERM and SIGKILL to clean up (flush, remove temp files).
TERM_GRACE = 2.0
#: Upper bound on waiting for killed processes to be reaped before giving up loudly.
REAP_LIMIT = 10.0
#: After the group is gone, how long buffered output may take to drain. Only a process
#: that left the group (``setsid``) can hold a pipe open longer; it is not waited for.
DRAIN_LIMIT = 2.0


@dataclass
class CommandResult:
    """What a command did. ``exit_code`` is ``None`` when the sandbox killed it (timeout or
    output cap); a negative code means a signal from elsewhere ended it."""

    exit_code: int | None
    stdout: str
    stderr: str
    truncated: bool = False
    timed_out: bool = False

    @property
    def ok(self) -> bool:
        return self.exit_code == 0


class _Capture:
    """Both streams share one byte budget; past it, reading stops and the group is killed."""

    def __init__(self, cap: int, on_output: Callable[[str, bytes], object] | None) -> None:
        self.cap = max(0, cap)
        self.used = 0
        self.buffers: dict[str, bytearray] = {"stdout": bytearray(), "stderr": bytearray()}
        self.overflow = anyio.Event()
        self.on_output = on_output

    async def pump(self, name: str, stream: ByteReceiveStream | None) -> None:
        if stream is None:
            return
        with contextlib.suppress(anyio.EndOfStream, anyio.ClosedResourceError):
            while True:
                chunk = await stream.receive(65536)
                room = self.cap - self.used
                kept = chunk[:room] if room > 0 else b""
                self.buffers[name] += kept
                self.used += len(kept)
                if self.on_output is not None and kept:
                    try:
                        self.on_output(name, bytes(kept))
                    except Exception:
                        log.exception("on_output callback failed")
                if len(kept) < len(chunk):
                    self.overflow.set()
                    return

    def text(self, name: str) -> str:
        return self.buffers[name].decode("utf-8", errors="replace")


async def run_command(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    timeout: float = DEFAULT_TIMEOUT,
    output_cap: int = DEFAULT_OUTPUT_CAP,
    stdin: bytes | None = None,
    on_start: Callable[[int], object] | None = None,
    on_output: Callable[[str, bytes], object] | None = None,
) -> CommandResult:
    """Run *argv* (no shell unless *argv* names one) and capture its output.

    *env* is used as given — build it with :meth:`SandboxPolicy.child_env`. The command runs
    in its own process group; ``on_start(pgid)`` is called right after it starts and
    ``on_output(stream, chunk)`` with each captured chunk (for live display). A missing
    program gives exit code 127 and a non-executable one 126, like a shell.
    """
    argv = [str(part) for part in argv]
    if not argv:
        raise ToolError("the command is empty; give a program and its arguments")
    if not Path(cwd).is_dir():
        raise ToolError(f"working directory {cwd} does not exist or is not a directory")
    try:
        process = await anyio.open_process(
            argv,
            stdin=PIPE if stdin is not None else DEVNULL,
            stdout=PIPE,
            stderr=PIPE,
            cwd=str(cwd),
            env=dict(env),
            start_new_session=True,
        )
    except FileNotFoundError:
        return CommandResult(127, "", f"{argv[0]}: command not found\n")
    except PermissionError:
        return CommandResult(126, "", f"{argv[0]}: permission denied\n")
    except OSError as exc:
        if exc.errno == errno.ENOEXEC:
            return CommandResult(126, "", f"{argv[0]}: not an executable file\n")
        raise
    pgid = process.pid  # a new session: the leader's pid is the group id
    if on_start is not None:
        try:
            on_start(pgid)
        except Exception:
            log.exception("on_start callback failed")
    capture = _Capture(output_cap, on_output)
    timed_out = False
    try:
        async with anyio.create_task_group() as group:
            pumps_done = anyio.Event()

            async def pumps() -> None:
                async with anyio.create_task_group() as readers:
                    readers.start_soon(capture.pump, "stdout", process.stdout)
                    readers.start_soon(capture.pump, "stderr", process.stderr)
                pumps_done.set()

            group.start_soon(_feed, process, stdin)
            group.start_soon(pumps)
            with anyio.move_on_after(timeout) as deadline:
                async with anyio.create_task_group() as race:

                    async def leader() -> None:
                        await process.wait()
                        race.cancel_scope.cancel()

                    async def overflow() -> None:
                        await capture.overflow.wait()
                        race.cancel_scope.cancel()

                    race.start_soon(leader)
                    race.start_soon(overflow)
            timed_out = deadline.cancelled_caught
            # On timeout or overflow this stops the command; after a normal exit it stops
            # whatever the command left running in the background.
            await _kill_group(process, pgid)
            with anyio.move_on_after(DRAIN_LIMIT):
                await pumps_done.wait()  # read what the pipes still buffer
            group.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            if process.returncode is None or _group_alive(pgid):
                await _kill_group(process, pgid)
            await _close(process)
    killed = timed_out or capture.overflow.is_set()
    return CommandResult(
        exit_code=None if killed else process.returncode,
        stdout=capture.text("stdout"),
        stderr=capture.text("stderr"),
        truncated=capture.overflow.is_set(),
        timed_out=timed_out,
    )


async def _feed(process: Process, data: bytes | None) -> None:
    if process.stdin is None:
        return
    try:
        if data:
            await process.stdin.send(data)
    except (anyio.BrokenResourceError, anyio.ClosedResourceError, BrokenPipeError):
        pass  # the command stopped reading; that is its business
    finally:
        with contextlib.suppress(Exception):
            await process.stdin.aclose()


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


async def kill_process_group(process: Process) -> None:
    """Stop a long-lived child started with ``start_new_session=True`` and everything it
    started: SIGTERM to its process group, SIGKILL after :data:`TERM_GRACE`, and return once
    the group is gone (for supervised helpers such as a channel's ``signal-cli``)."""
    await _kill_group(process, process.pid)


async def _kill_group(process: Process, pgid: int) -> None:
    """SIGTERM the group, give it :data:`TERM_GRACE`, SIGKILL it, and wait until it is gone.

    A group that is already empty costs one ``killpg`` probe. Orphaned grandchildren are
    reaped by init (or by us, when we are init or a subreaper), so "gone" is polled with
    a short backoff rather than awaited; :data:`REAP_LIMIT` bounds the wait.
    """
    if process.returncode is not None and not _group_alive(pgid):
        return
    _signal_group(pgid, signal.SIGTERM)
    with anyio.move_on_after(TERM_GRACE):
        await _gone(process, pgid)
    _signal_group(pgid, signal.SIGKILL)
    with anyio.move_on_after(REAP_LIMIT) as scope:
        await _gone(process, pgid)
    if scope.cancelled_caught:
        log.error("process group %d survived SIGKILL for %.0fs", pgid, REAP_LIMIT)


async def _gone(process: Process, pgid: int) -> None:
    await process.wait()
    delay = 0.005
    while True:
        _reap_orphans(pgid)
        if not _group_alive(pgid):
            return
        await anyio.sleep(delay)
        delay = min(delay * 2, 0.1)


def _reap_orphans(pgid: int) -> None:
    """Reap group members that were re-parented to this process (when it is PID 1 or a
    subreaper); the leader itself is already reaped by the event loop's child watcher."""
    while True:
        try:
            pid, _status = os.waitpid(-pgid, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


async def _close(process: Process) -> None:
    with contextlib.suppress(Exception):
        await process.aclose()
