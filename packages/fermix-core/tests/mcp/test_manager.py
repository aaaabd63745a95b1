"""ServerRunner against the SDK's own MCPServer in a subprocess: stdio and Streamable HTTP."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import anyio
import pytest
from fermix_core.agent import CapabilityRegistry
from fermix_core.config.models import McpServer
from fermix_core.mcp import tool_name
from fermix_core.mcp.manager import McpManager
from fermix_core.tool import ToolContext, Trust

pytest.importorskip("mcp", reason="the MCP client is the fermix-agent[mcp] extra")

pytestmark = pytest.mark.anyio

SERVER = Path(__file__).with_name("mcp_test_server.py")


def stdio(**extra) -> McpServer:
    return McpServer.model_validate(
        {"command": [sys.executable, str(SERVER), "stdio"], "timeout_seconds": 3, **extra}
    )


def manager(tmp_path: Path, servers: dict, registry: CapabilityRegistry | None = None):
    return McpManager(
        servers,
        registry or CapabilityRegistry([]),
        child_env=lambda extra: {"PATH": "/usr/bin:/bin", **extra},
        headers=lambda name: {},
        workspace=tmp_path,
        logs=tmp_path / "logs",
    )


def ctx(tmp_path: Path) -> ToolContext:
    return ToolContext(trust=Trust.OPERATOR, cwd=tmp_path, home=SimpleNamespace(path=tmp_path))


async def call(mgr: McpManager, name: str, args: dict, tmp_path: Path):
    return await mgr.capabilities.tool(name).invoke(args, ctx(tmp_path))


def test_tool_names_are_sanitised_and_bounded() -> None:
    assert tool_name("files", "read.file/v2") == "mcp_files_read_file_v2"
    assert tool_name("my-srv", "Ünïcode tool") == "mcp_my-srv__n_code_tool"
    assert len(tool_name("s", "x" * 200)) == 64


async def test_stdio_hang_times_out_without_wedging_garbage_and_list_changed(tmp_path) -> None:
    mgr = manager(tmp_path, {"t": stdio()})
    runner = mgr.runner("t")
    async with anyio.create_task_group() as tg:
        await tg.start(mgr.serve)
        await runner.wait_for(lambda r: r.state == "ready")
        assert "mcp_t_echo" in mgr.capabilities.specs
        assert mgr.capabilities.third_party("mcp_t_echo")
        guest = mgr.capabilities.snapshot(Trust.GUEST)
        assert not [n for n in guest.specs if n.startswith("mcp_")]

        hung = await call(mgr, "mcp_t_hang", {}, tmp_path)
        assert hung.is_error and "did not answer within 3 s" in hung.text
        echoed = await call(mgr, "mcp_t_echo", {"text": "after the hang"}, tmp_path)
        assert echoed.text == "after the hang" and not echoed.is_error

        odd = await call(mgr, "mcp_t_garbage", {}, tmp_path)
        assert odd.text == "still here"
        assert runner.state == "ready"

        listed = runner.listings
        assert (await call(mgr, "mcp_t_grow", {}, tmp_path)).text == "grown"
        await runner.wait_for(lambda r: r.listings > listed and "mcp_t_late" in r.tools)
        assert (await call(mgr, "mcp_t_late", {}, tmp_path)).text == "late tool"

        bad = await mgr.capabilities.tool("mcp_t_echo").invoke([1], ctx(tmp_path))
        assert bad.is_error and "expected a JSON object" in bad.text
        tg.cancel_scope.cancel()
    assert not [n for n in mgr.capabilities.specs if n.startswith("mcp_")]


async def test_a_crashed_server_is_restarted_and_its_tools_come_back(tmp_path) -> None:
    mgr = manager(tmp_path, {"t": stdio()})
    runner = mgr.runner("t")
    async with anyio.create_task_group() as tg:
        await tg.start(mgr.serve)
        await runner.wait_for(lambda r: r.state == "ready")
        crashed = await call(mgr, "mcp_t_crash", {}, tmp_path)
        assert crashed.is_error
        await runner.wait_for(lambda r: r.state != "ready")
        await runner.wait_for(lambda r: r.state == "ready")
        assert runner.restarts >= 1
        assert (await call(mgr, "mcp_t_echo", {"text": "back"}, tmp_path)).text == "back"

        before = runner.restarts
        runner.restart()
        await runner.wait_for(lambda r: r.restarts > before and r.state == "ready")
        assert (await call(mgr, "mcp_t_echo", {"text": "again"}, tmp_path)).text == "again"
        tg.cancel_scope.cancel()


async def test_a_server_that_cannot_start_is_a_failed_state_not_an_error(tmp_path) -> None:
    broken = McpServer.model_validate({"command": [str(tmp_path / "no-such-program")]})
    mgr = manager(tmp_path, {"gone": broken, "off": stdio(enabled=False)})
    async with anyio.create_task_group() as tg:
        await tg.start(mgr.serve)
        await mgr.runner("gone").wait_for(lambda r: r.state == "failed")
        rows = {row["name"]: row for row in mgr.status()}
        assert rows["gone"]["error"] and rows["off"]["state"] == "disabled"
        tg.cancel_scope.cancel()
    with pytest.raises(KeyError, match="configured: gone, off"):
        mgr.runner("nope")


async def test_allow_deny_and_collisions_are_refused_by_name(tmp_path) -> None:
    from fermix_core.specs import ToolSpec

    taken = ToolSpec(name="mcp_t_echo", description="already here", factory="x.y:z")
    registry = CapabilityRegistry([taken])
    mgr = manager(tmp_path, {"t": stdio(tools={"allow": ["e*", "add"], "deny": ["add"]})}, registry)
    runner = mgr.runner("t")
    async with anyio.create_task_group() as tg:
        await tg.start(mgr.serve)
        await runner.wait_for(lambda r: r.state == "ready")
        assert runner.tools == {}
        assert runner.refused == ["echo: the name mcp_t_echo is already taken"]
        assert registry.specs["mcp_t_echo"] is taken
        tg.cancel_scope.cancel()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


async def test_streamable_http_server_on_loopback(tmp_path) -> None:
    port = free_port()
    proc = await anyio.open_process(
        [sys.executable, str(SERVER), "http", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        url = f"http://127.0.0.1:{port}/mcp"
        config = McpServer.model_validate({"url": url, "timeout_seconds": 3})
        mgr = manager(tmp_path, {"web": config})
        runner = mgr.runner("web")
        async with anyio.create_task_group() as tg:
            await tg.start(mgr.serve)
            # The first attempts may race the server's bind; the runner retries on its own.
            await runner.wait_for(lambda r: r.state == "ready")
            assert runner.transport == "http"
            echoed = await call(mgr, "mcp_web_echo", {"text": "over http"}, tmp_path)
            assert echoed.text == "over http"
            hung = await call(mgr, "mcp_web_hang", {}, tmp_path)
            assert hung.is_error and "did not answer" in hung.text
            assert (await call(mgr, "mcp_web_add", {"a": 1, "b": 2}, tmp_path)).data == {
                "structured": {"sum": 3}
            }
            tg.cancel_scope.cancel()
    finally:
        proc.terminate()
        with anyio.fail_after(10):
            await proc.wait()
