"""The lean HTTP/1.1 transport (``runtime_client(lean=True)``, the channels' client) against
raw loopback servers: framing, keep-alive, the pool, timeouts, cancellation, hostile
answers, TLS, and what it hands on to httpx's own transport."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio
import httpx
import pytest
from fermix_core.http1 import Http1Transport
from fermix_core.http1wire import READ_HIGH_WATER
from fermix_core.httpclient import runtime_client
from fermix_core.testing.imports import loaded_after

pytestmark = pytest.mark.anyio

Handler = Callable[[int, asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]
OK = b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 2\r\n\r\nok"


async def read_request(reader: asyncio.StreamReader) -> tuple[bytes, dict[bytes, bytes], bytes]:
    """One request: (request line, lower-cased headers, body — chunked bodies decoded)."""
    head = await reader.readuntil(b"\r\n\r\n")
    line, *lines = head[:-4].split(b"\r\n")
    headers = {}
    for raw in lines:
        name, _, value = raw.partition(b":")
        headers[name.strip().lower()] = value.strip()
    if headers.get(b"transfer-encoding") == b"chunked":
        body = b""
        while True:
            size = int((await reader.readuntil(b"\r\n"))[:-2], 16)
            chunk = await reader.readexactly(size + 2)
            if size == 0:
                return line, headers, body
            body += chunk[:-2]
    length = int(headers.get(b"content-length", b"0"))
    return line, headers, await reader.readexactly(length) if length else b""


class RawServer:
    """asyncio streams on loopback; *handler(n, reader, writer)* serves the n-th connection."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.connections = 0
        self.open = self.most_open = 0
        self.seen: list[tuple[int, bytes]] = []
        self.bodies: list[bytes] = []
        self.tasks: set[asyncio.Task] = set()

    async def __aenter__(self) -> RawServer:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.server.close()
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        await self.server.wait_closed()

    async def request(self, number: int, reader: asyncio.StreamReader) -> dict[bytes, bytes]:
        line, headers, body = await read_request(reader)
        self.seen.append((number, line))
        self.bodies.append(body)
        return headers

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self.tasks.add(task)
        number = self.connections
        self.connections += 1
        self.open += 1
        self.most_open = max(self.most_open, self.open)
        try:
            await self.handler(number, reader, writer)
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass
        finally:
            self.open -= 1
            writer.close()


def keep_answering(server_box: list[RawServer], answer: bytes = OK) -> Handler:
    async def handler(number: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        while True:
            await server_box[0].request(number, reader)
            writer.write(answer)

    return handler


async def serving(handler_for: Callable[[list[RawServer]], Handler]) -> RawServer:
    box: list[RawServer] = []
    server = RawServer(handler_for(box))
    box.append(server)
    return server


def lean(**kwargs: object) -> httpx.AsyncClient:
    return runtime_client(lean=True, timeout=httpx.Timeout(10.0), **kwargs)


async def test_requests_share_one_keep_alive_connection_and_bodies_arrive_whole() -> None:
    async with await serving(keep_answering) as server, lean() as client:
        assert isinstance(client._transport, Http1Transport)
        got = await client.post(f"{server.url}/a?x=1", json={"to": "1555"})
        more = [await client.get(f"{server.url}/b") for _ in range(3)]
    assert got.status_code == 200 and got.text == "ok"
    assert got.headers["content-type"] == "text/plain" and got.reason_phrase == "OK"
    assert got.http_version == "HTTP/1.1" and all(r.content == b"ok" for r in more)
    assert server.seen == [(0, b"POST /a?x=1 HTTP/1.1")] + [(0, b"GET /b HTTP/1.1")] * 3
    assert server.bodies[0] == b'{"to":"1555"}'
    assert client._transport.open_connections == 0  # closed with the client


async def test_chunked_and_close_delimited_answers_are_read_to_their_end() -> None:
    async def handler(number, reader, writer):
        await server.request(number, reader)
        if number == 0:
            writer.write(
                b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n"
                b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"
            )
            await server.request(number, reader)  # still alive: a second request
            writer.write(OK)
            await server.request(number, reader)
        # No length, no chunking: the body ends with the connection.
        writer.write(b"HTTP/1.1 200 OK\r\nconnection: close\r\n\r\nuntil the end")
        await writer.drain()

    server = RawServer(handler)
    async with server, lean() as client:
        first = await client.get(f"{server.url}/1")
        second = await client.get(f"{server.url}/2")
        third = await client.get(f"{server.url}/3")
        fourth = await client.get(f"{server.url}/4")  # the closed connection is not reused
    assert (first.content, second.content) == (b"hello world", b"ok")
    assert third.content == fourth.content == b"until the end"
    assert [n for n, _ in server.seen] == [0, 0, 0, 1]


async def test_a_large_answer_streams_with_flow_control_and_a_streamed_body_goes_chunked() -> None:
    size = 3 * READ_HIGH_WATER + 12345
    payload = bytes(range(256)) * (size // 256)

    async def handler(number, reader, writer):
        while True:
            await server.request(number, reader)
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n" % len(payload))
            writer.write(payload)
            await writer.drain()

    async def upload():
        for n in range(5):
            yield b"part %d;" % n

    server = RawServer(handler)
    async with server, lean() as client:
        received = bytearray()
        async with client.stream("POST", f"{server.url}/up", content=upload()) as response:
            # Nothing read yet: the connection stops reading past the high-water mark.
            async for chunk in response.aiter_raw():
                received += chunk
        again = await client.get(f"{server.url}/again")
    assert bytes(received) == payload and again.content == payload
    assert server.bodies[0] == b"part 0;part 1;part 2;part 3;part 4;"
    assert [n for n, _ in server.seen] == [0, 0]


async def test_a_request_on_a_stale_keep_alive_connection_is_sent_again_once() -> None:
    async def handler(number, reader, writer):
        await server.request(number, reader)
        if number == 0:
            writer.write(OK)
            await server.request(number, reader)  # then close it unanswered
            return
        writer.write(OK)

    server = RawServer(handler)
    async with server, lean() as client:
        assert (await client.post(f"{server.url}/one", content=b"1")).status_code == 200
        answer = await client.post(f"{server.url}/two", content=b"2")
    assert answer.content == b"ok"
    assert server.seen == [
        (0, b"POST /one HTTP/1.1"),
        (0, b"POST /two HTTP/1.1"),
        (1, b"POST /two HTTP/1.1"),
    ]
    assert client._transport.stale_retries == 1


async def test_a_fresh_connection_that_fails_and_a_one_shot_body_are_not_retried() -> None:
    async def handler(number, reader, writer):
        await server.request(number, reader)
        if number == 1:
            writer.write(OK)
            await server.request(number, reader)

    async def body():
        yield b"streamed"

    server = RawServer(handler)
    async with server, lean() as client:
        with pytest.raises(httpx.RemoteProtocolError, match="without sending a response"):
            await client.post(f"{server.url}/fresh", content=b"1")
        await client.post(f"{server.url}/ok", content=b"1")
        with pytest.raises(httpx.RemoteProtocolError):
            await client.post(f"{server.url}/once", content=body())
    assert [line for _, line in server.seen].count(b"POST /once HTTP/1.1") == 1
    assert client._transport.stale_retries == 0


async def test_hostile_answers_are_protocol_errors_and_their_connections_are_dropped() -> None:
    answers = [
        b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nabc",  # then the connection closes
        b"HTTP/1.1 2x0 nonsense\r\n\r\n",
        b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nokEXTRA BYTES",
        b"HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\nconnection: upgrade\r\n\r\n",
        b"HTTP/1.1 200 OK\r\n" + b"x-pad: " + b"a" * 70_000 + b"\r\n\r\n",  # a head without end
        b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\ntransfer-encoding: chunked\r\n\r\n"
        b"2\r\nok\r\n0\r\n\r\n",
    ]

    async def handler(number, reader, writer):
        await server.request(number, reader)
        writer.write(answers[number] if number < len(answers) else OK)
        await writer.drain()
        if number == 0:
            return
        await reader.read()  # until the client hangs up

    server = RawServer(handler)
    async with server, lean() as client:
        with pytest.raises(httpx.RemoteProtocolError, match="whole response body"):
            await client.get(f"{server.url}/truncated")
        with pytest.raises(httpx.RemoteProtocolError, match="malformed"):
            await client.get(f"{server.url}/garbage")
        # A complete answer followed by bytes nobody asked for: that one is delivered, the
        # connection is not trusted again.
        assert (await client.get(f"{server.url}/extra")).content == b"ok"
        with pytest.raises(httpx.RemoteProtocolError, match="switched protocols"):
            await client.get(f"{server.url}/upgrade")
        with pytest.raises(httpx.RemoteProtocolError, match="over 64 KiB"):
            await client.get(f"{server.url}/endless-head")
        # Both framings at once (a smuggling vector): refused by the parser.
        with pytest.raises(httpx.RemoteProtocolError, match="malformed"):
            await client.get(f"{server.url}/two-framings")
        assert (await client.get(f"{server.url}/fine")).content == b"ok"
    assert [n for n, _ in server.seen] == [0, 1, 2, 3, 4, 5, 6]


async def test_header_injection_is_refused_before_anything_is_sent() -> None:
    async with await serving(keep_answering) as server, lean() as client:
        with pytest.raises(httpx.LocalProtocolError, match="illegal character"):
            await client.get(f"{server.url}/", headers={"x-note": "a\r\nx-evil: 1"})
        assert (await client.get(f"{server.url}/")).status_code == 200
    assert server.seen == [(0, b"GET / HTTP/1.1")]


async def test_a_read_timeout_drops_the_connection_and_gives_its_slot_back() -> None:
    release = asyncio.Event()

    async def handler(number, reader, writer):
        await server.request(number, reader)
        if number == 0:
            await release.wait()  # never answers in time
            return
        writer.write(OK)
        await reader.read()

    server = RawServer(handler)
    async with server, lean() as client:
        with pytest.raises(httpx.ReadTimeout):
            await client.get(f"{server.url}/slow", timeout=httpx.Timeout(10.0, read=0.05))
        assert client._transport.open_connections == 0
        release.set()
        assert (await client.get(f"{server.url}/next")).content == b"ok"
    assert [n for n, _ in server.seen] == [0, 1]


async def test_a_cancelled_request_aborts_its_connection() -> None:
    arrived = asyncio.Event()

    async def handler(number, reader, writer):
        await server.request(number, reader)
        if number == 0:
            arrived.set()
            await reader.read()  # no answer; EOF when the client aborts
            return
        writer.write(OK)
        await reader.read()

    server = RawServer(handler)
    async with server, lean() as client:
        async with anyio.create_task_group() as tg:
            tg.start_soon(client.get, f"{server.url}/hang")
            await arrived.wait()
            tg.cancel_scope.cancel()
        assert client._transport.open_connections == 0
        assert (await client.get(f"{server.url}/after")).content == b"ok"
    assert [n for n, _ in server.seen] == [0, 1]


async def test_the_pool_caps_connections_and_a_full_pool_times_out_as_httpx_does() -> None:
    limits = httpx.Limits(max_connections=3, max_keepalive_connections=3, keepalive_expiry=60)
    async with await serving(keep_answering) as server, lean(limits=limits) as client:
        answers: list[int] = []

        async def post(n: int) -> None:
            answers.append((await client.post(f"{server.url}/{n}", content=b"x")).status_code)

        async with anyio.create_task_group() as tg:
            for n in range(30):
                tg.start_soon(post, n)
        assert answers == [200] * 30 and server.most_open <= 3

        # Three streams held open: a fourth request waits for a slot, then gives up.
        held = [
            await client.send(client.build_request("GET", f"{server.url}/h"), stream=True)
            for _ in range(3)
        ]
        with pytest.raises(httpx.PoolTimeout):
            await client.get(f"{server.url}/wait", timeout=httpx.Timeout(10.0, pool=0.05))
        await held[0].aclose()  # a slot comes back: the next request gets it
        assert (await client.get(f"{server.url}/got")).status_code == 200
        for response in held[1:]:
            await response.aclose()
    assert server.most_open <= 3


async def test_an_expired_or_server_closed_idle_connection_is_not_reused() -> None:
    async def handler(number, reader, writer):
        await server.request(number, reader)
        writer.write(OK)
        if number == 0:
            await writer.drain()
            return  # closes the idle connection right after answering
        while True:
            await server.request(number, reader)
            writer.write(OK)

    server = RawServer(handler)
    async with server, lean() as client:
        transport = client._transport
        await client.get(f"{server.url}/one")
        (idle,) = next(iter(transport.pool._idle.values()))
        closed = asyncio.Event()
        lost = idle.connection_lost

        def seen_closing(exc: Exception | None) -> None:
            lost(exc)
            closed.set()

        idle.connection_lost = seen_closing  # the server's FIN reaches the client
        if not idle.closed:
            with anyio.fail_after(10):
                await closed.wait()
        assert transport.open_connections == 0
        await client.get(f"{server.url}/two")
        transport.pool.keepalive_expiry = 0.0  # every idle connection is expired at once
        await client.get(f"{server.url}/three")
    assert [n for n, _ in server.seen] == [0, 1, 2]
    assert transport.stale_retries == 0


async def test_an_interim_answer_is_skipped_and_head_goes_to_httpx_own_transport() -> None:
    async def handler(number, reader, writer):
        while True:
            headers = await server.request(number, reader)
            if server.seen[-1][1].startswith(b"HEAD"):
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 1234\r\n\r\n")
                continue
            assert b"host" in headers
            writer.write(b"HTTP/1.1 103 Early Hints\r\nlink: </s.css>\r\n\r\n" + OK)

    server = RawServer(handler)
    async with server, lean() as client:
        fallback = client._transport.fallback
        answer = await client.get(f"{server.url}/hinted")
        assert fallback.inner is None  # httpx's pool is built by the first request it serves
        head = await client.head(f"{server.url}/head")
        assert fallback.inner is not None
    assert answer.status_code == 200 and answer.content == b"ok"
    assert head.status_code == 200 and head.content == b""
    assert head.headers["content-length"] == "1234"


async def test_connection_refused_is_a_connect_error() -> None:
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
    port = listener.extra(anyio.abc.SocketAttribute.local_port)  # noqa: S610
    await listener.aclose()  # nothing listens there now
    async with lean() as client:
        with pytest.raises(httpx.ConnectError):
            await client.get(f"http://127.0.0.1:{port}/")
        assert client._transport.open_connections == 0


async def test_tls_verifies_with_the_deferred_trust_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("cryptography.x509")
    from fermix_core.testing.tls import make_pki, serve_tls

    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    server_ctx, _ = make_pki(tmp_path, "localhost", ip="127.0.0.1")
    async with serve_tls(server_ctx) as server, lean() as client:
        with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
            await client.get(f"https://127.0.0.1:{server.port}/")
    monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "ca.pem"))
    async with serve_tls(server_ctx) as server, lean() as client:
        assert not client._transport.ssl_context.built  # no TLS connection yet
        reply = await client.get(f"https://127.0.0.1:{server.port}/page")
        assert client._transport.ssl_context.context.trust_loaded
    assert reply.status_code == 200 and b"secure hello" in reply.content
    assert server.requests[0].startswith(b"GET /page ")


async def test_cookies_a_platform_sets_are_kept_and_sent_back_as_httpx_does() -> None:
    cookie_headers: list[bytes | None] = []

    async def handler(number, reader, writer):
        while True:
            headers = await server.request(number, reader)
            cookie_headers.append(headers.get(b"cookie"))
            if len(cookie_headers) == 2:
                writer.write(
                    b"HTTP/1.1 200 OK\r\nset-cookie: session=abc; Path=/\r\ncontent-length: 2"
                    b"\r\n\r\nok"
                )
            else:
                writer.write(OK)

    server = RawServer(handler)
    async with server, lean() as client:
        await client.get(f"{server.url}/1")
        assert not client.cookies  # nothing set, nothing kept
        await client.get(f"{server.url}/2")
        assert client.cookies.get("session") == "abc"
        await client.get(f"{server.url}/3")
    assert cookie_headers == [None, None, b"session=abc"]


def test_one_client_used_from_one_event_loop_after_another() -> None:
    import http.server
    import threading

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive

        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("content-length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    client = lean()
    url = f"http://127.0.0.1:{server.server_address[1]}/"

    async def get() -> bytes:
        return (await client.get(url)).content

    try:
        assert asyncio.run(get()) == b"ok"
        assert client._transport.open_connections == 1  # kept alive, on a loop now closed
        assert asyncio.run(get()) == b"ok"  # the old loop's connection is not used
        assert client._transport.open_connections == 1
        asyncio.run(client.aclose())
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_a_lean_client_loads_no_httpcore_until_its_fallback_is_needed() -> None:
    """A one-off ``fermix ask`` builds the lean client and sends one POST: httpcore and h11
    (httpx's own pool) stay unimported."""
    probe = (
        "import httpx\n"
        "from fermix_core.httpclient import runtime_client\n"
        "client = runtime_client(lean=True)\n"
    )
    assert loaded_after(probe, ("httpcore", "h11")) == []
