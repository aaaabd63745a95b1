"""The providers' client of a service (:class:`fermix_core.directclient.DirectClient`)
against loopback servers: what it puts on the wire next to what httpx sends for the same
call, bodies read whole and streamed, content codings, httpx's errors, and the calls it
hands to the full httpx client. The adapters' own suites run through it as well
(``both_clients`` in the provider tests)."""

from __future__ import annotations

import asyncio
import gzip
import zlib
from collections.abc import Awaitable, Callable

import httpx
import pytest
from fermix_core.directclient import DirectRequest, DirectResponse, Headers
from fermix_core.httpclient import USER_AGENT, provider_client
from fermix_core.testing.imports import loaded_after
from fermix_core.testing.loopback import LoopbackServer, Reply

pytestmark = pytest.mark.anyio

Answer = Callable[[bytes], Awaitable[bytes | None]]
TIMEOUT = (5.0, 5.0, 5.0, 5.0)


class Capture:
    """A raw HTTP/1.1 server that records each request's bytes and answers with *answer*
    (``None``: say nothing and keep the connection open)."""

    def __init__(self, answer: Answer) -> None:
        self.answer = answer
        self.heads: list[bytes] = []
        self.bodies: list[bytes] = []
        self._held: list[asyncio.StreamWriter] = []

    async def __aenter__(self) -> Capture:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        for writer in self._held:
            writer.close()
        self.server.close()
        await self.server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":", 1)[1])
                self.heads.append(head)
                self.bodies.append(await reader.readexactly(length))
                reply = await self.answer(head)
                if reply is None:
                    self._held.append(writer)
                    return
                writer.write(reply)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()


def answering(body: bytes, *headers: str) -> Answer:
    async def answer(head: bytes) -> bytes:
        lines = "".join(f"{h}\r\n" for h in headers)
        return f"HTTP/1.1 200 OK\r\n{lines}content-length: {len(body)}\r\n\r\n".encode() + body

    return answer


def header_lines(head: bytes) -> tuple[bytes, dict[bytes, bytes]]:
    line, *rest = head[:-4].split(b"\r\n")
    return line, {n.strip().lower(): v.strip() for n, _, v in (r.partition(b":") for r in rest)}


async def test_a_provider_call_goes_on_the_wire_as_httpx_sends_it() -> None:
    """Same request line, same headers (names and values), same body as httpx's client
    with the runtime's user agent."""
    async with Capture(answering(b'{"ok":true}', "content-type: application/json")) as server:
        body = b'{"model":"m","stream":true}'
        headers = {"content-type": "application/json", "authorization": "Bearer sk-test"}
        url = f"{server.url}/v1/chat/completions?x=1"
        async with httpx.AsyncClient(headers={"user-agent": USER_AGENT}) as reference:
            answer = await reference.post(url, content=body, headers=headers)
            assert answer.json() == {"ok": True}
        async with provider_client() as client:
            request = client.build_request(
                "POST", url, content=body, headers=headers, timeout=TIMEOUT
            )
            assert isinstance(request, DirectRequest)
            response = await client.send(request)
            assert response.status_code == 200 and response.json() == {"ok": True}
            assert not client.full_built  # httpx's client was never needed
    theirs, ours = (header_lines(head) for head in server.heads)
    assert ours == theirs
    assert ours[0] == b"POST /v1/chat/completions?x=1 HTTP/1.1"
    assert server.bodies == [body, body]


async def test_a_body_streams_raw_and_reads_whole_decoded() -> None:
    """``aiter_raw`` gives the bytes as sent (SSE parsing reads them); ``aread``/``text``/
    ``json`` decode gzip and deflate as httpx does."""
    payload = b'{"text":"h\xc3\xa9llo"}'
    for coding, encoded in (
        ("gzip", gzip.compress(payload)),
        ("deflate", zlib.compress(payload)),
        ("deflate", zlib.compress(payload)[2:-4]),  # raw deflate, as some servers send it
        ("identity", payload),
    ):
        answer = answering(encoded, f"content-encoding: {coding}", "content-type: application/json")
        async with Capture(answer) as server, provider_client() as client:
            whole = await client.send(
                client.build_request("POST", server.url, content=b"{}", timeout=TIMEOUT)
            )
            assert whole.content == payload and whole.json() == {"text": "héllo"}
            assert whole.text == '{"text":"héllo"}' and whole.is_closed
            streamed = await client.send(
                client.build_request("POST", server.url, content=b"{}", timeout=TIMEOUT),
                stream=True,
            )
            assert b"".join([piece async for piece in streamed.aiter_raw()]) == encoded
            assert streamed.is_closed
            # Both connections went back to the pool and the second call reused the first.
            assert client.pool.open_connections == 1


async def test_a_damaged_compressed_body_is_httpx_decoding_error() -> None:
    async with (
        Capture(answering(b"not gzip at all", "content-encoding: gzip")) as server,
        provider_client() as client,
    ):
        with pytest.raises(httpx.DecodingError, match="gzip"):
            await client.send(client.build_request("POST", server.url, timeout=TIMEOUT))


async def test_an_error_answer_keeps_status_headers_and_text_for_the_classifier() -> None:
    async with LoopbackServer() as server, provider_client() as client:
        server.queue(
            Reply(
                status=429,
                headers={"Retry-After": "7", "X-RateLimit-Reset-Requests": "2s"},
                body={"error": {"message": "slow down"}},
            )
        )
        response = await client.send(
            client.build_request("POST", f"{server.url}/v1/x", content=b"{}", timeout=TIMEOUT)
        )
        assert response.status_code == 429
        assert response.headers["retry-after"] == "7" and "RETRY-AFTER" in response.headers
        assert dict(response.headers.items())["x-ratelimit-reset-requests"] == "2s"
        assert "slow down" in response.text


def test_headers_read_as_httpx_shows_them() -> None:
    headers = Headers(
        [(b"Set-Thing", b"a"), (b"Content-Type", b"text/plain"), (b"set-thing", b"b")]
    )
    assert headers["set-thing"] == "a, b" and headers.get("SET-THING") == "a, b"
    assert headers.get_list("Set-Thing") == ["a", "b"]
    assert list(headers) == ["set-thing", "content-type"] and len(headers) == 2
    assert headers.get("missing") is None and "content-type" in headers and 3 not in headers


async def test_transport_failures_are_httpx_errors() -> None:
    """Refused, timed out before the head, injected headers: httpx's exception types, so
    the adapters classify them as they do httpx's."""
    async with Capture(answering(b"")) as closed:
        refused_url = closed.url
    async with provider_client() as client:
        with pytest.raises(httpx.ConnectError, match=r"127\.0\.0\.1"):
            await client.send(client.build_request("POST", refused_url, timeout=TIMEOUT))

    async def silent(head: bytes) -> None:
        return None

    async with Capture(silent) as server, provider_client() as client:
        request = client.build_request("POST", server.url, timeout=(5.0, 0.2, 5.0, 5.0))
        with pytest.raises(httpx.ReadTimeout):
            await client.send(request)
        assert client.pool.open_connections == 0  # the dead connection gave its slot back
        with pytest.raises(httpx.LocalProtocolError, match="illegal character"):
            client.build_request("POST", server.url, headers={"x-a": "1\r\nx-b: 2"})
        assert len(server.heads) == 1  # nothing of the refused request reached the server


async def test_a_stale_keep_alive_connection_is_sent_again_once() -> None:
    """The server answers and closes without saying so; the next call goes out again on a
    fresh connection instead of failing."""

    async def answer_then_close(head: bytes) -> bytes:
        return b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok"

    async with Capture(answer_then_close) as server, provider_client() as client:
        first = await client.send(client.build_request("POST", server.url, timeout=TIMEOUT))
        assert first.content == b"ok"
        (idle,) = next(iter(client.pool._idle.values()))
        idle.transport.close()  # as a server's idle timeout would close it, unannounced
        idle.closed = False  # ... before this side has noticed
        second = await client.send(client.build_request("POST", server.url, timeout=TIMEOUT))
        assert second.content == b"ok" and client.pool.stale_retries == 1


async def test_other_calls_go_to_httpx_full_client() -> None:
    """Speech to text's ``post(files=…)``, ``params=``, credentials in the URL, a non-ASCII
    header: httpx's client (and its errors), built on first use and closed with this one."""
    async with LoopbackServer() as server:
        server.queue(Reply(body={"a": 1}), Reply(body={"b": 2}), Reply(body={"c": 3}))
        client = provider_client()
        response = await client.post(f"{server.url}/upload", files={"f": ("a.wav", b"RIFF")})
        assert isinstance(response, httpx.Response) and response.json() == {"a": 1}
        assert client.full_built
        for request in (
            client.build_request("GET", f"{server.url}/q", params={"x": "1"}),
            client.build_request("POST", server.url.replace("//", "//u:p@"), content=b"{}"),
        ):
            assert isinstance(request, httpx.Request)
        with pytest.raises(UnicodeEncodeError):  # httpx's own answer to a non-ASCII header
            client.build_request("POST", server.url, headers={"x-name": "é"})
        answered = await client.send(
            client.build_request("GET", f"{server.url}/q", params={"x": 1})
        )
        assert answered.json() == {"b": 2}
        full, pending = client.full, client.build_request("POST", server.url, timeout=TIMEOUT)
        await client.aclose()
        assert client.is_closed and full.is_closed
        with pytest.raises(RuntimeError, match="closed"):
            await client.send(pending)
    assert server.requests[0].header("content-type").startswith("multipart/form-data")
    assert server.requests[1].path == "/q?x=1"


def test_outside_an_asyncio_loop_requests_are_httpx_own() -> None:
    """No running asyncio loop (trio, or a request built ahead of time): httpx's request,
    which its own transport serves on any loop."""
    client = provider_client()
    request = client.build_request("POST", "http://127.0.0.1:9/x", content=b"{}")
    assert isinstance(request, httpx.Request) and client.full_built


async def test_a_response_reads_once_and_says_so_when_not_read() -> None:
    async with (
        Capture(answering(b"data: 1\n\n", "content-type: text/event-stream")) as server,
        provider_client() as client,
    ):
        response = await client.send(
            client.build_request("POST", server.url, timeout=TIMEOUT), stream=True
        )
        assert isinstance(response, DirectResponse)
        with pytest.raises(RuntimeError, match="not been read"):
            response.content  # noqa: B018
        await response.aclose()
        with pytest.raises(RuntimeError, match="closed"):
            [piece async for piece in response.aiter_raw()]


def test_a_provider_call_loads_no_httpx() -> None:
    """What a one-off ask's model call costs in imports: the wire, not httpx (the stand-in
    server here loads ``http.client`` and ``email`` itself; the cold-ask test checks that an
    ask loads neither)."""
    probe = (
        "import asyncio, threading\n"
        "from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer\n"
        "class H(BaseHTTPRequestHandler):\n"
        "    def do_POST(self):\n"
        "        self.rfile.read(int(self.headers['content-length']))\n"
        "        self.send_response(200); self.send_header('content-length', '2')\n"
        "        self.end_headers(); self.wfile.write(b'{}')\n"
        "    def log_message(self, *a): pass\n"
        "server = ThreadingHTTPServer(('127.0.0.1', 0), H)\n"
        "threading.Thread(target=server.serve_forever, daemon=True).start()\n"
        "from fermix_core.httpclient import provider_client\n"
        "async def main():\n"
        "    async with provider_client() as client:\n"
        "        url = f'http://127.0.0.1:{server.server_address[1]}/v1/x'\n"
        "        r = await client.send(client.build_request('POST', url, content=b'{}'))\n"
        "        assert r.json() == {}\n"
        "asyncio.run(main())\n"
    )
    assert loaded_after(probe, ("httpx", "httpcore", "h11", "http.cookiejar")) == []
