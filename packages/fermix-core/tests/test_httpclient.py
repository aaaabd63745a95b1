"""The runtime's HTTP client loads its CA certificates on the first TLS connection only,
and still verifies exactly as httpx's default context does."""

from __future__ import annotations

import ssl
from pathlib import Path

import httpx
import pytest
from fermix_core.httpclient import DeferredTrustContext, LazyTrustContext, runtime_client

pytest.importorskip("cryptography.x509")
from fermix_core.testing.tls import make_pki, serve_tls

pytestmark = pytest.mark.anyio


async def test_building_the_client_loads_no_certificates() -> None:
    async with runtime_client() as client:
        lazy = client._transport._pool._ssl_context  # what every connection will use
        assert isinstance(lazy, LazyTrustContext) and not lazy.built  # no SSLContext yet
        context = lazy.context
        assert isinstance(context, DeferredTrustContext) and lazy.context is context
        assert context.cert_store_stats()["x509_ca"] == 0 and not context.trust_loaded
        assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
        assert lazy.verify_mode == ssl.CERT_REQUIRED  # anything else is the built one's
        assert client.follow_redirects is False


async def test_the_tls_context_is_built_by_the_first_tls_connection_and_shared(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server_ctx, _ = make_pki(tmp_path, "localhost", ip="127.0.0.1")
    monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "ca.pem"))
    async with serve_tls(server_ctx) as server, runtime_client() as client:
        lazy = client._transport._pool._ssl_context
        assert not lazy.built
        first = await client.get(f"https://127.0.0.1:{server.port}/one")
        assert lazy.built and lazy.context.trust_loaded
        context = lazy.context
        # A second connection (the first one closed) uses the same, already loaded context.
        await client._transport._pool.aclose()
        second = await client.get(f"https://127.0.0.1:{server.port}/two")
        assert lazy.context is context
    assert first.status_code == second.status_code == 200
    assert [r.split(b" ")[1] for r in server.requests] == [b"/one", b"/two"]


def test_clients_whose_context_httpx_reads_itself_get_a_real_one() -> None:
    """Proxies and mounts: httpx uses the context directly, so it is a real (still
    deferred) one."""
    proxied = runtime_client(proxy="http://127.0.0.1:9")
    contexts = [
        getattr(getattr(t, "_pool", None), "_ssl_context", None)
        for t in [proxied._transport, *proxied._mounts.values()]
    ]
    assert not any(isinstance(c, LazyTrustContext) for c in contexts)
    assert isinstance(proxied._transport._pool._ssl_context, DeferredTrustContext)


def test_the_lean_transport_builds_its_context_for_the_first_tls_connection() -> None:
    """The lean client (the channels' and the providers'): no ``ssl.SSLContext`` until an
    ``https://`` connection opens (``test_http1`` connects through it)."""
    lean = runtime_client(lean=True)
    context = lean._transport.ssl_context
    assert isinstance(context, LazyTrustContext) and not context.built
    assert lean._transport.fallback.inner is None


def test_the_first_wrap_loads_the_trust_store_once() -> None:
    context = DeferredTrustContext()
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    context.wrap_bio(incoming, outgoing, server_hostname="example.org")
    loaded = context.cert_store_stats()["x509_ca"]
    assert context.trust_loaded and loaded > 0  # certifi's bundle
    context.wrap_bio(ssl.MemoryBIO(), ssl.MemoryBIO(), server_hostname="example.org")
    assert context.cert_store_stats()["x509_ca"] == loaded


async def test_a_certificate_from_an_unknown_ca_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    server_ctx, _ = make_pki(tmp_path, "localhost", ip="127.0.0.1")
    async with serve_tls(server_ctx) as server, runtime_client() as client:
        with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
            await client.get(f"https://127.0.0.1:{server.port}/")
    assert server.requests == []


async def test_ssl_cert_file_is_honoured_as_httpx_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server_ctx, _ = make_pki(tmp_path, "localhost", ip="127.0.0.1")
    monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "ca.pem"))
    async with serve_tls(server_ctx) as server, runtime_client() as client:
        reply = await client.get(f"https://127.0.0.1:{server.port}/page")
    assert reply.status_code == 200 and b"secure hello" in reply.content
    assert server.requests[0].startswith(b"GET /page ")


class ScriptedServer:
    """Raw HTTP/1.1 on loopback: ``plan[n]`` says what the n-th connection does with each of
    its requests in turn — ``"answer"`` (200, keep-alive) or ``"drop"`` (close unanswered,
    as a server closing an idle connection just as the request arrived)."""

    def __init__(self, *plans: list[str]) -> None:
        self.plans = list(plans)
        self.seen: list[tuple[int, bytes]] = []  # (connection, request line)
        self.connections = 0
        self.open = self.most_open = 0

    async def __aenter__(self) -> ScriptedServer:
        import anyio

        self.listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
        self.port = self.listener.extra(anyio.abc.SocketAttribute.local_port)  # noqa: S610
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        self._tg.start_soon(self.listener.serve, self._serve)
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._tg.cancel_scope.cancel()
        await self._tg.__aexit__(None, None, None)
        await self.listener.aclose()

    async def _serve(self, stream) -> None:
        number = self.connections
        self.connections += 1
        plan = self.plans[number] if number < len(self.plans) else ["answer"] * 100
        buffer = b""
        self.open += 1
        self.most_open = max(self.most_open, self.open)
        try:
            await self._answer(stream, number, plan, buffer)
        finally:
            self.open -= 1

    async def _answer(self, stream, number: int, plan: list[str], buffer: bytes) -> None:
        async with stream:
            for action in plan:
                while b"\r\n\r\n" not in buffer:
                    try:
                        buffer += await stream.receive()
                    except Exception:
                        return
                head, _, buffer = buffer.partition(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n")[1:]:
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value)
                while len(buffer) < length:
                    buffer += await stream.receive()
                buffer = buffer[length:]
                self.seen.append((number, head.split(b"\r\n")[0]))
                if action == "drop":
                    return
                await stream.send(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")


async def test_a_request_on_a_stale_keep_alive_connection_is_sent_again_once() -> None:
    async with ScriptedServer(["answer", "drop"]) as server, runtime_client() as client:
        url = f"http://127.0.0.1:{server.port}"
        assert (await client.post(f"{url}/one", content=b"1")).status_code == 200
        answer = await client.post(f"{url}/two", content=b"2")
    assert answer.status_code == 200 and answer.content == b"ok"
    # /two reached the closing connection unanswered, then a fresh one that answered it.
    assert server.seen == [
        (0, b"POST /one HTTP/1.1"),
        (0, b"POST /two HTTP/1.1"),
        (1, b"POST /two HTTP/1.1"),
    ]
    assert client._transport.stale_retries == 1


async def test_a_fresh_connection_that_fails_is_a_failure_not_a_retry() -> None:
    async with ScriptedServer(["drop"]) as server, runtime_client() as client:
        with pytest.raises((httpx.RemoteProtocolError, httpx.ReadError)):  # EOF or reset
            await client.post(f"http://127.0.0.1:{server.port}/x", content=b"1")
    assert server.seen == [(0, b"POST /x HTTP/1.1")]
    assert client._transport.stale_retries == 0


async def test_a_one_shot_body_is_not_sent_twice() -> None:
    async def body():
        yield b"streamed"

    async with ScriptedServer(["answer", "drop"]) as server, runtime_client() as client:
        url = f"http://127.0.0.1:{server.port}"
        await client.post(f"{url}/one", content=b"1")
        with pytest.raises((httpx.RemoteProtocolError, httpx.ReadError)):  # EOF or reset
            await client.post(f"{url}/two", content=body())
    assert len(server.seen) == 2 and client._transport.stale_retries == 0


async def test_an_idle_connection_the_server_closed_is_not_reused() -> None:
    """The cheap readability check sees the server's EOF: no error, no retry needed."""
    import anyio

    async with ScriptedServer(["answer"]) as server, runtime_client() as client:
        url = f"http://127.0.0.1:{server.port}"
        await client.get(f"{url}/one")
        for connection in client._transport._pool.connections:  # unless already dropped
            stream = connection._connection._network_stream
            with anyio.fail_after(10):
                while not stream.get_extra_info("is_readable"):  # the server's FIN arrives
                    await anyio.wait_readable(stream.get_extra_info("socket"))
        answer = await client.get(f"{url}/two")
    assert answer.status_code == 200
    assert [n for n, _ in server.seen] == [0, 1] and client._transport.stale_retries == 0


def test_every_pooled_connection_may_stay_alive() -> None:
    client = runtime_client()
    pool = client._transport._pool
    # httpx's default keeps 20 of 100: a burst over 20 closed idle connections at every
    # checkout and opened new ones.
    assert pool._max_keepalive_connections == pool._max_connections == 100


async def test_concurrent_requests_share_the_pool_and_surplus_idle_ones_are_swept() -> None:
    import anyio
    import httpx as hx

    limits = hx.Limits(max_connections=8, max_keepalive_connections=3, keepalive_expiry=60)
    async with ScriptedServer() as server, runtime_client(limits=limits) as client:
        pool = client._transport._pool
        pool.full_scan_seconds = 0.0  # sweep on every checkout (normally at most once a second)
        url = f"http://127.0.0.1:{server.port}"
        answers: list[int] = []

        async def post(n: int) -> None:
            answers.append((await client.post(f"{url}/{n}", content=b"x")).status_code)

        async with anyio.create_task_group() as tg:
            for n in range(40):
                tg.start_soon(post, n)
        assert answers == [200] * 40
        assert server.most_open <= 8  # never more than max_connections at once
        await client.get(f"{url}/last")  # a checkout: the sweep closes the idle surplus
        assert len(pool.connections) <= 3
    assert len(server.seen) == 41


def test_only_a_complete_head_announcing_a_body_waits_for_it() -> None:
    from fermix_core.httpclient import _announces_body

    assert _announces_body(b"POST /m HTTP/1.1\r\nHost: a\r\nContent-Length: 12\r\n\r\n")
    assert _announces_body(b"PUT /m HTTP/1.1\r\ncontent-length:7\r\n\r\n")
    assert not _announces_body(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n")
    assert not _announces_body(b"POST / HTTP/1.1\r\nContent-Length: 0\r\n\r\n")
    assert not _announces_body(b"POST / HTTP/1.1\r\nContent-Length: 12\r\n")  # incomplete
    assert not _announces_body(b'{"body": "\\r\\ncontent-length: 5\\r\\n"}')


async def test_a_request_head_and_body_go_out_in_one_write() -> None:
    import anyio

    first: list[bytes] = []

    async def serve(stream) -> None:
        async with stream:
            first.append(await stream.receive())
            await stream.send(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")

    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
    port = listener.extra(anyio.abc.SocketAttribute.local_port)  # noqa: S610
    async with listener, anyio.create_task_group() as tg, runtime_client() as client:
        tg.start_soon(listener.serve, serve)
        answer = await client.post(f"http://127.0.0.1:{port}/m", json={"to": "1555"})
        tg.cancel_scope.cancel()
    assert answer.status_code == 200
    assert first[0].startswith(b"POST /m HTTP/1.1") and first[0].endswith(b'{"to":"1555"}')


def test_transport_options_of_httpx_keep_its_own_transport() -> None:
    from fermix_core.httpclient import _transport_class

    assert isinstance(runtime_client()._transport, _transport_class())
    plain = runtime_client(http1=True)
    assert type(plain._transport) is httpx.AsyncHTTPTransport
    assert plain.follow_redirects is False
