"""The operator's MCP servers in the whole in-process runtime.

The server is the SDK's own ``MCPServer`` in a subprocess (stdio), configured under
``[mcp.servers.t]``; the provider is an in-process plugin whose scripted model calls the
server's tools through the deferral bridge and by name.
"""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import anyio
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


# ------------------------------------------------------- a guest-created job never sees MCP


@pytest.fixture
async def scheduled(fermix_home):
    """The service with its job scheduler running, as the daemon opens it."""
    from fermix_core.runtime import Runtime
    from fermix_core.service import FermixService

    harness = Harness()
    document = config()
    # The harness provider is in-process: there is no host for the readiness probe to reach.
    document["fermix_core"]["jobs"] = {"network_readiness_enabled": False}
    runtime = Runtime.boot(fermix_home, config=document, plugins=[("providers.harness", harness)])
    async with FermixService.running(runtime, scheduler=True) as service:
        await runtime.start()
        try:
            await service.mcp.runner("t").wait_for(lambda r: r.state == "ready")
            yield SimpleNamespace(service=service, harness=harness)
        finally:
            await runtime.stop()


async def test_a_job_a_guest_creates_never_sees_or_reaches_an_mcp_tool(scheduled) -> None:
    from fermix_core.channel import ConversationKey
    from fermix_core.jobs.service import Creator, JobError
    from fermix_core.tool import Trust

    fx, harness = scheduled, scheduled.harness
    # A guest's chat is read-only: schedule_job is not in its surface at all.
    harness.script = [calling("schedule_job", {"task_prompt": "x", "schedule": "every 1 day"})]
    await telegram(fx, "2", "schedule it")
    assert tool_result(harness.requests[-1]).is_error
    assert await fx.service.jobs.service.list() == []

    # A job stamped with guest trust (as a plugin could create one) cannot name an MCP
    # tool in allowed_tools, because the guest cannot use it now ...
    jobs = fx.service.jobs.service
    guest = Creator(trust=Trust.GUEST, conversation_key=ConversationKey("telegram", "chat"))
    with pytest.raises(JobError, match="mcp_t_echo"):
        await jobs.create(
            guest, task_prompt="echo", schedule="every 1 day", allowed_tools=["mcp_t_echo"]
        )
    job, _ = await jobs.create(
        guest, task_prompt="use the echo tool", schedule="every 1 day", delivery_mode="none"
    )
    assert job.trust == "guest"

    # The job's own turn: no mcp_ tool offered or listed; calling one by name is refused.
    seen = len(harness.requests)
    harness.script = [calling("mcp_t_echo", {"text": "from the job"})]
    run = await jobs.run_now(job.id)
    await fx.service.jobs.scheduler.wait_run(run.id)
    first, second = harness.requests[seen], harness.requests[seen + 1]
    assert not [t.name for t in first.tools if t.name.startswith("mcp_")]
    assert "mcp_t_" not in first.messages[0].text
    result = tool_result(second)
    assert result.is_error and "from the job" not in result.text


# ------------------------------------- an HTTP server's headers go through the secrets layer


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
async def http_server():
    port = free_port()
    proc = await anyio.open_process(
        [sys.executable, str(SERVER), "http", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        with anyio.fail_after(10):
            await proc.wait()


def http_config(url: str, headers: dict) -> dict:
    document = config()
    document["mcp"]["servers"] = {"web": {"url": url, "headers": headers, "timeout_seconds": 5}}
    return document


async def test_http_headers_resolve_from_the_keyring_and_the_environment(
    fermix_home, http_server, monkeypatch
) -> None:
    import keyring
    from fermix_core.config.secret import derived_env_name
    from fermix_core.secrets.base import KEYRING_ACCOUNT, keyring_service

    env = derived_env_name(("mcp", "servers", "web", "headers", "Authorization"))
    keyring.set_password(keyring_service(env), KEYRING_ACCOUNT, "Bearer from-the-keyring")
    monkeypatch.setenv("TEAM_HEADER_VALUE", "team-from-env")
    headers = {"Authorization": "@keyring", "X-Team": {"source": "env", "env": "TEAM_HEADER_VALUE"}}
    harness = Harness()
    async with Fermix.open(
        fermix_home,
        config=http_config(http_server, headers),
        plugins=[("providers.harness", harness)],
    ) as fx:
        await fx.service.mcp.runner("web").wait_for(lambda r: r.state == "ready")
        fx.harness = harness
        harness.script = [calling("mcp_web_header", {"name": "authorization"})]
        await telegram(fx, "1", "which token")
        assert tool_result(harness.requests[-1]).text == "Bearer from-the-keyring"
        harness.script = [calling("mcp_web_header", {"name": "x-team"})]
        await telegram(fx, "1", "which team")
        assert tool_result(harness.requests[-1]).text == "team-from-env"


async def test_a_header_whose_secret_is_missing_fails_that_server_by_name(
    fermix_home, http_server, caplog
) -> None:
    headers = {"Authorization": {"source": "env", "env": "UNSET_MCP_TOKEN_FOR_TEST"}}
    async with Fermix.open(
        fermix_home,
        config=http_config(http_server, headers),
        plugins=[("providers.harness", Harness())],
    ) as fx:
        runner = fx.service.mcp.runner("web")
        await runner.wait_for(lambda r: r.error is not None)
        assert "header 'Authorization' of mcp.servers.web" in runner.error
        assert not [n for n in fx.service.mcp.capabilities.specs if n.startswith("mcp_web")]
