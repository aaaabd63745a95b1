"""The JSON-RPC framing against a tiny child process: ordering, batches, exits."""

from __future__ import annotations

import sys
from typing import Any

import anyio
import pytest
from fermix_channels.signal.rpc import SignalCliGone, SignalCliTimeout, open_rpc

pytestmark = pytest.mark.anyio

# Reads two requests, answers them in one batch array in reverse order (as signal-cli may
# answer concurrent requests out of order), sends a notification whose handler fails, an
# answer to an id nobody asked, then exits on the third request.
CHILD = r"""
import json, sys
first = json.loads(sys.stdin.readline())
second = json.loads(sys.stdin.readline())
batch = [
    {"jsonrpc": "2.0", "result": "two", "id": second["id"]},
    {"jsonrpc": "2.0", "result": "one", "id": first["id"]},
]
print(json.dumps({"jsonrpc": "2.0", "method": "boom", "params": {}}), flush=True)
print(json.dumps({"jsonrpc": "2.0", "result": 1, "id": "nobody"}), flush=True)
print(json.dumps(batch), flush=True)
print(json.dumps({"jsonrpc": "2.0", "method": "receive", "params": {"n": 1}}), end="", flush=True)
sys.stdin.readline()
sys.stderr.write("bye\n")
sys.exit(4)
"""


async def test_out_of_order_batches_notifications_and_exit(tmp_path) -> None:
    seen: list[dict[str, Any]] = []

    async def note(item: dict[str, Any]) -> None:
        if item["method"] == "boom":
            raise RuntimeError("a handler bug")  # logged, the reader goes on
        seen.append(item)

    argv = [sys.executable, "-c", CHILD]
    async with open_rpc(
        argv, env={"PATH": "/usr/bin:/bin"}, cwd=str(tmp_path), on_notification=note
    ) as rpc:
        results: dict[str, Any] = {}

        async def ask(name: str) -> None:
            results[name] = await rpc.request(name, timeout=30)

        async with anyio.create_task_group() as tg:
            tg.start_soon(ask, "one")
            tg.start_soon(ask, "two")
        assert results == {"one": "one", "two": "two"}
        with pytest.raises(SignalCliGone):
            await rpc.request("three", timeout=30)
        assert await rpc.wait_exit(10) == 4
        with pytest.raises(SignalCliGone, match="not running"):
            await rpc.request("four", timeout=30)
    # The last line had no newline: it is still read at the end of the stream.
    assert seen == [{"jsonrpc": "2.0", "method": "receive", "params": {"n": 1}}]
    assert list(rpc.stderr_tail) == ["bye"]


async def test_an_unanswered_request_times_out(tmp_path) -> None:
    async def note(item: dict[str, Any]) -> None:
        return None

    argv = [sys.executable, "-c", "import sys\nfor _ in sys.stdin: pass"]
    async with open_rpc(argv, env={}, cwd=str(tmp_path), on_notification=note) as rpc:
        with pytest.raises(SignalCliTimeout, match="did not answer version"):
            await rpc.request("version", timeout=0.2)
    assert rpc.process.returncode is not None
