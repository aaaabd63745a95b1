"""The ``openai_codex`` provider over a real loopback socket: OAuth, headers, stream rules."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from fermix_core.authfile import AuthStore
from fermix_core.messages import Message
from fermix_core.provider import (
    ChatRequest,
    ErrorKind,
    ProviderError,
    ProviderSettings,
    StreamEvent,
    StreamEventKind,
)
from fermix_core.testing.contracts import ProviderContract, Scenario
from fermix_core.testing.loopback import LoopbackServer, RecordedRequest, Reply
from fermix_providers.http import Timeouts
from fermix_providers.oauth import TokenGrant, TokenSource
from fermix_providers.openai_codex.adapter import ORIGINATOR, CodexProvider
from fermix_providers.openai_codex.plugin import SPEC

pytestmark = pytest.mark.anyio

FAST = Timeouts(connect=2.0, read=0.5, write=2.0, pool=2.0)
PREFIX = "/backend-api/codex"


class FakeTokens:
    """The TokenSource interface, scripted: each refresh hands out the next token."""

    def __init__(self, *tokens: str, account_id: str | None = "acct_1") -> None:
        self.tokens = list(tokens)
        self.current = self.tokens.pop(0)
        self.refreshes = 0
        self.account_id = account_id

    async def access_token(self) -> str:
        return self.current

    async def refresh(self) -> str:
        self.refreshes += 1
        self.current = self.tokens.pop(0)
        return self.current


def codex(server: LoopbackServer, source, **kw) -> CodexProvider:
    return CodexProvider(
        SPEC,
        ProviderSettings(
            name="openai_codex",
            base_url=server.url + PREFIX,
            extra={"timeouts": FAST, "token_source": source},
            **kw,
        ),
    )


ITEM = {
    "type": "message",
    "id": "msg_1",
    "role": "assistant",
    "content": [{"type": "output_text", "text": "Codex says hi."}],
}
TEXT_SSE = [
    {"type": "response.created", "response": {"id": "resp_c"}},
    {"type": "response.output_text.delta", "item_id": "msg_1", "delta": "Codex "},
    {"type": "response.output_text.delta", "item_id": "msg_1", "delta": "says hi."},
    {"type": "response.output_item.done", "output_index": 0, "item": ITEM},
    {"type": "response.completed", "response": {"id": "resp_c", "output": [], "usage": {}}},
]
CALL_ITEM = {
    "type": "function_call",
    "id": "fc_1",
    "call_id": "call_echo",
    "name": "contract_echo",
    "arguments": '{"text": "ping"}',
}
CALL_SSE = [
    {
        "type": "response.output_item.added",
        "output_index": 0,
        "item": {**CALL_ITEM, "arguments": ""},
    },
    {"type": "response.function_call_arguments.delta", "item_id": "fc_1", "delta": '{"text": '},
    {"type": "response.function_call_arguments.delta", "item_id": "fc_1", "delta": '"ping"}'},
    {"type": "response.output_item.done", "output_index": 0, "item": CALL_ITEM},
    {"type": "response.completed", "response": {"id": "resp_d", "output": []}},
]


def backend(scenario: Scenario):
    def handle(request: RecordedRequest) -> Reply:
        if scenario == Scenario.ERROR:
            sentence = "Our servers are currently overloaded. Please try again later."
            failure = {"code": "server_is_overloaded", "message": sentence}
            return Reply(sse=[{"type": "response.failed", "response": {"error": failure}}])
        answered = any(i.get("type") == "function_call_output" for i in request.json()["input"])
        if scenario == Scenario.TOOL_CALL and not answered:
            return Reply(sse=CALL_SSE)
        return Reply(sse=TEXT_SSE)

    return handle


class TestCodexContract(ProviderContract):
    secret = "codex-access-token-secret"

    @pytest.fixture(autouse=True)
    async def _servers(self) -> AsyncIterator[None]:
        self.servers: list[LoopbackServer] = []
        yield
        for server in self.servers:
            await server.__aexit__(None, None, None)

    async def make_provider(self, scenario: Scenario) -> CodexProvider:
        server = LoopbackServer(backend(scenario))
        await server.__aenter__()
        self.servers.append(server)
        return codex(server, FakeTokens(self.secret))


def jwt(claims: dict) -> str:
    def part(data: dict) -> str:
        return base64.urlsafe_b64encode(json.dumps(data).encode()).decode().rstrip("=")

    return f"{part({'alg': 'none'})}.{part(claims)}.sig"


async def test_path_headers_and_body_follow_the_codex_backend() -> None:
    async with LoopbackServer() as server:
        server.queue(Reply(sse=TEXT_SSE))
        async with codex(server, FakeTokens("tok-1"), reasoning_effort="high") as provider:
            turn = await provider.chat(ChatRequest(messages=[Message.user("hi")]))
    assert turn.content == "Codex says hi."
    [sent] = server.requests
    assert sent.path == "/backend-api/codex/responses"
    assert sent.header("authorization") == "Bearer tok-1"
    assert sent.header("chatgpt-account-id") == "acct_1"
    assert sent.header("openai-beta") == "responses=experimental"
    assert sent.header("originator") == ORIGINATOR
    assert sent.header("accept") == "text/event-stream"
    body = sent.json()
    assert body["stream"] is True, "the backend only streams, asked or not"
    assert body["store"] is False
    assert body["instructions"] == ""
    assert body["model"] == "gpt-5.6-codex"
    assert body["reasoning"] == {"effort": "high", "summary": "auto"}
    assert "service_tier" not in body


async def test_fast_selects_the_priority_tier() -> None:
    async with LoopbackServer() as server:
        server.queue(Reply(sse=TEXT_SSE))
        async with codex(server, FakeTokens("t"), fast=True) as provider:
            await provider.chat(ChatRequest(messages=[Message.user("hi")]))
    assert server.requests[0].json()["service_tier"] == "priority"


async def test_effort_clamps_to_the_model_ceiling() -> None:
    async with LoopbackServer() as server:
        server.queue(Reply(sse=TEXT_SSE))
        async with codex(server, FakeTokens("t")) as provider:
            await provider.chat(
                ChatRequest(messages=[Message.user("hi")], model="gpt-5.4", reasoning_effort="max")
            )
    assert server.requests[0].json()["reasoning"]["effort"] == "xhigh"


async def test_account_id_falls_back_to_the_token_claims() -> None:
    token = jwt({"https://api.openai.com/auth": {"chatgpt_account_id": "acct_from_jwt"}})
    async with LoopbackServer() as server:
        server.queue(Reply(sse=TEXT_SSE))
        async with codex(server, FakeTokens(token, account_id=None)) as provider:
            await provider.chat(ChatRequest(messages=[Message.user("hi")]))
    assert server.requests[0].header("chatgpt-account-id") == "acct_from_jwt"


async def test_reasoning_summaries_and_deltas_stream_as_events() -> None:
    seen: list[StreamEvent] = []
    sse = [
        {
            "type": "response.reasoning_summary_text.done",
            "item_id": "rs",
            "summary_index": 0,
            "text": "**Planning** the reply.",
        },
        *TEXT_SSE,
    ]
    async with LoopbackServer() as server:
        server.queue(Reply(sse=sse))
        async with codex(server, FakeTokens("t")) as provider:
            await provider.chat(
                ChatRequest(messages=[Message.user("hi")], stream=True, on_event=seen.append)
            )
    kinds = [e.kind for e in seen]
    assert kinds[0] == StreamEventKind.REASONING_SUMMARY
    assert seen[0].text == "**Planning** the reply."
    assert kinds.count(StreamEventKind.TEXT_DELTA) == 2
    assert kinds[-1] == StreamEventKind.ITEM_DONE


async def test_401_refreshes_once_and_retries() -> None:
    tokens = FakeTokens("stale", "fresh")
    async with LoopbackServer() as server:
        server.queue(
            Reply(status=401, body={"error": {"message": "token expired"}}), Reply(sse=TEXT_SSE)
        )
        async with codex(server, tokens) as provider:
            turn = await provider.chat(ChatRequest(messages=[Message.user("hi")]))
    assert turn.content == "Codex says hi."
    assert tokens.refreshes == 1
    assert [r.header("authorization") for r in server.requests] == [
        "Bearer stale",
        "Bearer fresh",
    ]


async def test_second_401_is_a_residual_oauth_failure() -> None:
    tokens = FakeTokens("stale", "still-bad")
    refused = Reply(status=401, body={"error": {"message": "invalid token"}})
    async with LoopbackServer() as server:
        server.queue(refused, refused)
        async with codex(server, tokens) as provider:
            with pytest.raises(ProviderError) as info:
                await provider.chat(ChatRequest(messages=[Message.user("hi")]))
    error = info.value
    assert error.kind is ErrorKind.OAUTH
    assert error.status == 401
    assert "fermix auth login --provider openai_codex" in error.message
    assert tokens.refreshes == 1
    assert len(server.requests) == 2
    assert "still-bad" not in str(error)


async def test_403_is_not_refreshed() -> None:
    tokens = FakeTokens("t", "unused")
    async with LoopbackServer() as server:
        server.queue(Reply(status=403, body={"detail": "Forbidden"}))
        async with codex(server, tokens) as provider:
            with pytest.raises(ProviderError) as info:
                await provider.chat(ChatRequest(messages=[Message.user("hi")]))
    assert info.value.kind is ErrorKind.AUTH
    assert tokens.refreshes == 0


def _store(tmp_path: Path, **profile) -> AuthStore:
    store = AuthStore(tmp_path / "auth.json")
    store.put("codex", profile)
    return store


async def test_real_token_source_refresh_rotates_and_persists(tmp_path: Path) -> None:
    store = _store(
        tmp_path,
        access_token="old-access",
        refresh_token="refresh-1",
        account_id="acct_store",
        expires_at=time.time() + 3600,
    )
    spent: list[str] = []

    async def refresher(profile) -> TokenGrant:
        spent.append(profile["refresh_token"])
        return TokenGrant(access_token="new-access", refresh_token="refresh-2")

    source = TokenSource(store, "codex", refresher)
    async with LoopbackServer() as server:
        server.queue(Reply(status=401, body={"error": {"message": "expired"}}), Reply(sse=TEXT_SSE))
        async with codex(server, source) as provider:
            await provider.chat(ChatRequest(messages=[Message.user("hi")]))
    assert spent == ["refresh-1"]
    assert [r.header("authorization") for r in server.requests] == [
        "Bearer old-access",
        "Bearer new-access",
    ]
    assert {r.header("chatgpt-account-id") for r in server.requests} == {"acct_store"}
    saved = store.get("codex")
    assert saved["access_token"] == "new-access"
    assert saved["refresh_token"] == "refresh-2"


async def test_missing_login_fails_before_any_request(tmp_path: Path) -> None:
    store = AuthStore(tmp_path / "auth.json")
    async with LoopbackServer() as server:
        provider = CodexProvider(
            SPEC,
            ProviderSettings(
                name="openai_codex",
                base_url=server.url + PREFIX,
                auth_store=store,
                extra={"timeouts": FAST},
            ),
        )
        async with provider:
            with pytest.raises(ProviderError) as info:
                await provider.chat(ChatRequest(messages=[Message.user("hi")]))
    assert info.value.kind is ErrorKind.OAUTH
    assert "fermix auth login --provider openai_codex" in info.value.message
    assert server.requests == []


# The Codex stream rules ----------------------------------------------------------------

OVERLOAD = "Our servers are currently overloaded. Please try again later."


@pytest.mark.parametrize(
    ("reply", "kind", "pre_response"),
    [
        (
            Reply(
                sse=[
                    {"type": "response.created", "response": {"id": "r"}},
                    {
                        "type": "response.failed",
                        "response": {
                            "error": {"code": "server_is_overloaded", "message": OVERLOAD}
                        },
                    },
                ]
            ),
            ErrorKind.OVERLOADED,
            False,
        ),
        (
            Reply(sse=[{"type": "response.created", "response": {}}] * 3, cut_after=1),
            ErrorKind.TRANSPORT,
            False,
        ),
        (Reply(stall=True), ErrorKind.TIMEOUT, True),
        (
            Reply(
                status=429,
                body={
                    "error": {
                        "type": "usage_limit_reached",
                        "message": "The usage limit has been reached",
                        "resets_in_seconds": 1800,
                    }
                },
            ),
            ErrorKind.QUOTA,
            False,
        ),
    ],
    ids=["declared-overload", "cut", "pre-response-stall", "usage-limit"],
)
async def test_failures_are_classified(reply: Reply, kind: ErrorKind, pre_response: bool) -> None:
    async with LoopbackServer() as server:
        server.queue(reply)
        async with codex(server, FakeTokens("t")) as provider:
            with pytest.raises(ProviderError) as info:
                await provider.chat(ChatRequest(messages=[Message.user("hi")]))
    error = info.value
    assert error.kind is kind
    assert error.pre_response is pre_response
    assert error.provider == "openai_codex"
    if kind is ErrorKind.OVERLOADED:
        assert error.message == OVERLOAD, "the server's sentence, verbatim"
    if kind is ErrorKind.QUOTA:
        assert error.retry_after_seconds == 1800


async def test_output_without_completion_is_returned() -> None:
    async with LoopbackServer() as server:
        server.queue(Reply(sse=TEXT_SSE[:4]))
        async with codex(server, FakeTokens("t")) as provider:
            turn = await provider.chat(ChatRequest(messages=[Message.user("hi")]))
    assert turn.content == "Codex says hi."
    assert turn.provider_state == {"response_id": "resp_c"}
