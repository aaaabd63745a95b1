"""MCP tool calls: our own overhead per call (stdio and Streamable HTTP), and boot with 5 servers.

The server is the SDK's own ``MCPServer`` (the tests' ``mcp_test_server.py``) in a
subprocess, answering ``echo``. For each transport, ``CALLS`` calls go through the whole
fermix path (``McpTool.invoke``: argument check, the runner's bounded call, the result
converted to a ``ToolOutput``) and the same number straight through the SDK's
``ClientSession.call_tool`` on the same session, interleaved; ``overhead_p50_ms`` is the
difference of the medians — what fermix adds on top of the protocol. Budget from the MCP
issue: <= 2 ms p50.

Boot: five stdio servers configured, one of which never answers the handshake. ``serve``
must report started at once (readiness never waits); the time until the four healthy ones
are ready is recorded alongside.
"""

from __future__ import annotations

import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio

CALLS = 300
SERVER = Path(__file__).parents[1] / "packages/fermix-core/tests/mcp/mcp_test_server.py"


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _manager(servers: dict, base: Path):
    from fermix_core.agent import CapabilityRegistry
    from fermix_core.config.models import McpServer
    from fermix_core.mcp.manager import McpManager

    return McpManager(
        {name: McpServer.model_validate(cfg) for name, cfg in servers.items()},
        CapabilityRegistry([]),
        child_env=lambda extra: {"PATH": "/usr/bin:/bin", **extra},
        headers=lambda name: {},
        workspace=base,
        logs=base / "logs",
    )


async def _calls(name: str, config: dict, base: Path) -> dict:
    from types import SimpleNamespace

    from fermix_core.tool import ToolContext, Trust

    mgr = _manager({name: config}, base)
    runner = mgr.runner(name)
    ctx = ToolContext(trust=Trust.OPERATOR, cwd=base, home=SimpleNamespace(path=base))
    ours: list[float] = []
    raw: list[float] = []
    async with anyio.create_task_group() as tg:
        await tg.start(mgr.serve)
        await runner.wait_for(lambda r: r.state == "ready")
        tool = mgr.capabilities.tool(f"mcp_{name}_echo")
        session = runner._session
        for _ in range(20):  # warm-up
            await tool.invoke({"text": "x"}, ctx)

        async def through_fermix() -> None:
            started = time.perf_counter()
            output = await tool.invoke({"text": "x"}, ctx)
            ours.append((time.perf_counter() - started) * 1000)
            assert output.text == "x", output

        async def through_sdk() -> None:
            started = time.perf_counter()
            await session.call_tool("echo", {"text": "x"}, read_timeout_seconds=60)
            raw.append((time.perf_counter() - started) * 1000)

        for i in range(CALLS):  # alternate the order so neither side always goes first
            pair = (through_fermix, through_sdk) if i % 2 else (through_sdk, through_fermix)
            for step in pair:
                await step()
        tg.cancel_scope.cancel()
    return {
        "calls": CALLS,
        "fermix_p50_ms": round(statistics.median(ours), 3),
        "fermix_p99_ms": round(_pct(ours, 0.99), 3),
        "sdk_p50_ms": round(statistics.median(raw), 3),
        "sdk_p99_ms": round(_pct(raw, 0.99), 3),
        "overhead_p50_ms": round(statistics.median(ours) - statistics.median(raw), 3),
    }


async def _boot(base: Path) -> dict:
    healthy = {"command": [sys.executable, str(SERVER), "stdio"]}
    silent = {"command": [sys.executable, "-c", "import time; time.sleep(600)"]}
    servers = {f"s{i}": healthy for i in range(4)}
    servers["silent"] = {**silent, "timeout_seconds": 600}
    mgr = _manager(servers, base)
    async with anyio.create_task_group() as tg:
        started = time.perf_counter()
        await tg.start(mgr.serve)
        serve_ms = (time.perf_counter() - started) * 1000
        for name in ("s0", "s1", "s2", "s3"):
            await mgr.runner(name).wait_for(lambda r: r.state == "ready")
        all_ready_ms = (time.perf_counter() - started) * 1000
        silent_state = mgr.runner("silent").state
        tg.cancel_scope.cancel()
    return {
        "servers": 5,
        "serve_returns_ms": round(serve_ms, 3),
        "four_healthy_ready_ms": round(all_ready_ms, 1),
        "silent_server_state_meanwhile": silent_state,
    }


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


async def _measure(base: Path) -> dict:
    import subprocess

    stdio = await _calls("io", {"command": [sys.executable, str(SERVER), "stdio"]}, base)
    port = _free_port()
    proc = await anyio.open_process(
        [sys.executable, str(SERVER), "http", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        http = await _calls("web", {"url": f"http://127.0.0.1:{port}/mcp"}, base)
    finally:
        proc.terminate()
        await proc.wait()
    boot = await _boot(base)
    return {"stdio": stdio, "http": http, "boot": boot}


def run() -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        result = anyio.run(_measure, Path(tmp))
    result["note"] = (
        "shared 2-core machine under load from other work; absolute numbers are pessimistic, "
        "the overhead is the difference of medians measured interleaved (alternating order) "
        "on one session; a negative value means below the noise"
    )
    return result


if __name__ == "__main__":
    import json

    print(json.dumps(run(), indent=2))
