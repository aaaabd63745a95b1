"""JSON-RPC 2.0 with a ``signal-cli … jsonRpc`` child process, one JSON value per line.

signal-cli reads requests on its stdin and writes responses and notifications on its
stdout, each a single line; responses may come back in any order (it answers requests
concurrently), and a batch request is answered with one JSON array. This module frames
that conversation and nothing else:

* :func:`open_rpc` starts the child in a session of its own (so everything it starts can
  be signalled as one process group) with the environment it is given, reads its stdout
  and stderr, and on exit closes its stdin (signal-cli shuts down cleanly on EOF), waits a
  short grace and then kills the whole group;
* :meth:`RpcProcess.request` sends one request with a fresh id and waits for the response
  with that id, under a deadline;
* every notification (a line with a ``method`` and no ``id``) goes to the ``on_notification``
  callback, in the order read; the reader waits for the callback, so a slow consumer slows
  signal-cli down through the pipe instead of growing a buffer here;
* a line that is not JSON, not an object (or an array of objects), or longer than
  ``max_line`` bytes is logged and skipped — the line after it is read normally;
* the last lines of stderr are kept (:attr:`RpcProcess.stderr_tail`) so a child that exits
  can be explained ("User +… is not registered.").

signal-cli's own error codes are mapped to the channel seam's typed errors by
:func:`rpc_error`.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from subprocess import PIPE
from typing import Any

import anyio
from anyio.abc import ByteReceiveStream, Process
from fermix_core.channel import ChannelError, ChannelRateLimited, ChannelTransientError

__all__ = [
    "MAX_LINE",
    "RpcProcess",
    "SignalCliError",
    "SignalCliGone",
    "SignalCliTimeout",
    "open_rpc",
    "rpc_error",
]

log = logging.getLogger("fermix_channels.signal")

#: The longest stdout line read; a longer one is skipped whole (an envelope is a few KB).
MAX_LINE = 1024 * 1024
#: Seconds signal-cli gets to exit after its stdin closes before its group is killed.
EXIT_GRACE = 3.0
_STDERR_LINES = 40
_SNIPPET = 120


class SignalCliError(ChannelError):
    """signal-cli answered a request with a JSON-RPC error it does not retry."""

    def __init__(self, message: str, *, code: int | None = None, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.data = data


class SignalCliGone(ChannelTransientError):
    """signal-cli exited (or its pipe broke) before it answered; it is being restarted."""


class SignalCliTimeout(ChannelTransientError):
    """signal-cli did not answer within the deadline."""


def _result_types(data: Any) -> list[str]:
    response = data.get("response") if isinstance(data, Mapping) else None
    results = response.get("results") if isinstance(response, Mapping) else None
    if not isinstance(results, list):
        return []
    return [str(r.get("type")) for r in results if isinstance(r, Mapping) and r.get("type")]


def failure_of(types: Sequence[str], method: str) -> ChannelError | None:
    """The error for a send whose per-recipient results all failed, or ``None``."""
    failed = [t for t in types if t != "SUCCESS"]
    if not types or len(failed) < len(types):
        return None  # nothing reported, or at least one recipient got it
    kind = failed[0]
    if kind == "UNREGISTERED_FAILURE":
        return SignalCliError(
            f"signal-cli {method}: the recipient is not registered on Signal (no Signal "
            "account uses that number); check the number, or message them elsewhere"
        )
    if kind == "IDENTITY_FAILURE":
        return SignalCliError(
            f"signal-cli {method}: the recipient's safety number changed; verify it and run "
            "`signal-cli -a ACCOUNT trust -a NUMBER` before Fermix can send to them"
        )
    if kind == "RATE_LIMIT_FAILURE":
        return ChannelRateLimited(None, f"signal-cli {method}: Signal rate-limited the send")
    return ChannelTransientError(f"signal-cli {method}: {kind.lower().replace('_', ' ')}")


def rpc_error(method: str, error: Any) -> ChannelError:
    """signal-cli's JSON-RPC ``error`` object as a typed channel error.

    Codes (signal-cli's command handler): -1 user error (a failed send carries the
    per-recipient results in ``data.response``), -3 I/O error (network), -4 untrusted
    identity, -5 rate limit; the JSON-RPC ones (-32600 … -32603) are permanent.
    """
    if not isinstance(error, Mapping):
        return SignalCliError(f"signal-cli {method} failed: {error!r}")
    code = error.get("code")
    text = str(error.get("message") or "no detail")
    data = error.get("data")
    failure = failure_of(_result_types(data), method)
    if failure is not None:
        return failure
    if code == -5:
        return ChannelRateLimited(None, f"signal-cli {method}: {text}")
    if code == -3:
        return ChannelTransientError(f"signal-cli {method}: {text}")
    if code == -4:
        return SignalCliError(
            f"signal-cli {method}: {text}; verify the safety number and run "
            "`signal-cli -a ACCOUNT trust -a NUMBER`",
            code=code,
            data=data,
        )
    return SignalCliError(
        f"signal-cli refused {method}: {text} (code {code})", code=code, data=data
    )


@dataclass
class _Pending:
    done: anyio.Event = field(default_factory=anyio.Event)
    result: Any = None
    error: Any = None
    gone: bool = False


Notify = Callable[[dict[str, Any]], Awaitable[None]]


class RpcProcess:
    """One running signal-cli, spoken to with JSON-RPC lines (see :func:`open_rpc`)."""

    def __init__(self, process: Process, on_notification: Notify, *, max_line: int) -> None:
        self.process = process
        self.pid = process.pid
        self._notify = on_notification
        self.max_line = max_line
        self._ids = itertools.count(1)
        self._pending: dict[str, _Pending] = {}
        self._write_lock = anyio.Lock()
        #: Set when stdout reached its end: the child exited or closed it.
        self.closed = anyio.Event()
        self.stderr_tail: deque[str] = deque(maxlen=_STDERR_LINES)
        #: Lines skipped as unreadable (not JSON, not JSON-RPC, over the line cap).
        self.skipped = 0

    # ------------------------------------------------------------------ requests

    async def request(
        self, method: str, params: Mapping[str, Any] | None = None, *, timeout: float
    ) -> Any:
        """Send one request and return its ``result``; a JSON-RPC error is raised typed."""
        if self.closed.is_set():
            raise SignalCliGone(f"signal-cli is not running; {method} was not sent")
        request_id = f"fx-{next(self._ids)}"
        pending = self._pending[request_id] = _Pending()
        body: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params:
            body["params"] = dict(params)
        line = json.dumps(body, ensure_ascii=False, separators=(",", ":")) + "\n"
        stdin = self.process.stdin
        try:
            if stdin is None:
                raise SignalCliGone("signal-cli has no stdin")
            async with self._write_lock:
                await stdin.send(line.encode("utf-8"))
            with anyio.fail_after(timeout):
                await pending.done.wait()
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, BrokenPipeError) as exc:
            raise SignalCliGone(f"signal-cli exited before {method} was sent") from exc
        except TimeoutError:
            raise SignalCliTimeout(
                f"signal-cli did not answer {method} within {timeout:g}s"
            ) from None
        finally:
            self._pending.pop(request_id, None)
        if pending.gone:
            raise SignalCliGone(f"signal-cli exited before it answered {method}")
        if pending.error is not None:
            raise rpc_error(method, pending.error)
        return pending.result

    # ------------------------------------------------------------------ reading

    async def read_stdout(self) -> None:
        stream = self.process.stdout
        try:
            if stream is not None:
                await self._read_lines(stream)
        finally:
            self.closed.set()
            for pending in self._pending.values():
                pending.gone = True
                pending.done.set()

    async def _read_lines(self, stream: ByteReceiveStream) -> None:
        buffer = bytearray()
        skipping = False
        while True:
            try:
                chunk = await stream.receive(65536)
            except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
                break
            start = 0
            while True:
                end = chunk.find(b"\n", start)
                piece = chunk[start:] if end < 0 else chunk[start:end]
                if not skipping and len(buffer) + len(piece) > self.max_line:
                    self.skipped += 1
                    log.warning(
                        "signal-cli wrote a line longer than %d bytes; skipped it",
                        self.max_line,
                    )
                    buffer.clear()
                    skipping = True
                if not skipping:
                    buffer += piece
                if end < 0:
                    break
                start = end + 1
                if skipping:
                    skipping = False
                    continue
                line = bytes(buffer)
                buffer.clear()
                await self._on_line(line)
        if buffer and not skipping:
            await self._on_line(bytes(buffer))

    async def _on_line(self, raw: bytes) -> None:
        text = raw.decode("utf-8", errors="replace").strip()
        if not text:
            return
        try:
            value = json.loads(text)
        except ValueError:
            self.skipped += 1
            log.warning("signal-cli wrote a line that is not JSON; skipped: %r", text[:_SNIPPET])
            return
        items = value if isinstance(value, list) else [value]
        for item in items:
            await self._on_message(item, text)

    async def _on_message(self, item: Any, text: str) -> None:
        if not isinstance(item, dict):
            self.skipped += 1
            log.warning("signal-cli wrote JSON that is not JSON-RPC; skipped: %r", text[:_SNIPPET])
            return
        if "method" in item and item.get("id") is None:
            try:
                await self._notify(item)
            except anyio.get_cancelled_exc_class():
                raise
            except Exception:
                log.exception("signal: handling a %s notification failed", item.get("method"))
            return
        if "result" in item or "error" in item:
            key = item.get("id")
            pending = self._pending.get(str(key)) if key is not None else None
            if pending is None:
                if key is None and "error" in item:
                    error = item.get("error")
                    detail = error.get("message") if isinstance(error, dict) else error
                    log.warning("signal-cli could not read a request: %s", str(detail)[:200])
                else:
                    log.debug("signal-cli answered an unknown request id %r", key)
                return
            pending.result = item.get("result")
            pending.error = item.get("error")
            pending.done.set()
            return
        self.skipped += 1
        log.warning("signal-cli wrote JSON that is not JSON-RPC; skipped: %r", text[:_SNIPPET])

    async def read_stderr(self) -> None:
        stream = self.process.stderr
        if stream is None:
            return
        buffer = b""
        with contextlib.suppress(
            anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError
        ):
            while True:
                buffer += await stream.receive(65536)
                *lines, buffer = buffer.split(b"\n")
                for line in lines:
                    self._stderr_line(line)
                if len(buffer) > 8192:
                    self._stderr_line(buffer)
                    buffer = b""
        if buffer:
            self._stderr_line(buffer)

    def _stderr_line(self, raw: bytes) -> None:
        line = raw.decode("utf-8", errors="replace").rstrip()[:2000]
        if not line:
            return
        self.stderr_tail.append(line)
        level = logging.WARNING if ("ERROR" in line or "WARN" in line) else logging.DEBUG
        log.log(level, "signal-cli: %s", line)

    # ------------------------------------------------------------------ exit

    async def wait_exit(self, timeout: float) -> int | None:
        """The exit code once the child is gone, or ``None`` if it is still running."""
        with anyio.move_on_after(timeout):
            return await self.process.wait()
        return self.process.returncode

    async def shutdown(self) -> None:
        """Close stdin, give signal-cli :data:`EXIT_GRACE` to exit, then kill its group."""
        from fermix_core.sandbox.exec import kill_process_group

        if self.process.stdin is not None:
            with contextlib.suppress(Exception):
                await self.process.stdin.aclose()
        await self.wait_exit(EXIT_GRACE)
        await kill_process_group(self.process)
        with contextlib.suppress(Exception):
            await self.process.aclose()


@asynccontextmanager
async def open_rpc(
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    cwd: str,
    on_notification: Notify,
    max_line: int = MAX_LINE,
) -> AsyncIterator[RpcProcess]:
    """Start ``argv`` (``signal-cli … jsonRpc``) and yield its :class:`RpcProcess`.

    Raises ``OSError`` (``FileNotFoundError``, ``PermissionError`` …) when it cannot be
    started. On exit the child is shut down and its process group killed, whatever happened.
    """
    process = await anyio.open_process(
        [str(a) for a in argv],
        stdin=PIPE,
        stdout=PIPE,
        stderr=PIPE,
        cwd=cwd,
        env=dict(env),
        start_new_session=True,
    )
    rpc = RpcProcess(process, on_notification, max_line=max_line)
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(rpc.read_stdout)
            tg.start_soon(rpc.read_stderr)
            try:
                yield rpc
            finally:
                tg.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            await rpc.shutdown()
