"""The MCP client against servers it did not write: PyPI ``mcp-server-time`` and
``mcp-server-fetch`` (stdio subprocesses of this interpreter) and npm
``@modelcontextprotocol/server-everything`` (stdio and Streamable HTTP, under Node).

The fetch server is pointed at a loopback page only. The Node server is installed by
``npm ci --prefix tests/mcp_everything`` (``.ci/run`` does it); without Node or that install
its tests skip and say so.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from types import SimpleNamespace

import anyio
import pytest
from fermix_core.agent import CapabilityRegistry
from fermix_core.config.models import McpServer
from fermix_core.mcp.manager import McpManager
from fermix_core.messages import ImagePart
from fermix_core.testing.loopback import LoopbackServer, Reply
from fermix_core.tool import ToolContext, Trust

pytest.importorskip("mcp", reason="the MCP client is the fermix-agent[mcp] extra")

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[4]
EVERYTHING = (
    ROOT / "tests/mcp_everything/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
)


def _node_missing() -> str | None:
    if shutil.which("node") is None:
        return "Node.js is not installed, so the npm reference server cannot run"
    if not EVERYTHING.is_file():
        return "run `npm ci --prefix tests/mcp_everything` to install the npm reference server"
    return None


needs_everything = pytest.mark.skipif(_node_missing() is not None, reason=str(_node_missing()))


def _child_env(extra: dict[str, str]) -> dict[str, str]:
    # The service gives a stdio server the sandbox's minimal child environment; these tests
    # give the same shape, with a key planted in the parent to prove it does not pass.
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": "/nonexistent", **extra}


@asynccontextmanager
async def serving(tmp_path: Path, servers: dict[str, McpServer]) -> AsyncIterator[McpManager]:
    mgr = McpManager(
        servers,
        CapabilityRegistry([]),
        child_env=_child_env,
        headers=lambda name: {},
        workspace=tmp_path,
        logs=tmp_path / "logs",
    )
    async with anyio.create_task_group() as tg:
        await tg.start(mgr.serve)
        for name in servers:
            await mgr.runner(name).wait_for(lambda r: r.state in {"ready", "failed"})
            runner = mgr.runner(name)
            assert runner.state == "ready", (name, runner.error, _log(tmp_path, name))
        yield mgr
        tg.cancel_scope.cancel()


def _log(tmp_path: Path, name: str) -> str:
    path = tmp_path / "logs" / f"mcp-{name}.log"
    return path.read_text(errors="replace")[-2000:] if path.exists() else ""


async def call(mgr: McpManager, name: str, args: dict, tmp_path: Path):
    ctx = ToolContext(trust=Trust.OPERATOR, cwd=tmp_path, home=SimpleNamespace(path=tmp_path))
    return await mgr.capabilities.tool(name).invoke(args, ctx)


def python_server(module: str, *args: str, **extra) -> McpServer:
    return McpServer.model_validate(
        {"command": [sys.executable, "-m", module, *args], "timeout_seconds": 20, **extra}
    )


# ---------------------------------------------------------------- mcp-server-time (PyPI)


async def test_the_pypi_time_server_converts_between_zones(tmp_path) -> None:
    async with serving(
        tmp_path, {"time": python_server("mcp_server_time", "--local-timezone", "UTC")}
    ) as mgr:
        assert {"mcp_time_get_current_time", "mcp_time_convert_time"} <= set(
            mgr.runner("time").tools
        )
        # UTC and Tokyo keep no daylight saving, so the answer is the same on any date.
        converted = await call(
            mgr,
            "mcp_time_convert_time",
            {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"},
            tmp_path,
        )
        assert not converted.is_error, converted.text
        assert "21:00" in converted.text and "Asia/Tokyo" in converted.text

        now = await call(mgr, "mcp_time_get_current_time", {"timezone": "UTC"}, tmp_path)
        assert not now.is_error and '"timezone": "UTC"' in now.text

        # The server's own error for a bad zone reaches the model as a readable tool error.
        bad = await call(mgr, "mcp_time_get_current_time", {"timezone": "Mars/Olympus"}, tmp_path)
        assert bad.is_error and "Mars/Olympus" in bad.text


# ---------------------------------------------------------------- mcp-server-fetch (PyPI)

PAGE = """<!doctype html><html><head><title>Loopback notes</title></head><body>
<nav>menu menu menu</nav>
<article><h1>Quarterly notes</h1>
<p>The <strong>loopback</strong> page says hello to the fetch server.</p>
<p>Second paragraph with a <a href="/other">link</a>.</p></article></body></html>"""


async def _site(request) -> Reply:
    if request.path == "/robots.txt":
        return Reply(
            body="User-agent: *\nDisallow: /private\n", headers={"content-type": "text/plain"}
        )
    if request.path == "/notes":
        return Reply(body=PAGE, headers={"content-type": "text/html; charset=utf-8"})
    if request.path == "/private":
        return Reply(body="<p>secret</p>", headers={"content-type": "text/html"})
    return Reply(status=404, body="not here")


async def test_the_pypi_fetch_server_reads_a_loopback_page_and_honours_robots(tmp_path) -> None:
    server = python_server("mcp_server_fetch", "--allow-private-ips")
    async with LoopbackServer(_site) as site, serving(tmp_path, {"fetch": server}) as mgr:
        assert "mcp_fetch_fetch" in mgr.runner("fetch").tools
        page = await call(mgr, "mcp_fetch_fetch", {"url": f"{site.url}/notes"}, tmp_path)
        assert not page.is_error, page.text
        assert "Quarterly notes" in page.text and "**loopback**" in page.text  # HTML → Markdown
        assert {r.path for r in site.requests} >= {"/robots.txt", "/notes"}

        # robots.txt refusal is the server's own error, and the model reads it as one.
        refused = await call(mgr, "mcp_fetch_fetch", {"url": f"{site.url}/private"}, tmp_path)
        assert refused.is_error and "robots.txt" in refused.text
        assert "/private" not in {r.path for r in site.requests}

        missing = await call(mgr, "mcp_fetch_fetch", {"url": f"{site.url}/gone"}, tmp_path)
        assert missing.is_error and "404" in missing.text


# -------------------------------------------- @modelcontextprotocol/server-everything (npm)


def everything_stdio(**extra) -> McpServer:
    return McpServer.model_validate(
        {"command": ["node", str(EVERYTHING), "stdio"], "timeout_seconds": 5, **extra}
    )


@needs_everything
async def test_the_npm_reference_server_over_stdio(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-parent-only")
    config = everything_stdio(env={"DECLARED_FOR_SERVER": "yes"})
    async with serving(tmp_path, {"every": config}) as mgr:
        tools = set(mgr.runner("every").tools)
        # Hyphenated names are within the providers' charset and are kept as they are.
        assert {"mcp_every_echo", "mcp_every_get-sum", "mcp_every_get-tiny-image"} <= tools

        echoed = await call(mgr, "mcp_every_echo", {"message": "hi there"}, tmp_path)
        assert not echoed.is_error and "hi there" in echoed.text

        summed = await call(mgr, "mcp_every_get-sum", {"a": 2, "b": 40}, tmp_path)
        assert "42" in summed.text

        image = await call(mgr, "mcp_every_get-tiny-image", {}, tmp_path)
        images = [p for p in image.content if isinstance(p, ImagePart)]
        assert images and images[0].media_type == "image/png"
        assert images[0].data.startswith(b"\x89PNG")

        structured = await call(
            mgr, "mcp_every_get-structured-content", {"location": "New York"}, tmp_path
        )
        assert not structured.is_error
        assert "temperature" in structured.data["structured"]

        env = await call(mgr, "mcp_every_get-env", {}, tmp_path)
        assert "DECLARED_FOR_SERVER" in env.text and "sk-parent-only" not in env.text

        # A call longer than timeout_seconds is a tool error; the next call still works.
        slow = await call(
            mgr,
            "mcp_every_trigger-long-running-operation",
            {"duration": 60, "steps": 2},
            tmp_path,
        )
        assert slow.is_error and "did not answer within 5 s" in slow.text
        again = await call(mgr, "mcp_every_echo", {"message": "still alive"}, tmp_path)
        assert "still alive" in again.text and mgr.runner("every").state == "ready"

        # A schema the server publishes passes the registry's checks: every tool listed.
        assert not mgr.runner("every").refused


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


async def _wait_for_line(stream, needle: str) -> None:
    """Read the server's stderr until it says it is listening (it says so once bound)."""
    seen = b""
    with anyio.fail_after(30):
        while needle.encode() not in seen:
            chunk = await stream.receive()
            seen += chunk


@needs_everything
async def test_the_npm_reference_server_over_streamable_http(tmp_path) -> None:
    port = free_port()
    env = {**_child_env({}), "PORT": str(port)}
    proc = await anyio.open_process(
        ["node", str(EVERYTHING), "streamableHttp"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        await _wait_for_line(proc.stderr, f"listening on port {port}")
        config = McpServer.model_validate(
            {"url": f"http://127.0.0.1:{port}/mcp", "timeout_seconds": 5}
        )
        async with serving(tmp_path, {"web": config}) as mgr:
            assert mgr.runner("web").transport == "http"
            echoed = await call(mgr, "mcp_web_echo", {"message": "over http"}, tmp_path)
            assert "over http" in echoed.text
            image = await call(mgr, "mcp_web_get-tiny-image", {}, tmp_path)
            assert any(isinstance(p, ImagePart) for p in image.content)
    finally:
        proc.terminate()
        with anyio.fail_after(10):
            await proc.wait()
