from __future__ import annotations

import os
import stat
import struct

import anyio
import pytest
from fermix_core.daemon.client import DaemonClient, DaemonUnavailable, probe
from fermix_core.daemon.protocol import MAX_FRAME_BYTES, RemoteError, encode
from fermix_core.daemon.server import ControlServer, DaemonAlreadyRunning, MethodError
from fermix_core.daemon.stream import SocketByteStream

pytestmark = pytest.mark.anyio


@pytest.fixture
def sock(tmp_path):
    # AF_UNIX paths are short; tmp_path can be long, so keep the socket near the root.
    path = tmp_path / "d.sock"
    if len(str(path)) > 100:
        pytest.skip("temporary path too long for a unix socket")
    return path


async def echo(params):
    return {"echo": params}


async def boom(params):
    raise MethodError("nope", "refused on purpose")


async def crash(params):
    raise RuntimeError("unexpected")


async def test_round_trip_errors_and_socket_mode(sock) -> None:
    server = ControlServer(sock, {"echo": echo, "boom": boom, "crash": crash})
    async with anyio.create_task_group() as tg:
        await tg.start(server.serve)
        assert stat.S_IMODE(os.stat(sock).st_mode) == 0o600
        async with DaemonClient(sock) as client:
            assert client.hello["protocol"] == 1 and client.hello["pid"] == os.getpid()
            assert "echo" in client.hello["methods"]
            assert await client.call("echo", {"a": 1}) == {"echo": {"a": 1}}
            with pytest.raises(RemoteError) as info:
                await client.call("boom")
            assert info.value.code == "nope"
            with pytest.raises(RemoteError) as info:
                await client.call("crash")
            assert info.value.code == "internal"
            with pytest.raises(RemoteError) as info:
                await client.call("does_not_exist")
            assert info.value.code == "unknown_method"
        tg.cancel_scope.cancel()
    assert not sock.exists()


async def test_hostile_frames_are_refused_without_killing_the_server(sock) -> None:
    server = ControlServer(sock, {"echo": echo})
    async with anyio.create_task_group() as tg:
        await tg.start(server.serve)
        for payload in (
            struct.pack(">I", MAX_FRAME_BYTES + 1),
            struct.pack(">I", 5) + b"nope!",
            struct.pack(">I", 2) + b"[]",
        ):
            stream = await SocketByteStream.connect(str(sock))
            await stream.send(payload)
            answer = await stream.receive()
            assert b"protocol" in answer
            await stream.aclose()
        async with DaemonClient(sock) as client:  # still serving
            assert await client.call("echo", {}) == {"echo": {}}
        tg.cancel_scope.cancel()


async def test_stale_socket_is_replaced_and_live_one_refused(sock) -> None:
    import socket as pysocket

    stale = pysocket.socket(pysocket.AF_UNIX)
    stale.bind(str(sock))
    stale.close()  # the file stays, nothing listens: what a crashed daemon leaves
    assert await probe(sock, timeout=1) is None
    server = ControlServer(sock, {})
    async with anyio.create_task_group() as tg:
        await tg.start(server.serve)
        with pytest.raises(DaemonAlreadyRunning):
            await ControlServer(sock, {}).serve()
        tg.cancel_scope.cancel()


async def test_client_reports_missing_daemon(sock) -> None:
    with pytest.raises(DaemonUnavailable):
        async with DaemonClient(sock):
            pass


def test_encode_refuses_oversized_frames() -> None:
    from fermix_core.daemon.protocol import ProtocolError

    with pytest.raises(ProtocolError):
        encode({"x": "a" * (MAX_FRAME_BYTES + 1)})


async def test_error_messages_to_the_client_are_redacted(sock) -> None:
    from fermix_core import logs

    plain = "plainkey-7QwX9z"
    logs.add_known_secret(plain)

    async def leaky(params):
        raise RuntimeError(f"provider said: bad key {plain} / ghp_{'a1' * 18}")

    async def leaky_refusal(params):
        raise MethodError("refused", f"cannot use {plain}")

    server = ControlServer(sock, {"leaky": leaky, "refusal": leaky_refusal})
    try:
        async with anyio.create_task_group() as tg:
            await tg.start(server.serve)
            async with DaemonClient(sock) as client:
                for method in ("leaky", "refusal"):
                    with pytest.raises(RemoteError) as info:
                        await client.call(method)
                    text = str(info.value)
                    assert plain not in text and "ghp_" not in text
                    assert "[REDACTED:" in text
            tg.cancel_scope.cancel()
    finally:
        logs.forget_known_secrets()
