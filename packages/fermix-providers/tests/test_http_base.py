from __future__ import annotations

import dataclasses

import httpx
import pytest
from fermix_core.messages import Turn
from fermix_core.provider import ErrorKind, ProviderError, ProviderSettings
from fermix_core.specs import ProviderSpec
from fermix_core.testing.loopback import LoopbackServer, Reply
from fermix_providers.http import HttpProvider, StreamStats, Timeouts
from fermix_providers.http.errors import error_from_response, retry_after

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("both_clients")]

SPEC = ProviderSpec(name="acme", factory="x.y:Z", default_model="m1")


class Probe(HttpProvider):
    timeouts = Timeouts(connect=2.0, read=0.5, write=2.0, pool=2.0)

    async def chat(self, request):  # pragma: no cover - not used here
        return Turn(content="", model="m1")


def probe(server: LoopbackServer, **kw) -> Probe:
    return Probe(
        SPEC, ProviderSettings(name="acme", base_url=server.url, api_key="sk-secret-value", **kw)
    )


async def collect(provider: Probe, stats: StreamStats) -> list[str]:
    seen = []
    async with provider.stream_sse("/v1/stream", {"a": 1}, stats) as events:
        async for event in events:
            seen.append(event.data)
    return seen


async def test_post_json_sends_auth_and_parses() -> None:
    async with LoopbackServer() as server:
        server.queue(Reply(body={"ok": True}))
        provider = probe(server)
        assert await provider.post_json("/v1/x", {"q": 1}) == {"ok": True}
        await provider.aclose()
    [request] = server.requests
    assert request.header("authorization") == "Bearer sk-secret-value"
    assert request.json() == {"q": 1}


async def test_sse_events_arrive_incrementally_and_are_counted() -> None:
    async with LoopbackServer() as server:
        server.queue(Reply(sse=[{"n": 1}, ("done", {"n": 2})]))
        provider = probe(server)
        stats = StreamStats()
        assert await collect(provider, stats) == ['{"n": 1}', '{"n": 2}']
        assert stats.chunks >= 2 and stats.events == 2
        await provider.aclose()


async def test_stall_before_any_byte_is_a_measured_pre_response_timeout() -> None:
    async with LoopbackServer() as server:
        server.queue(Reply(stall=True))
        provider = probe(server)
        with pytest.raises(ProviderError) as info:
            await collect(provider, StreamStats())
        assert info.value.kind is ErrorKind.TIMEOUT
        assert info.value.pre_response is True
        await provider.aclose()


async def test_stall_mid_stream_is_not_pre_response() -> None:
    async with LoopbackServer() as server:
        server.queue(Reply(sse=[{"n": 1}, {"n": 2}], stall_after=1))
        provider = probe(server)
        stats = StreamStats()
        with pytest.raises(ProviderError) as info:
            await collect(provider, stats)
        assert info.value.kind is ErrorKind.TIMEOUT and info.value.pre_response is False
        await provider.aclose()


async def test_buffered_timeout_never_claims_pre_response() -> None:
    async with LoopbackServer() as server:
        server.queue(Reply(stall=True))
        provider = probe(server)
        with pytest.raises(ProviderError) as info:
            await provider.post_json("/v1/x", {})
        assert info.value.kind is ErrorKind.TIMEOUT and info.value.pre_response is False
        await provider.aclose()


async def test_cut_stream_is_a_transport_error() -> None:
    async with LoopbackServer() as server:
        server.queue(Reply(sse=[{"n": 1}, {"n": 2}], cut_after=1))
        provider = probe(server)
        with pytest.raises(ProviderError) as info:
            await collect(provider, StreamStats())
        assert info.value.kind is ErrorKind.TRANSPORT
        await provider.aclose()


async def test_connection_refused_is_a_transport_error_of_that_host() -> None:
    """A refused connection is one host's failure (fails over), not the network race."""
    async with LoopbackServer() as server:
        url = server.url
    provider = Probe(SPEC, ProviderSettings(name="acme", base_url=url))
    with pytest.raises(ProviderError) as info:
        await provider.post_json("/v1/x", {})
    assert info.value.kind is ErrorKind.TRANSPORT
    await provider.aclose()


async def test_closed_keepalive_connection_is_retried_once_before_data() -> None:
    """The server answers, then closes the kept-alive socket; the next call must succeed."""
    async with LoopbackServer() as server:
        server.queue(Reply(body={"n": 1}, headers={"connection": "close"}), Reply(body={"n": 2}))
        provider = probe(server)
        assert await provider.post_json("/v1/x", {}) == {"n": 1}
        assert await provider.post_json("/v1/x", {}) == {"n": 2}
        await provider.aclose()


async def test_error_bodies_are_classified_and_keys_never_echoed() -> None:
    async with LoopbackServer() as server:
        server.queue(
            Reply(
                status=429,
                headers={"retry-after": "120"},
                body={"error": {"message": "Rate limit reached"}},
            ),
            Reply(status=401, body={"error": {"message": "Incorrect API key provided"}}),
            Reply(
                status=529,
                body={
                    "type": "error",
                    "error": {"type": "overloaded_error", "message": "Overloaded"},
                },
            ),
        )
        provider = probe(server)
        errors = []
        for _ in range(3):
            with pytest.raises(ProviderError) as info:
                await provider.post_json("/v1/x", {})
            errors.append(info.value)
        await provider.aclose()
    assert [e.kind for e in errors] == [ErrorKind.RATE_LIMIT, ErrorKind.AUTH, ErrorKind.OVERLOADED]
    assert errors[0].retry_after_seconds == 120
    assert all("sk-secret-value" not in str(e) for e in errors)


@pytest.mark.parametrize(
    ("status", "body", "kind"),
    [
        (
            400,
            '{"error":{"message":"This model\'s maximum context length is 128000 tokens"}}',
            ErrorKind.CONTEXT_LENGTH,
        ),
        (
            429,
            '{"error":{"code":"insufficient_quota","message":"You exceeded your current quota"}}',
            ErrorKind.QUOTA,
        ),
        (500, '{"error":{"message":"The server had an error"}}', ErrorKind.SERVER_ERROR),
        (503, "<html>down</html>", ErrorKind.OVERLOADED),
        (402, '{"error":{"message":"Insufficient credits"}}', ErrorKind.QUOTA),
        (404, '{"error":{"message":"model not found"}}', ErrorKind.INVALID_REQUEST),
    ],
)
def test_status_and_body_classification(status, body, kind) -> None:
    assert error_from_response("p", status, {}, body).kind is kind


def test_retry_after_sources() -> None:
    assert retry_after({"x-ratelimit-reset-requests": "1m30s"}, "") == 90
    assert retry_after({}, '{"error":{"resets_in_seconds": 600}}') == 600
    assert (
        retry_after(
            {"anthropic-ratelimit-tokens-reset": "2026-11-30T06:00:00Z"}, "", now=1796018400 - 60
        )
        == 60
    )
    assert retry_after({}, "not json") is None


def test_settings_repr_hides_the_key() -> None:
    settings = ProviderSettings(name="acme", api_key="sk-secret-value")
    assert "sk-secret-value" not in repr(settings)
    assert dataclasses.replace(settings, api_key=None).api_key is None


def test_missing_base_url_is_a_clear_error() -> None:
    with pytest.raises(ProviderError, match=r"set \[fermix_core.providers.acme\] base_url"):
        Probe(SPEC, ProviderSettings(name="acme"))


async def test_shared_client_is_not_closed_by_the_adapter() -> None:
    async with httpx.AsyncClient() as client, LoopbackServer() as server:
        provider = probe(server, http=client)
        await provider.aclose()
        assert not client.is_closed
