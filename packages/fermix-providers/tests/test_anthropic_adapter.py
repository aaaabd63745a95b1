"""The ``anthropic`` provider: the contract in both auth modes, and the Claude Code emulation.

Every call goes over a real loopback socket. The OAuth tests use a small token source that
records what the adapter asked of it, plus one test through the real ``TokenSource`` and a
real ``auth.json`` so a refreshed, rotated login is seen landing on disk.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from fermix_core.authfile import AuthStore
from fermix_core.messages import Message, ToolCall, ToolDefinition, ToolResult
from fermix_core.provider import ChatRequest, ErrorKind, ProviderError, ProviderSettings
from fermix_core.testing.contracts import ProviderContract, Scenario
from fermix_core.testing.loopback import LoopbackServer, RecordedRequest, Reply
from fermix_providers.anthropic.adapter import CLAUDE_CODE_IDENTITY, AnthropicProvider
from fermix_providers.anthropic.plugin import SPEC
from fermix_providers.http import Timeouts
from fermix_providers.oauth.tokens import TokenGrant, TokenSource

pytestmark = pytest.mark.anyio

KEY = "sk-ant-api03-adapter-test-secret"
OLD_TOKEN = "sk-ant-oat01-old-subscription-token"
NEW_TOKEN = "sk-ant-oat01-new-subscription-token"
WEATHER = ToolDefinition(
    name="get_weather",
    description="Weather for a city.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}},
)
DENIED = {"type": "error", "error": {"type": "authentication_error", "message": "invalid token"}}


class Fast(AnthropicProvider):
    buffered_timeouts = Timeouts(connect=2.0, read=2.0, write=2.0, pool=2.0)
    stream_timeouts = Timeouts(connect=2.0, read=2.0, write=2.0, pool=2.0)


class FakeTokens:
    """The TokenSource interface, counting what the adapter asks for."""

    def __init__(self, token: str = OLD_TOKEN, fresh: str = NEW_TOKEN) -> None:
        self.token, self.fresh = token, fresh
        self.refreshes = 0

    async def access_token(self) -> str:
        return self.token

    async def refresh(self) -> str:
        self.refreshes += 1
        self.token = self.fresh
        return self.token


def make(server: LoopbackServer, **settings: Any) -> Fast:
    if settings.get("auth_mode") != "oauth":
        settings.setdefault("api_key", KEY)
    return Fast(SPEC, ProviderSettings(name="anthropic", base_url=f"{server.url}/v1", **settings))


def oauth(server: LoopbackServer, tokens: Any, **extra: Any) -> Fast:
    return make(server, auth_mode="oauth", extra={"token_source": tokens, **extra})


def reply_for(scenario: Scenario, request: RecordedRequest) -> Reply:
    """A minimal Messages backend: text, a tool call until answered, or a failure."""
    body = request.json()
    if scenario is Scenario.ERROR:
        return Reply(
            status=500,
            body={"type": "error", "error": {"type": "api_error", "message": "Internal error"}},
        )
    answered = any(
        block.get("type") == "tool_result"
        for message in body["messages"]
        for block in message["content"]
    )
    if scenario is Scenario.TOOL_CALL and not answered:
        name = body["tools"][0]["name"]  # as offered on the wire (mcp_-prefixed in OAuth)
        content = [{"type": "tool_use", "id": "toolu_c1", "name": name, "input": {"text": "ping"}}]
        stop = "tool_use"
    else:
        content = [{"type": "text", "text": "Hello from Claude."}]
        stop = "end_turn"
    if not body.get("stream"):
        return Reply(
            body={
                "id": "msg_c",
                "type": "message",
                "role": "assistant",
                "model": body["model"],
                "content": content,
                "stop_reason": stop,
                "usage": {"input_tokens": 9, "output_tokens": 3},
            }
        )
    events: list[Any] = [
        {
            "type": "message_start",
            "message": {"id": "msg_c", "model": body["model"], "usage": {"input_tokens": 9}},
        }
    ]
    for index, block in enumerate(content):
        if block["type"] == "text":
            start, deltas = (
                {"type": "text", "text": ""},
                [
                    {"type": "text_delta", "text": "Hello "},
                    {"type": "text_delta", "text": "from Claude."},
                ],
            )
        else:
            start = {**block, "input": {}}
            deltas = [{"type": "input_json_delta", "partial_json": '{"text": "ping"}'}]
        events.append({"type": "content_block_start", "index": index, "content_block": start})
        events += [{"type": "content_block_delta", "index": index, "delta": d} for d in deltas]
        events.append({"type": "content_block_stop", "index": index})
    events.append(
        {"type": "message_delta", "delta": {"stop_reason": stop}, "usage": {"output_tokens": 3}}
    )
    events.append({"type": "message_stop"})
    return Reply(sse=events)


# =========================================================================== contract


class TestAnthropicApiKeyContract(ProviderContract):
    secret = KEY

    @pytest.fixture(autouse=True)
    async def _backend(self):
        self.scenario = Scenario.TEXT
        async with LoopbackServer(lambda r: reply_for(self.scenario, r)) as server:
            self.server = server
            yield

    def make_provider(self, scenario: Scenario) -> Fast:
        self.scenario = scenario
        return make(self.server)


class TestAnthropicOAuthContract(ProviderContract):
    secret = OLD_TOKEN
    model = "claude-haiku-4-5"

    @pytest.fixture(autouse=True)
    async def _backend(self):
        self.scenario = Scenario.TEXT
        async with LoopbackServer(lambda r: reply_for(self.scenario, r)) as server:
            self.server = server
            yield

    def make_provider(self, scenario: Scenario) -> Fast:
        self.scenario = scenario
        return oauth(self.server, FakeTokens())


# =========================================================================== auth modes


async def test_oauth_requests_emulate_claude_code() -> None:
    tokens = FakeTokens()
    history = [
        Message.system("You are Fermix."),
        Message.user("Weather in Oslo?"),
        Message.assistant(tool_calls=[ToolCall(id="toolu_h", name="get_weather", arguments={})]),
        Message.tool(ToolResult(call_id="toolu_h", name="get_weather", content="-3C")),
        Message.user("And tomorrow?"),
    ]
    async with (
        LoopbackServer(lambda r: reply_for(Scenario.TOOL_CALL, r)) as server,
        oauth(server, tokens, claude_code_version="9.9.9") as provider,
    ):
        turn = await provider.chat(
            ChatRequest(messages=[Message.user("Weather?")], tools=[WEATHER])
        )
        await provider.chat(ChatRequest(messages=history, tools=[WEATHER]))
    first, second = server.requests
    assert first.header("authorization") == f"Bearer {OLD_TOKEN}"
    assert first.header("x-api-key") is None
    betas = first.header("anthropic-beta").split(",")
    assert {"oauth-2025-04-20", "claude-code-20250219"} <= set(betas)
    assert first.header("user-agent") == "claude-cli/9.9.9 (external, cli)"
    assert first.header("x-app") == "cli"
    assert first.header("anthropic-version") == "2023-06-01"
    body = first.json()
    assert body["system"][0] == {
        "type": "text",
        "text": CLAUDE_CODE_IDENTITY,
        "cache_control": {"type": "ephemeral"},
    }
    assert [t["name"] for t in body["tools"]] == ["mcp_get_weather"]
    # the call comes back under the name the agent offered
    assert turn.tool_calls[0].name == "get_weather"
    replayed = second.json()
    assert replayed["system"][0]["text"] == CLAUDE_CODE_IDENTITY
    assert replayed["system"][1]["text"] == "You are Fermix."
    assert replayed["messages"][1]["content"][0]["name"] == "mcp_get_weather"
    assert tokens.refreshes == 0


async def test_api_key_mode_sends_no_claude_code_identity() -> None:
    async with (
        LoopbackServer(lambda r: reply_for(Scenario.TOOL_CALL, r)) as server,
        make(server) as provider,
    ):
        turn = await provider.chat(
            ChatRequest(messages=[Message.user("Weather?")], tools=[WEATHER])
        )
    sent = server.requests[0]
    assert sent.header("x-api-key") == KEY
    assert sent.header("anthropic-beta") is None
    assert sent.header("x-app") is None
    assert "system" not in sent.json()
    assert sent.json()["tools"][0]["name"] == "get_weather"
    assert turn.tool_calls[0].name == "get_weather"


@pytest.mark.parametrize("stream", [False, True])
async def test_oauth_401_refreshes_once_and_retries_once(stream: bool) -> None:
    tokens = FakeTokens()
    events: list = []
    async with LoopbackServer() as server:

        def answer(request: RecordedRequest) -> Reply:
            if request.header("authorization") == f"Bearer {OLD_TOKEN}":
                return Reply(status=401, body=DENIED)
            return reply_for(Scenario.TEXT, request)

        server.handler = answer
        async with oauth(server, tokens) as provider:
            turn = await provider.chat(
                ChatRequest(messages=[Message.user("Hi")], stream=stream, on_event=events.append)
            )
    assert turn.content == "Hello from Claude."
    assert tokens.refreshes == 1
    assert [r.header("authorization") for r in server.requests] == [
        f"Bearer {OLD_TOKEN}",
        f"Bearer {NEW_TOKEN}",
    ]
    if stream:
        assert "".join(e.text for e in events if e.kind == "text_delta") == turn.content


async def test_oauth_second_401_is_an_oauth_failure() -> None:
    tokens = FakeTokens()
    async with (
        LoopbackServer(lambda r: Reply(status=401, body=DENIED)) as server,
        oauth(server, tokens) as provider,
    ):
        with pytest.raises(ProviderError) as info:
            await provider.chat(ChatRequest(messages=[Message.user("Hi")]))
    error = info.value
    assert error.kind is ErrorKind.OAUTH
    assert "fermix auth login --provider anthropic" in error.message
    assert "invalid token" in error.message
    assert tokens.refreshes == 1
    assert len(server.requests) == 2, "one retry, never more"
    for text in (str(error), repr(error)):
        assert OLD_TOKEN not in text and NEW_TOKEN not in text


async def test_oauth_403_is_an_oauth_failure_without_a_pointless_refresh() -> None:
    forbidden = {
        "type": "error",
        "error": {"type": "permission_error", "message": "not allowed for this credential"},
    }
    tokens = FakeTokens()
    async with (
        LoopbackServer(lambda r: Reply(status=403, body=forbidden)) as server,
        oauth(server, tokens) as provider,
    ):
        with pytest.raises(ProviderError) as info:
            await provider.chat(ChatRequest(messages=[Message.user("Hi")]))
    assert info.value.kind is ErrorKind.OAUTH
    assert tokens.refreshes == 0
    assert len(server.requests) == 1


async def test_oauth_server_errors_are_not_auth_problems() -> None:
    tokens = FakeTokens()
    async with (
        LoopbackServer(lambda r: reply_for(Scenario.ERROR, r)) as server,
        oauth(server, tokens) as provider,
    ):
        with pytest.raises(ProviderError) as info:
            await provider.chat(ChatRequest(messages=[Message.user("Hi")]))
    assert info.value.kind is ErrorKind.SERVER_ERROR
    assert tokens.refreshes == 0


async def test_refresh_through_the_real_token_source_rotates_the_stored_login(
    tmp_path: Path,
) -> None:
    store = AuthStore(tmp_path / "auth.json")
    store.put(
        "anthropic_oauth",
        {"access_token": OLD_TOKEN, "refresh_token": "rt-1", "expires_at": time.time() + 3600},
    )
    spent: list[str] = []

    async def refresher(profile: dict) -> TokenGrant:
        spent.append(profile["refresh_token"])
        return TokenGrant(
            access_token=NEW_TOKEN, refresh_token="rt-2", expires_at=time.time() + 3600
        )

    source = TokenSource(store, "anthropic_oauth", refresher)
    async with LoopbackServer() as server:

        def answer(request: RecordedRequest) -> Reply:
            if request.header("authorization") == f"Bearer {NEW_TOKEN}":
                return reply_for(Scenario.TEXT, request)
            return Reply(status=401, body=DENIED)

        server.handler = answer
        async with oauth(server, source) as provider:
            first = await provider.chat(ChatRequest(messages=[Message.user("Hi")]))
            again = await provider.chat(ChatRequest(messages=[Message.user("Hi again")]))
    assert first.content == again.content == "Hello from Claude."
    assert spent == ["rt-1"], "one refresh; the rotated token is never spent again"
    stored = store.get("anthropic_oauth")
    assert stored["access_token"] == NEW_TOKEN
    assert stored["refresh_token"] == "rt-2"
    assert len(server.requests) == 3


async def test_oauth_without_a_stored_login_says_how_to_log_in(tmp_path: Path) -> None:
    store = AuthStore(tmp_path / "auth.json")
    async with LoopbackServer(lambda r: reply_for(Scenario.TEXT, r)) as server:
        settings = ProviderSettings(
            name="anthropic",
            base_url=f"{server.url}/v1",
            auth_mode="oauth",
            auth_store=store,
        )
        async with Fast(SPEC, settings) as provider:
            with pytest.raises(ProviderError) as info:
                await provider.chat(ChatRequest(messages=[Message.user("Hi")]))
    assert info.value.kind is ErrorKind.OAUTH
    assert "fermix auth login --provider anthropic" in info.value.message
    assert server.requests == []


async def test_missing_api_key_fails_before_any_request() -> None:
    async with (
        LoopbackServer(lambda r: reply_for(Scenario.TEXT, r)) as server,
        make(server, api_key=None) as provider,
    ):
        with pytest.raises(ProviderError) as info:
            await provider.chat(ChatRequest(messages=[Message.user("Hi")]))
    assert info.value.kind is ErrorKind.AUTH
    assert "ANTHROPIC_API_KEY" in info.value.message
    assert server.requests == []


async def test_unknown_auth_mode_is_refused_at_construction() -> None:
    with pytest.raises(ProviderError) as info:
        AnthropicProvider(
            SPEC, ProviderSettings(name="anthropic", api_key=KEY, auth_mode="password")
        )
    assert info.value.kind is ErrorKind.INVALID_REQUEST
    assert '"api_key" or "oauth"' in info.value.message


async def test_vision_follows_the_catalog_and_claude_ids() -> None:
    provider = AnthropicProvider(SPEC, ProviderSettings(name="anthropic", api_key=KEY))
    assert provider.vision() is True  # the default model, from the catalog
    assert provider.vision("claude-haiku-4-5") is True
    assert provider.vision("claude-opus-9-1") is True  # unknown but Claude
    assert provider.vision("not-a-claude-model") is False
    assert provider.supports_streaming and provider.counts_chunks
    await provider.aclose()
