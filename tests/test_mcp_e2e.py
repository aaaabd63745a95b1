"""The operator's MCP servers in the whole in-process runtime.

The server is the SDK's own ``MCPServer`` in a subprocess (stdio), configured under
``[mcp.servers.t]``; the provider is an in-process plugin whose scripted model calls the
server's tools through the deferral bridge and by name.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from fermix_core.api import Fermix
from fermix_core.channel import InboundMessage
from fermix_core.gateway import ChannelFeatures
from fermix_core.hookspecs import hookimpl
from fermix_core.messages import ToolCall, Turn
from fermix_core.service import CollectingReply
from fermix_core.specs import ModelInfo, ProviderSpec
from fermix_core.testing import FunctionProvider

pytest.importorskip("mcp", reason="the MCP client is the fermix-agent[mcp] extra")

pytestmark = pytest.mark.anyio

SERVER = Path(__file__).parents[1] / "packages/fermix-core/tests/mcp/mcp_test_server.py"


class Harness:
    def __init__(self) -> None:
        self.requests = []
        self.script: list = []
        self.provider = FunctionProvider(self._answer, name="harness")

    async def _answer(self, request):
        self.requests.append(request)
        return self.script.pop(0) if self.script else Turn(content="done", model="m1")

    @hookimpl
    def fermix_providers(self):
        yield ProviderSpec(
            name="harness",
            label="Harness",
            factory=lambda spec, settings: self.provider,
            keyless=True,
            default_model="m1",
            models=(ModelInfo(id="m1", context_window=100_000),),
        )


def config() -> dict:
    return {
        "fermix_core": {
            "providers": {"harness": {"primary": True, "base_url": "http://127.0.0.1:9/unused"}},
            "memory": {"review_enabled": False},
        },
        "fermix_channels": {"telegram": {"owner_user_id": "1", "allowed_user_ids": ["1", "2"]}},
        "mcp": {
            "servers": {
                "t": {
                    "command": [sys.executable, str(SERVER), "stdio"],
                    "env": {"DECLARED": "yes"},
                    "timeout_seconds": 5,
                    "tools": {"deny": ["crash"]},
                }
            }
        },
    }


@pytest.fixture
async def fx(fermix_home, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-must-not-leak")
    harness = Harness()
    async with Fermix.open(
        fermix_home, config=config(), plugins=[("providers.harness", harness)]
    ) as fx:
        fx.harness = harness
        await fx.service.mcp.runner("t").wait_for(lambda r: r.state == "ready")
        yield fx


async def telegram(fx, sender: str, text: str):
    reply = CollectingReply(ChannelFeatures())
    message = InboundMessage(channel="telegram", chat_id="chat", sender_id=sender, text=text)
    outcome = await fx.service.gateway.ingest(message, reply)
    if outcome.job is not None:
        await outcome.job.done.wait()
    return reply


def calling(name: str, arguments: dict, via_bridge: bool = False) -> Turn:
    if via_bridge:
        arguments, name = {"name": name, "arguments": arguments}, "tool_call"
    calls = [ToolCall(id="c1", name=name, arguments=arguments)]
    return Turn(content="", tool_calls=calls, model="m1")


def tool_result(request):
    return next(m.tool_result for m in reversed(request.messages) if m.role == "tool")


async def test_owner_turn_calls_an_mcp_tool_through_the_bridge_and_by_name(fx) -> None:
    fx.harness.script = [calling("mcp_t_echo", {"text": "hello mcp"}, via_bridge=True)]
    await telegram(fx, "1", "echo something")
    first, second = fx.harness.requests[-2:]
    wire = {t.name for t in first.tools}
    assert "tool_search" in wire and "mcp_t_echo" not in wire  # deferred behind tool_search
    assert "mcp_t_echo" in first.messages[0].text  # listed under ## Plugins
    assert "mcp_t_crash" not in first.messages[0].text  # denied by tools.deny
    result = tool_result(second)
    assert result.text == "hello mcp" and not result.is_error

    fx.harness.script = [calling("mcp_t_add", {"a": 2, "b": 40})]
    await telegram(fx, "1", "add")
    result = tool_result(fx.harness.requests[-1])
    assert '"sum": 42' in result.text or "42" in result.text

    fx.harness.script = [calling("mcp_t_fail", {})]
    await telegram(fx, "1", "fail")
    result = tool_result(fx.harness.requests[-1])
    assert result.is_error and "the widget is broken" in result.text

    fx.harness.script = [calling("mcp_t_picture", {})]
    await telegram(fx, "1", "picture")
    result = tool_result(fx.harness.requests[-1])
    assert [p.type for p in result.content] == ["image"]
    assert result.content[0].media_type == "image/png"


async def test_status_lists_the_server(fx) -> None:
    [row] = fx.service.status()["mcp"]
    assert row["name"] == "t" and row["state"] == "ready" and "mcp_t_echo" in row["tools"]


async def test_stdio_server_env_is_minimal_plus_declared(fx) -> None:
    fx.harness.script = [calling("mcp_t_getenv", {"name": "DECLARED"})]
    await telegram(fx, "1", "env")
    assert tool_result(fx.harness.requests[-1]).text == "yes"
    fx.harness.script = [calling("mcp_t_getenv", {"name": "OPENAI_API_KEY"})]
    await telegram(fx, "1", "env")
    assert tool_result(fx.harness.requests[-1]).text == "<unset>"


async def test_a_guest_never_sees_or_reaches_an_mcp_tool(fx) -> None:
    fx.harness.script = [calling("mcp_t_echo", {"text": "sneak"})]
    await telegram(fx, "2", "hello")
    first, second = fx.harness.requests[-2:]
    assert not [t.name for t in first.tools if t.name.startswith("mcp_")]
    assert "mcp_t_" not in first.messages[0].text
    result = tool_result(second)
    assert result.is_error and "sneak" not in result.text
    fx.harness.script = [calling("mcp_t_echo", {"text": "sneak"}, via_bridge=True)]
    await telegram(fx, "2", "again")
    assert tool_result(fx.harness.requests[-1]).is_error
