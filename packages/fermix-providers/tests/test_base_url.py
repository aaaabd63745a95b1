"""A base URL with or without its version segment, and errors that name the URL they tried.

Real loopback sockets: the Anthropic adapter configured the way ``ANTHROPIC_BASE_URL`` is
documented (no ``/v1``), a path that is not an API (an HTML 404), and a closed port.
"""

from __future__ import annotations

import socket

import pytest
from fermix_core.messages import Message
from fermix_core.provider import ChatRequest, ErrorKind, ProviderError, ProviderSettings
from fermix_core.routing.messages import user_message
from fermix_core.testing.loopback import LoopbackServer, RecordedRequest, Reply
from fermix_providers.anthropic.adapter import AnthropicProvider
from fermix_providers.anthropic.plugin import SPEC
from fermix_providers.http.base import normalize_base_url, versioned_fallback
from fermix_providers.openrouter.plugin import SPEC as OPENROUTER

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("both_clients")]
KEY = "sk-ant-api03-base-url-test"
ASK = ChatRequest(messages=[Message.user("hi")])


def messages_reply(request: RecordedRequest) -> Reply:
    if request.path != "/v1/messages":
        return Reply(status=404, body="<html>404 page not found</html>")
    return Reply(
        body={
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-6",
            "content": [{"type": "text", "text": "hello"}],
            "stop_reason": "end_turn",
            "usage": {"input_tokens": 3, "output_tokens": 1},
        }
    )


@pytest.mark.parametrize(
    ("given", "default", "expected"),
    [
        ("https://api.anthropic.com", SPEC.default_base_url, "https://api.anthropic.com/v1"),
        ("https://api.anthropic.com/v1/", SPEC.default_base_url, "https://api.anthropic.com/v1"),
        # A bare host elsewhere is kept (it may serve the API at its root); see below.
        ("http://gpu-box:11434", "http://localhost:11434/v1", None),
        ("https://openrouter.ai", OPENROUTER.default_base_url, "https://openrouter.ai/api/v1"),
        ("https://gw.example/v1/v1", "https://api.openai.com/v1", "https://gw.example/v1"),
        # A gateway's own path layout is never second-guessed.
        ("https://gw.example/v1/acct/openai", "https://api.openai.com/v1", None),
        ("https://chatgpt.com/backend-api/codex", "https://chatgpt.com/backend-api/codex", None),
    ],
)
def test_both_forms_of_a_base_url_are_accepted(given, default, expected) -> None:
    assert normalize_base_url(given, default) == (expected or given)


def test_a_bare_host_falls_back_to_the_version_segment() -> None:
    assert versioned_fallback("http://gpu-box:11434", "http://localhost:11434/v1") == (
        "http://gpu-box:11434/v1"
    )
    assert versioned_fallback("https://gw.example/openai", "https://api.openai.com/v1") is None
    assert versioned_fallback("https://x.example", "https://chatgpt.com/backend-api/codex") is None


async def test_anthropic_without_v1_reaches_the_messages_endpoint() -> None:
    async with (
        LoopbackServer(messages_reply) as server,
        AnthropicProvider(
            SPEC, ProviderSettings(name="anthropic", base_url=server.url, api_key=KEY)
        ) as provider,
    ):
        first = await provider.chat(ASK)
        second = await provider.chat(ASK)
    # The bare host answered 404 once; /v1 answered, and is used from then on.
    assert [r.path for r in server.requests] == ["/messages", "/v1/messages", "/v1/messages"]
    assert first.content == second.content == "hello"


async def test_a_server_with_the_api_at_its_root_is_used_as_written() -> None:
    def root_api(request: RecordedRequest) -> Reply:
        if request.path != "/messages":
            return Reply(status=404, body="not here")
        return messages_reply(RecordedRequest("POST", "/v1/messages", {}, b""))

    async with (
        LoopbackServer(root_api) as server,
        AnthropicProvider(
            SPEC, ProviderSettings(name="anthropic", base_url=server.url, api_key=KEY)
        ) as provider,
    ):
        turn = await provider.chat(ASK)
    assert [r.path for r in server.requests] == ["/messages"]
    assert turn.content == "hello"


async def test_a_404_from_a_path_that_is_no_api_says_check_base_url() -> None:
    async with (
        LoopbackServer(messages_reply) as server,
        AnthropicProvider(
            SPEC,
            ProviderSettings(name="anthropic", base_url=f"{server.url}/proxy", api_key=KEY),
        ) as provider,
    ):
        with pytest.raises(ProviderError) as info:
            await provider.chat(ASK)
    error = info.value
    assert error.kind is ErrorKind.INVALID_REQUEST and error.status == 404
    assert error.url == f"{server.url}/proxy/messages"
    assert error.message == f"no API at {server.url}/proxy/messages — check base_url"
    assert user_message(error, label="Anthropic") == (
        f"There is no Anthropic API at {server.url}/proxy/messages — check "
        "[fermix_core.providers.anthropic] base_url (`fermix config get` shows it)."
    )


async def test_an_unreachable_provider_names_the_url_it_tried() -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    async with AnthropicProvider(
        SPEC, ProviderSettings(name="anthropic", base_url=url, api_key=KEY)
    ) as provider:
        with pytest.raises(ProviderError) as info:
            await provider.chat(ASK)
    # Refused by one host: a transport error (retried, then failed over), not the network race.
    assert info.value.kind is ErrorKind.TRANSPORT
    assert f"at {url}/messages" in info.value.message
    text = user_message(info.value, label="Anthropic")
    assert text.startswith(f"Could not reach Anthropic at {url}/messages (network problem)")
    assert "base_url" in text
