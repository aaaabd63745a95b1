"""``fermix mcp`` through a real control socket, and without a daemon."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace

import anyio
import pytest
from fermix_core.agent import CapabilityRegistry
from fermix_core.cli.app import run
from fermix_core.config.models import McpConfig, McpServer
from fermix_core.daemon.server import ControlServer, MethodError
from fermix_core.doctor import Status
from fermix_core.home import FermixHome
from fermix_core.mcp.control import control_handlers
from fermix_core.mcp.doctor import check_mcp
from fermix_core.mcp.manager import McpManager

pytest.importorskip("mcp", reason="the MCP client is the fermix-agent[mcp] extra")

pytestmark = pytest.mark.anyio

SERVER = Path(__file__).with_name("mcp_test_server.py")


@pytest.fixture(autouse=True)
def _restore_logging():
    """``run()`` configures process-wide logging and crash hooks; undo it after each test."""
    yield
    from fermix_core.logs import teardown_logging

    teardown_logging()


def loaded(servers: dict) -> SimpleNamespace:
    """Just what check_mcp reads: ``config.core.mcp.servers``."""
    return SimpleNamespace(core=SimpleNamespace(mcp=McpConfig.model_validate({"servers": servers})))


def test_doctor_rows_offline(fermix_home, tmp_path) -> None:
    servers = {
        "gone": {"command": [str(tmp_path / "missing")]},
        "off": {"command": [sys.executable], "enabled": False},
        "fine": {"command": [sys.executable]},
        "web": {"url": "http://127.0.0.1:9/mcp"},
    }
    doctor = SimpleNamespace(config=loaded(servers), home=FermixHome.resolve())
    rows = {row.label: row for row in check_mcp(doctor)}
    assert rows["mcp gone"].status is Status.FAIL and "not found" in rows["mcp gone"].detail
    assert rows["mcp off"].status is Status.SKIP
    assert rows["mcp fine"].status is Status.OK and "no daemon" in rows["mcp fine"].detail
    assert rows["mcp web"].status is Status.OK
    none = SimpleNamespace(config=loaded({}), home=FermixHome.resolve())
    assert [r.status for r in check_mcp(none)] == [Status.SKIP]


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

    async def status(params: dict) -> dict:
        return {"mcp": mgr.status()}

    handlers = {**control_handlers(lambda: mgr, MethodError), "status": status}
    server = ControlServer(home.daemon_sock, handlers)
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
        doctor = SimpleNamespace(config=loaded({"t": {"command": [sys.executable]}}), home=home)
        [row] = await anyio.to_thread.run_sync(check_mcp, doctor)
        assert (row.label, row.status, row.detail.split(" (")[0]) == ("mcp t", Status.OK, "ready")
        before = mgr.runner("t").restarts
        code, answer = await cli("mcp", "restart", "t", "--json")
        assert code == 0 and answer == {"name": "t", "restarting": True}
        await mgr.runner("t").wait_for(lambda r: r.restarts > before and r.state == "ready")
        tg.cancel_scope.cancel()
