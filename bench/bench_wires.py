"""Provider wire adapters: per-call overhead and streaming throughput over a real socket.

One provider per wire: ``openai`` (Responses), ``openrouter`` (Chat Completions) and
``anthropic`` (Messages). The server is the ``LoopbackServer`` the adapter tests use, run in
a child process so that on a 2-core machine its CPU time is not charged to the adapter; it
answers at once with bodies prepared before timing starts.

A per-call figure alone cannot say whose time it is, so each one is measured in layers:

* ``pure`` — the wire's build/encode and decode/parse functions, called directly;
* ``memory`` — ``provider.chat()`` through httpx with an in-memory transport (no socket);
* ``loopback`` — ``provider.chat()`` over TCP to the server;
* ``http_floor`` — a bare httpx POST of the same bytes to the same server (no adapter);
* ``socket_rtt`` — the same exchange on a bare asyncio socket (no httpx, no adapter).

Streams carry N text deltas, one SSE event per HTTP chunk. ``paced`` is the stock server
(one socket write per event, so its own write cost sets the pace); ``burst`` writes the
same chunks in one go, leaving the client as the only bottleneck. The bare ``iter_sse``
parser is also timed on in-memory bytes cut into chunks of several sizes.

    uv run python bench/run.py wires
    uv run python bench/bench_wires.py --profile    # cProfile: where the time goes
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import importlib.util
import json
import statistics
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

N_EVENTS = 5_000
CALLS = 300
WARMUP = 30
PURE_CALLS = 1_000
STREAM_RUNS = 7
SSE_RUNS = 5
TOOLS = 30
HISTORY = 40
BENCH_KEY = "sk-bench-not-a-real-key"
ANSWER = "A fixed answer of ordinary length, a sentence or two, from the loopback model. " * 4
WORDS = ("the ", "model ", "writes ", "a ", "token ", "at ", "a ", "time. ")
BURST = "/burst"
STREAM_MARK = b'"stream":true'  # bodies are compact JSON (HttpProvider._send)

#: wire -> (provider, request path on the server, model)
WIRES: dict[str, tuple[str, str, str]] = {
    "responses": ("openai", "/responses", "gpt-5.6"),
    "chat_completions": ("openrouter", "/chat/completions", "anthropic/claude-sonnet-4.6"),
    "anthropic_messages": ("anthropic", "/v1/messages", "claude-sonnet-4-6"),
}
JSON_HEADERS = {"content-type": "application/json"}
SSE_HEADERS = {"content-type": "text/event-stream", "cache-control": "no-cache"}

# --------------------------------------------------------------------------- canned replies


def _usage(wire: str, output: int) -> dict[str, int]:
    if wire == "chat_completions":
        return {"prompt_tokens": 1200, "completion_tokens": output, "total_tokens": 1200 + output}
    return {"input_tokens": 1200, "output_tokens": output}


def buffered_body(wire: str) -> bytes:
    """A complete non-streamed answer in the shape the wire documents."""
    model, usage = WIRES[wire][2], _usage(wire, 60)
    if wire == "responses":
        text = {"type": "output_text", "text": ANSWER, "annotations": []}
        item = {"type": "message", "id": "msg_b", "role": "assistant", "content": [text]}
        body: dict[str, Any] = {"id": "resp_b", "object": "response", "status": "completed"}
        body |= {"model": model, "output": [item], "usage": usage}
    elif wire == "chat_completions":
        choice = {"index": 0, "message": {"role": "assistant", "content": ANSWER}}
        body = {"id": "gen-b", "object": "chat.completion", "created": 1_700_000_000}
        body |= {"model": model, "choices": [{**choice, "finish_reason": "stop"}], "usage": usage}
    else:
        body = {"id": "msg_b", "type": "message", "role": "assistant", "model": model}
        body |= {"content": [{"type": "text", "text": ANSWER}], "stop_reason": "end_turn"}
        body["usage"] = usage
    return json.dumps(body).encode()


def stream_events(wire: str, n: int) -> list[bytes]:
    """*n* text deltas framed as the wire frames them, one encoded SSE event per item."""
    from fermix_core.testing.loopback import sse_event

    model = WIRES[wire][2]
    words = [WORDS[i % len(WORDS)] for i in range(n)]
    if wire == "responses":
        item = {"type": "message", "id": "msg_s", "role": "assistant", "status": "in_progress"}
        head = {"id": "resp_s", "object": "response", "status": "in_progress", "model": model}
        text = {"type": "output_text", "text": "".join(words), "annotations": []}
        done_item = {**item, "status": "completed", "content": [text]}
        final = {**head, "status": "completed", "output": [done_item], "usage": _usage(wire, n)}
        events: list[dict[str, Any]] = [
            {"type": "response.created", "response": head},
            {"type": "response.output_item.added", "output_index": 0, "item": item},
        ]
        events += [
            {"type": "response.output_text.delta", "sequence_number": seq, "item_id": "msg_s"}
            | {"output_index": 0, "content_index": 0, "delta": word, "logprobs": []}
            for seq, word in enumerate(words, start=2)
        ]
        events += [
            {"type": "response.output_item.done", "output_index": 0, "item": done_item},
            {"type": "response.completed", "response": final},
        ]
        return [sse_event(event, event["type"]) for event in events]
    if wire == "chat_completions":
        chunk = {"id": "gen-s", "object": "chat.completion.chunk", "created": 1_700_000_000}
        chunk["model"] = model
        out = [
            sse_event(chunk | {"choices": [{"index": 0, "delta": delta, "finish_reason": None}]})
            for delta in ({"role": "assistant", "content": word} for word in words)
        ]
        last = {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
        out.append(sse_event(chunk | last | {"usage": _usage(wire, n)}))
        return [*out, sse_event("[DONE]")]
    message = {"id": "msg_s", "type": "message", "role": "assistant", "model": model}
    events = [
        {"type": "message_start", "message": {**message, "content": [], "usage": {}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text"}},
    ]
    events += [
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": word}}
        for word in words
    ]
    stop = {"stop_reason": "end_turn", "stop_sequence": None}
    events += [
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": stop, "usage": _usage(wire, n)},
        {"type": "message_stop"},
    ]
    return [sse_event(event, event["type"]) for event in events]


def canned(n: int) -> dict[str, tuple[bytes, list[bytes]]]:
    """Request path -> (buffered body, stream items), built once per process."""
    return {
        path: (buffered_body(wire), stream_events(wire, n))
        for wire, (_p, path, _m) in WIRES.items()
    }


# --------------------------------------------------------------------------- server process


async def _serve(n: int) -> None:
    import anyio.to_thread
    from fermix_core.testing.loopback import LoopbackServer, RecordedRequest, Reply

    class Burst(Reply):
        """A stream whose chunked framing is prepared in ``body`` and sent in one write."""

    class BurstServer(LoopbackServer):
        async def _send(self, stream: Any, reply: Reply) -> bool:
            if not isinstance(reply, Burst):
                return await super()._send(stream, reply)
            head = {**reply.headers, "transfer-encoding": "chunked"}
            await stream.send(self._head(reply.status, head) + reply.body)
            return True

    prepared: dict[tuple[str, bool], Reply] = {}
    for path, (buffered, items) in canned(n).items():
        framed = b"".join(b"%x\r\n%s\r\n" % (len(item), item) for item in items) + b"0\r\n\r\n"
        prepared[path, False] = Reply(headers=JSON_HEADERS, body=buffered)
        prepared[path, True] = Reply(headers=SSE_HEADERS, chunks=items)
        prepared[BURST + path, True] = Burst(headers=SSE_HEADERS, body=framed)

    def handler(request: RecordedRequest) -> Reply:
        return prepared[request.path, STREAM_MARK in request.body]

    async with BurstServer(handler) as server:
        print(server.port, flush=True)
        # Serve until the parent closes our stdin (or dies): no polling, no timers.
        await anyio.to_thread.run_sync(sys.stdin.buffer.read)


class _Server:
    """The child process; its stdin is the lifeline, closed to stop it."""

    def __enter__(self) -> str:
        argv = [sys.executable, str(Path(__file__).resolve()), "--serve", str(N_EVENTS)]
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        assert self.proc.stdout is not None
        port = self.proc.stdout.readline().strip()
        if not port.isdigit():
            self.proc.kill()
            raise SystemExit("the loopback server did not start; run it alone with --serve N")
        return f"http://127.0.0.1:{int(port)}"

    def __exit__(self, *exc_info: object) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


# --------------------------------------------------------------------------- requests


def requests(sink: Callable[[Any], None]) -> dict[str, Any]:
    """A small and a large buffered request (30 tools, 40 history messages), and a small
    streamed one. The large history ends on tool results: a tool-loop continuation, the
    most frequent large request a daemon sends."""
    from fermix_core.messages import Message, ToolCall, ToolDefinition, ToolResult
    from fermix_core.provider import ChatRequest

    properties = {
        "path": {"type": "string", "description": "A file path or a URL."},
        "limit": {"type": "integer", "minimum": 1, "maximum": 500},
        "mode": {"type": "string", "enum": ["fast", "thorough"]},
        "tags": {"type": "array", "items": {"type": "string"}},
    }
    tools = [
        ToolDefinition(
            name=f"tool_{i:02d}",
            description=f"Does task number {i} on a file or a URL and returns what it found.",
            parameters={"type": "object", "properties": properties, "required": ["path"]},
        )
        for i in range(TOOLS)
    ]
    history: list[Message] = []
    for cycle in range((HISTORY - 4) // 4):
        call = ToolCall(id=f"call_{cycle}", name=f"tool_{cycle:02d}", arguments={"limit": 50})
        result = ToolResult(call_id=call.id, name=call.name, content="line of output\n" * 30)
        history += [
            Message.user(f"Please look at note {cycle} and tell me what changed since last week."),
            Message.assistant(tool_calls=[call]),
            Message.tool(result),
            Message.assistant(f"Note {cycle} gained two paragraphs about the garden. " * 3),
        ]
    calls = [ToolCall(id=f"call_n{i}", name="tool_01", arguments={"path": f"n{i}"}) for i in (1, 2)]
    history += [Message.user("Now compare the two newest notes.")]
    history += [Message.assistant("Reading both.", tool_calls=calls)]
    history += [
        Message.tool(ToolResult(call_id=c.id, name=c.name, content="text\n" * 40)) for c in calls
    ]
    assert len(history) == HISTORY
    system = Message.system("You are a helpful personal agent. " * 60)
    small = [Message.system("You are a helpful personal agent."), Message.user("What time is it?")]
    return {
        "small": ChatRequest(messages=small),
        "large": ChatRequest(messages=[system, *history], tools=tools),
        "stream": ChatRequest(messages=small, stream=True, on_event=sink),
    }


# --------------------------------------------------------------------------- providers


def _counted(cls: type) -> type:
    """The adapter class, keeping a handle on each stream's own ``StreamStats``: the chunk
    and event counts reported are the ones the adapter itself measured."""

    class Counted(cls):  # type: ignore[misc, valid-type]
        last_stats: Any = None

        def stream_sse(self, path: str, body: Any, stats: Any) -> Any:
            self.last_stats = stats
            return super().stream_sse(path, body, stats)

    return Counted


def make_provider(wire: str, base_url: str, http: Any = None) -> Any:
    from fermix_core.provider import ProviderSettings

    if wire == "responses":
        from fermix_providers.openai.adapter import OpenAIProvider as cls
        from fermix_providers.openai.plugin import SPEC
    elif wire == "chat_completions":
        from fermix_providers.openrouter.adapter import OpenRouterProvider as cls
        from fermix_providers.openrouter.plugin import SPEC
    else:
        from fermix_providers.anthropic.adapter import AnthropicProvider as cls
        from fermix_providers.anthropic.plugin import SPEC

        base_url = f"{base_url}/v1"
    settings = ProviderSettings(name=SPEC.name, base_url=base_url, api_key=BENCH_KEY, http=http)
    return _counted(cls)(SPEC, settings)


def wire_codec(wire: str, provider: Any, request: Any) -> tuple[Callable[[], bytes], Callable]:
    """(build-and-encode, decode-and-parse) for one request, done as the adapter does them."""
    model = WIRES[wire][2]

    def encode(body: dict[str, Any]) -> bytes:
        return json.dumps(body, separators=(",", ":")).encode()  # as HttpProvider._send

    if wire == "responses":
        from fermix_providers.wires.responses import parse_response

        def build() -> bytes:
            return encode(provider.build_body(request, model, stream=request.stream))

        def parse(raw: bytes) -> Any:
            return parse_response(json.loads(raw), provider="openai", model=model)

    elif wire == "chat_completions":

        def build() -> bytes:
            return encode(provider.build_body(request, model))

        def parse(raw: bytes) -> Any:
            return provider.parse_completion(json.loads(raw), model)

    else:
        from fermix_providers.wires.anthropic_messages import ToolNames, build_body, parse_message

        names = ToolNames("", request.tools)

        def build() -> bytes:
            options = provider.wire_options(request, model)
            return encode(build_body(request, options, ToolNames("", request.tools), provider.echo))

        def parse(raw: bytes) -> Any:
            return parse_message("anthropic", json.loads(raw), names, provider.echo, model=model)

    return build, parse


def auth_headers(wire: str, provider: Any) -> dict[str, str]:
    """What the adapter sends, for the bare floors (the Messages key is added per call)."""
    headers = provider.headers()
    if wire == "anthropic_messages":
        headers["x-api-key"] = BENCH_KEY
    return headers


def memory_client(replies: dict[str, tuple[bytes, list[bytes]]]) -> Any:
    """httpx answering like the server but with no socket: isolates httpx + adapter cost."""
    import httpx

    class Chunks(httpx.AsyncByteStream):
        def __init__(self, chunks: list[bytes]) -> None:
            self.chunks = chunks

        async def __aiter__(self) -> AsyncIterator[bytes]:
            for chunk in self.chunks:
                yield chunk

    class Memory(httpx.AsyncBaseTransport):
        async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
            body = await request.aread()
            buffered, items = replies[request.url.path]
            if STREAM_MARK in body:
                return httpx.Response(200, headers=SSE_HEADERS, stream=Chunks(items))
            return httpx.Response(200, headers=JSON_HEADERS, stream=Chunks([buffered]))

    return httpx.AsyncClient(transport=Memory())


# --------------------------------------------------------------------------- measuring


def _pct(samples_ns: list[int]) -> dict[str, float]:
    us = sorted(s / 1000 for s in samples_ns)
    p95 = us[int(0.95 * (len(us) - 1))]
    return {"n": len(us), "p50_us": round(statistics.median(us), 1), "p95_us": round(p95, 1)}


async def _timed(calls: dict[str, Callable[[], Awaitable[Any]]]) -> dict[str, dict]:
    """Wall p50/p95 and mean client CPU per call for each layer, sampled round-robin so
    that drifting machine conditions (2 vCPUs, a second process) hit every layer alike."""
    for call in calls.values():
        for _ in range(WARMUP):
            await call()
    gc.collect()
    wall: dict[str, list[int]] = {name: [] for name in calls}
    cpu = dict.fromkeys(calls, 0)
    for _ in range(CALLS):
        for name, call in calls.items():
            c0, t0 = time.process_time_ns(), time.perf_counter_ns()
            await call()
            t1, c1 = time.perf_counter_ns(), time.process_time_ns()
            wall[name].append(t1 - t0)
            cpu[name] += c1 - c0
    return {
        name: _pct(wall[name]) | {"cpu_us": round(cpu[name] / CALLS / 1000, 1)} for name in calls
    }


def _pure(build: Callable[[], bytes], parse: Callable[[bytes], Any], reply: bytes) -> dict:
    for _ in range(WARMUP):
        parse(reply)
        build()
    gc.collect()
    built, parsed, total = [], [], []
    for _ in range(PURE_CALLS):
        t0 = time.perf_counter_ns()
        build()
        t1 = time.perf_counter_ns()
        parse(reply)
        t2 = time.perf_counter_ns()
        built.append(t1 - t0)
        parsed.append(t2 - t1)
        total.append(t2 - t0)
    return {"build_encode": _pct(built), "decode_parse": _pct(parsed), "total": _pct(total)}


class RawSocket:
    """HTTP/1.1 on a bare asyncio connection: the server-plus-socket floor under httpx."""

    def __init__(self, url: str) -> None:
        self.host, port = url.removeprefix("http://").split(":")
        self.port = int(port)

    async def __aenter__(self) -> RawSocket:
        self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self.writer.close()
        await self.writer.wait_closed()

    def send(self, path: str, body: bytes) -> None:
        head = f"POST {path} HTTP/1.1\r\nhost: bench\r\ncontent-length: {len(body)}\r\n\r\n"
        self.writer.write(head.encode() + body)

    async def exchange(self, path: str, body: bytes) -> None:
        self.send(path, body)
        head = await self.reader.readuntil(b"\r\n\r\n")
        length = head.lower().split(b"content-length:")[1].split(b"\r\n")[0]
        await self.reader.readexactly(int(length))

    async def drain(self, path: str, body: bytes) -> None:
        """Read a chunked reply to its end as fast as bytes arrive (no parsing)."""
        self.send(path, body)
        tail = b""
        while not tail.endswith(b"\r\n0\r\n\r\n"):
            tail = (tail + await self.reader.read(65536))[-16:]


class _Sink:
    """The stream observer: counts deltas, the cheapest a real one could be."""

    def __init__(self) -> None:
        self.deltas = 0

    def __call__(self, event: Any) -> None:
        if event.kind == "text_delta":
            self.deltas += 1


def _rate(runs: list[tuple[float, int, int]]) -> dict[str, Any]:
    """The median run of (seconds, chunks, events) as rates."""
    elapsed, chunks, events = sorted(runs)[len(runs) // 2]
    out: dict[str, Any] = {"runs": len(runs), "median_ms": round(elapsed * 1000, 1)}
    out |= {"chunks": chunks, "chunks_per_s": round(chunks / elapsed)}
    if events:
        out |= {"events": events, "events_per_s": round(events / elapsed)}
        out["us_per_event"] = round(elapsed * 1e6 / events, 2)
    return out


async def _runs(call: Callable[[], Awaitable[tuple[int, int]]], n: int = STREAM_RUNS) -> dict:
    """The median of *n* timed runs (after one warm-up) of a call returning (chunks, events)."""
    runs = []
    for index in range(n + 1):
        gc.collect()
        started = time.perf_counter()
        chunks, events = await call()
        if index:
            runs.append((time.perf_counter() - started, chunks, events))
    return _rate(runs)


async def _stream_rate(provider: Any, request: Any, sink: _Sink) -> dict[str, Any]:
    async def one() -> tuple[int, int]:
        sink.deltas = 0
        turn = await provider.chat(request)
        if sink.deltas != N_EVENTS or len(turn.content) < N_EVENTS:
            raise RuntimeError(f"{provider.name}: {sink.deltas} of {N_EVENTS} deltas arrived")
        return provider.last_stats.chunks, provider.last_stats.events

    return await _runs(one)


async def _sse_rate(chunks: list[bytes]) -> dict[str, Any]:
    from fermix_providers.http.sse import StreamStats, iter_sse

    stats = StreamStats()

    async def feed() -> AsyncIterator[bytes]:
        for chunk in chunks:
            yield chunk

    async def one() -> tuple[int, int]:
        stats.events = stats.bytes = 0
        async for _event in iter_sse(feed(), stats):
            pass
        return len(chunks), stats.events

    result = await _runs(one, SSE_RUNS)
    result["mb_per_s"] = round(stats.bytes / (result["median_ms"] / 1000) / 1e6, 1)
    return result


async def _per_call(wire: str, request: Any, env: dict[str, Any]) -> dict[str, Any]:
    live, offline, client, url = env["live"], env["offline"], env["client"], env["url"]
    build, parse = wire_codec(wire, live, request)
    raw, path = build(), WIRES[wire][1]
    reply = env["replies"][path][0]
    headers = auth_headers(wire, live)

    async def floor() -> None:
        (await client.post(f"{url}{path}", content=raw, headers=headers)).raise_for_status()

    entry: dict[str, Any] = {"request_bytes": len(raw), "response_bytes": len(reply)}
    entry["pure"] = _pure(build, parse, reply)
    async with RawSocket(url) as sock:
        layers = {
            "memory": lambda: offline.chat(request),
            "loopback": lambda: live.chat(request),
            "http_floor": floor,
            "socket_rtt": lambda: sock.exchange(path, raw),
        }
        entry |= await _timed(layers)
    p50 = {key: entry[key]["p50_us"] for key in layers}
    entry["adapter_over_http_floor_p50_us"] = round(p50["loopback"] - p50["http_floor"], 1)
    entry["socket_and_transport_p50_us"] = round(p50["loopback"] - p50["memory"], 1)
    return entry


async def _streams(wire: str, request: Any, env: dict[str, Any], sink: _Sink) -> dict:
    live, client, url, path = env["live"], env["client"], env["url"], WIRES[wire][1]
    raw = wire_codec(wire, live, request)[0]()
    headers = auth_headers(wire, live)

    async def httpx_burst() -> tuple[int, int]:
        chunks = 0
        async with client.stream("POST", f"{url}{BURST}{path}", content=raw, headers=headers) as r:
            async for _chunk in r.aiter_raw():
                chunks += 1
        return chunks, 0

    async def socket_paced() -> tuple[int, int]:
        async with RawSocket(url) as sock:
            await sock.drain(path, raw)
        return len(env["replies"][path][1]), 0  # the server writes one chunk per event

    burst = make_provider(wire, f"{url}{BURST}")
    result = {
        "paced": await _stream_rate(live, request, sink),
        "burst": await _stream_rate(burst, request, sink),
        "memory": await _stream_rate(env["offline"], request, sink),
        "http_floor_burst": await _runs(httpx_burst),
        "server_pace": await _runs(socket_paced),
    }
    await burst.aclose()
    return result


async def _measure(url: str) -> dict[str, Any]:
    from fermix_providers.http.base import new_client

    sink = _Sink()
    reqs = requests(sink)
    replies = canned(N_EVENTS)
    client, memory = new_client(), memory_client(replies)
    out: dict[str, Any] = {}
    for wire, (provider_name, _path, _model) in WIRES.items():
        env = {"url": url, "client": client, "replies": replies, "live": make_provider(wire, url)}
        env["offline"] = make_provider(wire, "http://memory.invalid", http=memory)
        result: dict[str, Any] = {"provider": provider_name}
        for size in ("small", "large"):
            result[size] = await _per_call(wire, reqs[size], env)
        result["stream"] = await _streams(wire, reqs["stream"], env, sink)
        await env["live"].aclose()
        out[wire] = result
    await client.aclose()
    await memory.aclose()
    return out


async def _measure_sse() -> dict[str, Any]:
    out: dict[str, Any] = {}
    for wire in WIRES:
        items = stream_events(wire, N_EVENTS)
        data = b"".join(items)
        cut = {
            size: [data[i : i + size] for i in range(0, len(data), size)] for size in (4096, 65536)
        }
        out[wire] = {
            "bytes": len(data),
            "one_event_per_chunk": await _sse_rate(items),
            "chunks_4KiB": await _sse_rate(cut[4096]),
            "chunks_64KiB": await _sse_rate(cut[65536]),
            "one_chunk": await _sse_rate([data]),
        }
    return out


def _import_cost(name: str) -> float:
    """What one ``import name`` costs here; Python does not cache a failed import."""
    started = time.perf_counter()
    for _ in range(200):
        with contextlib.suppress(ImportError):
            __import__(name)  # the statement httpcore runs
    return round((time.perf_counter() - started) / 200 * 1e6, 1)


def run() -> dict:
    import anyio

    with _Server() as url:
        wires = anyio.run(_measure, url)
    return {
        "events_per_stream": N_EVENTS,
        "calls_per_figure": CALLS,
        "large_request": {"tools": TOOLS, "history_messages": HISTORY},
        # httpcore imports sniffio on every lock it creates; absent, each attempt is a
        # failed import (uncached) that searches sys.path. It moves the per-call numbers.
        "sniffio_installed": importlib.util.find_spec("sniffio") is not None,
        "import_sniffio_us": _import_cost("sniffio"),
        "wires": wires,
        "iter_sse_in_memory": anyio.run(_measure_sse),
    }


# --------------------------------------------------------------------------- profiling


def profile() -> None:
    """cProfile of one in-memory stream and the large build per wire, and of loopback calls."""
    import cProfile
    import pstats

    import anyio

    reqs = requests(_Sink())
    memory = memory_client(canned(N_EVENTS))

    def show(title: str, profiler: cProfile.Profile, rows: int) -> None:
        print(f"\n===== {title} =====")
        pstats.Stats(profiler).sort_stats("tottime").print_stats(rows)

    async def main() -> None:
        for wire in WIRES:
            provider = make_provider(wire, "http://memory.invalid", http=memory)
            await provider.chat(reqs["stream"])  # warm
            with cProfile.Profile() as profiler:
                await provider.chat(reqs["stream"])
            show(f"{wire}: one stream of {N_EVENTS} deltas, in memory", profiler, 14)
            build, _parse = wire_codec(wire, provider, reqs["large"])
            build()
            with cProfile.Profile() as profiler:
                for _ in range(200):
                    build()
            show(f"{wire}: 200 builds of the large request", profiler, 8)

    async def calls(url: str) -> None:
        provider = make_provider("responses", url)
        for _ in range(WARMUP):
            await provider.chat(reqs["small"])
        with cProfile.Profile() as profiler:
            for _ in range(200):
                await provider.chat(reqs["small"])
        show("responses: 200 small calls over loopback", profiler, 12)
        await provider.aclose()

    anyio.run(main)
    with _Server() as url:
        anyio.run(calls, url)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--serve"]:
        import anyio

        anyio.run(_serve, int(sys.argv[2]))
    elif sys.argv[1:2] == ["--profile"]:
        profile()
    else:
        print(json.dumps(run(), indent=2))
