"""A scripted HTTP/1.1 server on a real loopback socket, for testing adapters end to end.

Adapters are tested against the real wire: real TCP, real HTTP framing, chunked transfer
encoding and Server-Sent Events, plus the failures that matter for retry policy — a
server that never answers (pre-response stall), one that stops mid-stream, and one that
cuts the connection. Nothing here sleeps to synchronise: a stall waits on an event that
is released when the server closes or the test calls :meth:`LoopbackServer.release`.

Example::

    async with LoopbackServer() as server:
        server.queue(Reply(sse=[{"type": "response.output_text.delta", "delta": "hi"}]))
        provider = make_provider(base_url=server.url)
        ...
        assert server.requests[0].json()["model"] == "gpt-5.6"
"""

from __future__ import annotations

import inspect
import json
from collections import deque
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio
from anyio.abc import SocketStream, TaskGroup

__all__ = [
    "LoopbackServer",
    "RecordedRequest",
    "Reply",
    "ThreadedLoopback",
    "chat_chunk",
    "chat_completion",
    "chat_completion_stream",
    "sse_event",
]

_REASONS = {
    200: "OK",
    201: "Created",
    204: "No Content",
    400: "Bad Request",
    401: "Unauthorized",
    402: "Payment Required",
    403: "Forbidden",
    404: "Not Found",
    408: "Request Timeout",
    413: "Payload Too Large",
    422: "Unprocessable Entity",
    429: "Too Many Requests",
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
    504: "Gateway Timeout",
    529: "Overloaded",
}


def sse_event(data: Any, event: str | None = None) -> bytes:
    """One SSE event; *data* that is not a string is JSON-encoded."""
    payload = data if isinstance(data, str) else json.dumps(data)
    lines = [f"event: {event}"] if event else []
    lines += [f"data: {line}" for line in payload.split("\n")]
    return ("\n".join(lines) + "\n\n").encode()


@dataclass
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)

    def header(self, name: str) -> str | None:
        return self.headers.get(name.lower())


@dataclass
class Reply:
    """What the server does for one request.

    ``body`` (bytes, str, or a JSON-able object) is sent with a Content-Length. ``chunks``
    or ``sse`` are streamed with chunked transfer encoding, one network write per item
    (``sse`` items become events: a dict/str is data, a ``(event, data)`` tuple names the
    event). ``stall`` never sends the status line; ``stall_after`` stops after that many
    chunks and waits; ``cut_after`` closes the socket after that many chunks without the
    terminating zero-length chunk. ``before_item`` holds a stream between items.
    """

    status: int = 200
    headers: Mapping[str, str] = field(default_factory=dict)
    body: Any = None
    chunks: Sequence[bytes | str] | None = None
    sse: Sequence[Any] | None = None
    stall: bool = False
    stall_after: int | None = None
    cut_after: int | None = None
    #: Awaited with each streamed item's index before it is written, so a test can hold
    #: a stream mid-way until something else happened (an event, never a sleep).
    before_item: Callable[[int], Awaitable[None]] | None = None

    def stream_items(self) -> list[bytes] | None:
        if self.sse is not None:
            items = []
            for item in self.sse:
                if isinstance(item, tuple):
                    items.append(sse_event(item[1], item[0]))
                else:
                    items.append(sse_event(item))
            return items
        if self.chunks is not None:
            return [c.encode() if isinstance(c, str) else c for c in self.chunks]
        return None


Handler = Callable[[RecordedRequest], "Reply | Awaitable[Reply]"]


class _Stop(Exception):
    pass


class LoopbackServer:
    """Serves queued :class:`Reply` objects (or a handler) on ``127.0.0.1:<random port>``."""

    def __init__(self, handler: Handler | None = None) -> None:
        self.handler = handler
        self.replies: deque[Reply] = deque()
        self.requests: list[RecordedRequest] = []
        self.connections = 0
        self._release = anyio.Event()
        self._task_group: TaskGroup | None = None
        self._listener: Any = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def queue(self, *replies: Reply) -> None:
        self.replies.extend(replies)

    def release(self) -> None:
        """Let every stalled reply finish by closing its connection."""
        self._release.set()

    async def __aenter__(self) -> LoopbackServer:
        self._listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
        self.port = self._listener.extra(anyio.abc.SocketAttribute.local_port)  # noqa: S610
        self._task_group = anyio.create_task_group()
        await self._task_group.__aenter__()
        self._task_group.start_soon(self._listener.serve, self._serve_connection)
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self.release()
        assert self._task_group is not None
        self._task_group.cancel_scope.cancel()
        await self._task_group.__aexit__(None, None, None)
        await self._listener.aclose()

    async def _serve_connection(self, stream: SocketStream) -> None:
        self.connections += 1
        reader = _Reader(stream)
        try:
            while True:
                request = await reader.read_request()
                if request is None:
                    return
                self.requests.append(request)
                reply = await self._reply_for(request)
                keep_open = await self._send(stream, reply)
                if not keep_open:
                    return
        except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError, _Stop):
            return
        finally:
            await stream.aclose()

    async def _reply_for(self, request: RecordedRequest) -> Reply:
        if self.handler is not None:
            result = self.handler(request)
            if isinstance(result, Awaitable):
                result = await result
            return result  # type: ignore[return-value]
        if not self.replies:
            return Reply(
                status=500, body={"error": {"message": "loopback server: no reply queued"}}
            )
        return self.replies.popleft()

    async def _send(self, stream: SocketStream, reply: Reply) -> bool:
        if reply.stall:
            await self._release.wait()
            return False
        items = reply.stream_items()
        headers = {k.lower(): v for k, v in reply.headers.items()}
        if items is None:
            body = reply.body
            if body is None:
                payload = b""
            elif isinstance(body, bytes):
                payload = body
            elif isinstance(body, str):
                payload = body.encode()
            else:
                payload = json.dumps(body).encode()
                headers.setdefault("content-type", "application/json")
            headers["content-length"] = str(len(payload))
            await stream.send(self._head(reply.status, headers) + payload)
            return True
        if reply.sse is not None:
            headers.setdefault("content-type", "text/event-stream")
            headers.setdefault("cache-control", "no-cache")
        headers["transfer-encoding"] = "chunked"
        await stream.send(self._head(reply.status, headers))
        for index, item in enumerate(items):
            if reply.cut_after is not None and index >= reply.cut_after:
                return False
            if reply.stall_after is not None and index >= reply.stall_after:
                await self._release.wait()
                return False
            if reply.before_item is not None:
                await reply.before_item(index)
            await stream.send(f"{len(item):x}\r\n".encode() + item + b"\r\n")
        if reply.cut_after is not None and reply.cut_after >= len(items):
            return False
        if reply.stall_after is not None and reply.stall_after >= len(items):
            await self._release.wait()
            return False
        await stream.send(b"0\r\n\r\n")
        return True

    @staticmethod
    def _head(status: int, headers: Mapping[str, str]) -> bytes:
        lines = [f"HTTP/1.1 {status} {_REASONS.get(status, 'Status')}"]
        lines += [f"{name}: {value}" for name, value in headers.items()]
        return ("\r\n".join(lines) + "\r\n\r\n").encode()


class _Reader:
    """Minimal HTTP/1.1 request reader: request line, headers, Content-Length or chunked body."""

    def __init__(self, stream: SocketStream) -> None:
        self.stream = stream
        self.buffer = b""

    async def _fill(self) -> bool:
        try:
            data = await self.stream.receive()
        except anyio.EndOfStream:
            return False
        self.buffer += data
        return True

    async def _line(self) -> bytes | None:
        while b"\r\n" not in self.buffer:
            if not await self._fill():
                return None
        line, _, self.buffer = self.buffer.partition(b"\r\n")
        return line

    async def _exactly(self, size: int) -> bytes:
        while len(self.buffer) < size:
            if not await self._fill():
                raise _Stop()
        data, self.buffer = self.buffer[:size], self.buffer[size:]
        return data

    async def read_request(self) -> RecordedRequest | None:
        line = await self._line()
        if not line:
            return None
        method, target, _ = line.decode("latin-1").split(" ", 2)
        headers: dict[str, str] = {}
        while True:
            header = await self._line()
            if header is None:
                raise _Stop()
            if header == b"":
                break
            name, _, value = header.decode("latin-1").partition(":")
            headers[name.strip().lower()] = value.strip()
        if headers.get("transfer-encoding", "").lower() == "chunked":
            body = b""
            while True:
                size_line = await self._line()
                if size_line is None:
                    raise _Stop()
                size = int(size_line.split(b";")[0], 16)
                if size == 0:
                    await self._line()
                    break
                body += await self._exactly(size)
                await self._exactly(2)
        else:
            body = await self._exactly(int(headers.get("content-length", "0") or 0))
        return RecordedRequest(method, target, headers, body)


class ThreadedLoopback:
    """A :class:`LoopbackServer` on its own event-loop thread, for tests that drive
    subprocesses (a real daemon, the CLI) with blocking calls while the server answers.

    Example::

        with ThreadedLoopback(handler) as server:
            subprocess.run(["fermix", "ask", "hi"], env={..., "BASE": server.url})
            server.call(gate.set)  # run a function on the server's loop thread
    """

    def __init__(self, handler: Handler | None = None) -> None:
        self.server = LoopbackServer(handler)
        self._portal_cm: Any = None
        self.portal: Any = None

    @property
    def url(self) -> str:
        return self.server.url

    @property
    def requests(self) -> list[RecordedRequest]:
        return self.server.requests

    def call(self, func: Callable[..., Any], *args: Any) -> Any:
        """Run *func* on the server's loop thread (e.g. ``event.set``); awaits coroutines."""
        if inspect.iscoroutinefunction(func):
            return self.portal.call(func, *args)
        return self.portal.call(_sync_call, func, *args)

    def __enter__(self) -> ThreadedLoopback:
        from anyio.from_thread import start_blocking_portal

        self._portal_cm = start_blocking_portal()
        self.portal = self._portal_cm.__enter__()
        self._server_cm = self.portal.wrap_async_context_manager(self.server)
        self._server_cm.__enter__()
        return self

    def __exit__(self, *exc_info: Any) -> None:
        try:
            self._server_cm.__exit__(*exc_info)
        finally:
            self._portal_cm.__exit__(*exc_info)


async def _sync_call(func: Callable[..., Any], *args: Any) -> Any:
    return func(*args)


def chat_completion(text: str, *, model: str = "qwen3") -> Reply:
    """A non-streamed OpenAI-compatible Chat Completions answer of *text* (with usage)."""
    import time

    return Reply(
        body={
            "id": "chatcmpl-loopback",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 10, "completion_tokens": 6, "total_tokens": 16},
        }
    )


def chat_chunk(delta: dict[str, Any], finish: str | None = None, *, model: str = "qwen3") -> dict:
    """One OpenAI-compatible ``chat.completion.chunk`` SSE event body."""
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    return {
        "id": "chatcmpl-loopback",
        "object": "chat.completion.chunk",
        "model": model,
        "choices": [choice],
    }


def chat_completion_stream(text: str, *, model: str = "qwen3") -> Reply:
    """A streamed Chat Completions answer of *text*: one content delta, stop, ``[DONE]``."""
    return Reply(
        sse=[
            chat_chunk({"role": "assistant", "content": text}, model=model),
            chat_chunk({}, "stop", model=model),
            "[DONE]",
        ]
    )
