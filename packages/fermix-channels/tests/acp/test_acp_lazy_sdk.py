"""The ACP SDK is imported on the first client connection, not when the channel starts.

A fresh interpreter (so nothing the test process imported counts) starts the channel with
the stub host, checks ``acp`` is not loaded, then connects as a client speaking raw
newline-delimited JSON-RPC: the first ``initialize`` is answered by the SDK it pulls in.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("acp", reason="the agent-client-protocol SDK is not installed")

SCRIPT = textwrap.dedent(
    """
    import asyncio, json, sys

    from fermix_channels.acp.adapter import AcpChannel
    from fermix_core.testing import StubChannelHost

    async def main():
        channel = AcpChannel()
        async with StubChannelHost("acp") as host:
            await channel.start(host)
            before = "acp" in sys.modules
            reader, writer = await asyncio.open_unix_connection(str(channel.socket_path))
            request = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                       "params": {"protocolVersion": 1}}
            writer.write(json.dumps(request).encode() + b"\\n")
            await writer.drain()
            answer = json.loads(await asyncio.wait_for(reader.readline(), 60))
            writer.close()
            await channel.stop()
        print(json.dumps({"sdk_before": before, "sdk_after": "acp" in sys.modules,
                          "answer": answer}))

    asyncio.run(main())
    """
)


def test_the_sdk_loads_on_the_first_connection_and_answers_it(tmp_path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["sdk_before"] is False
    assert seen["sdk_after"] is True
    assert seen["answer"]["id"] == 1
    assert seen["answer"]["result"]["protocolVersion"] == 1
    assert seen["answer"]["result"]["agentCapabilities"]["loadSession"] is True


def test_without_the_sdk_the_channel_still_fails_to_build() -> None:
    """A missing ``acp`` extra is reported when the channel is built, not at the first
    connection: the adapter module refuses to import, as it did when it imported the SDK."""
    script = (
        "import sys\n"
        "sys.modules['acp'] = None  # as if the extra were not installed\n"
        "try:\n"
        "    import fermix_channels.acp.adapter\n"
        "except ModuleNotFoundError as exc:\n"
        "    print('refused', exc.name)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "refused acp"
