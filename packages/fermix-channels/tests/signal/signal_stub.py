"""The test side of ``stub_signal_cli.py``: an executable to point ``SIGNAL_CLI_PATH`` at, and
the control socket that drives it and records what it was asked.

Thread-based so the same controller serves async adapter tests (wait through
``anyio.to_thread.run_sync``) and the daemon test (plain blocking waits). Every stub
process (one per signal-cli start, so several across restarts) connects here; commands go
to the newest one.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

STUB = Path(__file__).with_name("stub_signal_cli.py")
ACCOUNT = "+15550000001"
OWNER = "+15550000002"
OWNER_UUID = "0e4f8c2a-1111-4c3b-9d7e-000000000002"
GUEST = "+15550000003"
STRANGER = "+15550000009"
GROUP_ID = "Z3JvdXAtb25lLWJhc2U2NA+/="


class StubSignalCli:
    """``with StubSignalCli() as stub:`` — ``stub.path`` is the executable."""

    def __init__(self, *, startup: str = "ok", style: str = "plain") -> None:
        self.startup = startup
        self.style = style
        self.dir = Path(tempfile.mkdtemp(prefix="fxsig", dir="/tmp"))
        self.socket_path = self.dir / "ctl.sock"
        self.path = self.dir / "signal-cli"
        self.events: list[dict[str, Any]] = []
        self._cond = threading.Condition()
        self._conns: list[socket.socket] = []
        self._server: socket.socket | None = None
        self._ts = int(time.time() * 1000)

    def __enter__(self) -> StubSignalCli:
        self.path.write_text(
            f'#!/bin/sh\nexec "{sys.executable}" "{STUB}" --control "{self.socket_path}" "$@"\n'
        )
        self.path.chmod(0o755)
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        server.bind(str(self.socket_path))
        server.listen(8)
        self._server = server
        threading.Thread(target=self._accept, daemon=True).start()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._server is not None:
            self._server.close()
        for conn in self._conns:
            with contextlib.suppress(OSError):
                conn.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    # ------------------------------------------------------------------ server

    def _accept(self) -> None:
        assert self._server is not None
        while True:
            try:
                conn, _ = self._server.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        reader = conn.makefile("rb")
        first = True
        for raw in reader:
            event = json.loads(raw)
            if first:
                first = False
                config = {"cmd": "config", "startup": self.startup, "style": self.style}
                conn.sendall((json.dumps(config) + "\n").encode())
                with self._cond:
                    self._conns.append(conn)
            with self._cond:
                self.events.append(event)
                if event.get("event") == "request":
                    # Recorded: the stub may answer now. Sent before anyone waiting on the
                    # event is woken, so a command they send next comes after the ack.
                    conn.sendall(b'{"cmd": "ack"}\n')
                self._cond.notify_all()
        with self._cond:
            self.events.append({"event": "closed"})
            self._cond.notify_all()

    # ------------------------------------------------------------------ reading

    def wait(self, predicate: Any, timeout: float = 30.0) -> Any:
        """Block until ``predicate(self)`` is truthy; a failure bound, not a pacing wait."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                value = predicate(self)
                if value:
                    return value
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"stub signal-cli: condition not met; {self.events}")
                self._cond.wait(left)

    def named(self, name: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e.get("event") == name]

    def requests(self, method: str | None = None) -> list[dict[str, Any]]:
        found = [e["request"] for e in self.named("request")]
        return [r for r in found if method is None or r.get("method") == method]

    def sends(self) -> list[dict[str, Any]]:
        return [r.get("params", {}) for r in self.requests("send")]

    def texts_to(self, chat: str) -> list[str]:
        out = []
        for params in self.sends():
            target = params.get("recipient") or []
            if chat == params.get("groupId") or chat in target:
                out.append(params.get("message", ""))
        return out

    def starts(self) -> int:
        return len(self.named("hello"))

    def wait_subscribed(self, count: int = 1, timeout: float = 30.0) -> None:
        self.wait(lambda s: len(s.requests("subscribeReceive")) >= count, timeout)

    # ------------------------------------------------------------------ driving

    def _command(self, command: dict[str, Any]) -> None:
        with self._cond:
            conn = self._conns[-1]
        conn.sendall((json.dumps(command) + "\n").encode())

    def envelope(self, envelope: dict[str, Any]) -> None:
        self._command({"cmd": "envelope", "envelope": envelope})

    def raw(self, data: str) -> None:
        self._command({"cmd": "raw", "data": data})

    def fail(self, method: str, error: dict[str, Any]) -> None:
        self._command({"cmd": "fail", "method": method, "error": error})
        self.wait(lambda s: any(e.get("cmd") == "fail" for e in s.named("done")))

    def hang(self) -> None:
        self._command({"cmd": "hang"})

    def exit(self, code: int = 1, stderr: str = "") -> None:
        self._command({"cmd": "exit", "code": code, "stderr": stderr})

    # ------------------------------------------------------------------ envelopes

    def next_ts(self) -> int:
        self._ts += 1
        return self._ts

    def message(
        self,
        text: str,
        *,
        sender: str = OWNER,
        uuid: str | None = OWNER_UUID,
        name: str = "Owner",
        ts: int | None = None,
        group: str | None = None,
        attachments: list[dict[str, Any]] | None = None,
        mentions: list[dict[str, Any]] | None = None,
        quote: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """A ``dataMessage`` envelope as signal-cli prints it, pushed to the stub."""
        ts = ts or self.next_ts()
        data: dict[str, Any] = {
            "timestamp": ts,
            "message": text,
            "expiresInSeconds": 0,
            "viewOnce": False,
        }
        if attachments is not None:
            data["attachments"] = attachments
        if mentions is not None:
            data["mentions"] = mentions
        if quote is not None:
            data["quote"] = quote
        if group is not None:
            data["groupInfo"] = {"groupId": group, "type": "DELIVER"}
        envelope = {
            "source": sender,
            "sourceNumber": sender,
            "sourceUuid": uuid,
            "sourceName": name,
            "sourceDevice": 1,
            "timestamp": ts,
            "dataMessage": data,
        }
        self.envelope(envelope)
        return envelope


def receipt(sender: str = OWNER) -> dict[str, Any]:
    ts = int(time.time() * 1000)
    return {
        "source": sender,
        "sourceNumber": sender,
        "sourceUuid": OWNER_UUID,
        "sourceDevice": 1,
        "timestamp": ts,
        "receiptMessage": {"when": ts, "isDelivery": True, "isRead": False, "timestamps": [1]},
    }


def minimal_environ(**extra: str) -> dict[str, str]:
    """A host environment for the adapter: this one's PATH and HOME, plus *extra*."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.environ.get("HOME", "/")}
    env.update(extra)
    return env
