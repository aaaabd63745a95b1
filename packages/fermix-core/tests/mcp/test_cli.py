"""``fermix mcp`` through a real control socket, and without a daemon."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio
import pytest
from fermix_core.agent import CapabilityRegistry
from fermix_core.cli.app import run
from fermix_core.config.models import McpServer
from fermix_core.daemon.server import ControlServer, MethodError
from fermix_core.home import FermixHome
from fermix_core.mcp.control import control_handlers
from fermix_core.mcp.manager import McpManager

pytest.importorskip("mcp", reason="the MCP client is the fermix-agent[mcp] extra")

pytestmark = pytest.mark.anyio

SERVER = Path(__file__).with_name("mcp_test_server.py")


def test_without_a_daemon_the_command_says_how_to_start_one(fermix_home, capsys) -> None:
    assert run(["mcp", "list", "--json"]) == 3
    assert "fermix start" in json.loads(capsys.readouterr().out)["error"]


async def test_list_tools_restart_over_the_control_socket(fermix_home, capsys) -> None:
    home = FermixHome.resolve()
    home.ensure()
    config = McpServer.model_validate(
        {"command": [sys.executable, str(SERVER), "stdio"], "timeout_seconds": 5}
    )
    mgr = McpManager(
        {"t": config},
        CapabilityRegistry([]),
        child_env=lambda extra: {"PATH": "/usr/bin:/bin", **extra},
        headers=lambda name: {},
        workspace=home.path,
    )

    async def cli(*argv: str) -> tuple[int, dict]:
        code = await anyio.to_thread.run_sync(run, list(argv))
        return code, json.loads(capsys.readouterr().out)

    server = ControlServer(home.daemon_sock, control_handlers(lambda: mgr, MethodError))
    async with anyio.create_task_group() as tg:
        await tg.start(mgr.serve)
        await tg.start(server.serve)
        await mgr.runner("t").wait_for(lambda r: r.state == "ready")
        code, listed = await cli("mcp", "list", "--json")
        assert code == 0
        [row] = listed["servers"]
        assert row["name"] == "t" and row["state"] == "ready" and "mcp_t_echo" in row["tools"]
        code, tools = await cli("mcp", "tools", "t", "--json")
        echo = next(t for t in tools["tools"] if t["name"] == "mcp_t_echo")
        assert echo["remote"] == "echo" and echo["input_schema"]["type"] == "object"
        code, missing = await cli("mcp", "tools", "nope", "--json")
        assert code == 1 and "no MCP server named 'nope'" in missing["error"]
        before = mgr.runner("t").restarts
        code, answer = await cli("mcp", "restart", "t", "--json")
        assert code == 0 and answer == {"name": "t", "restarting": True}
        await mgr.runner("t").wait_for(lambda r: r.restarts > before and r.state == "ready")
        tg.cancel_scope.cancel()
