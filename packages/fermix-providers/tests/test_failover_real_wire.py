"""Retry and failover decided on errors a real adapter raised against real sockets.

The policy tables are tested exhaustively as data in fermix-core; these tests pin the
classification that feeds them: a host that refuses connections is one provider's
transport failure (retried in place, then failed over), never the network-wide
``connection_unavailable`` that must not fail over.
"""

from __future__ import annotations

from typing import Any

import pytest
from fermix_core.messages import Message
from fermix_core.provider import ChatRequest, ErrorKind, ProviderError, ProviderSettings
from fermix_core.routing import RouteChain
from fermix_core.routing.records import Route, RoutePlan
from fermix_core.specs import ModelInfo, ProviderSpec
from fermix_core.testing.loopback import LoopbackServer, Reply
from fermix_providers.http import Timeouts
from fermix_providers.wires.chat_completions import ChatCompletionsProvider

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("both_clients")]


def spec(name: str) -> ProviderSpec:
    return ProviderSpec(
        name=name,
        factory="fermix_providers.wires.chat_completions:ChatCompletionsProvider",
        default_model="m1",
        models=(ModelInfo("m1", 128_000),),
    )


class Quick(ChatCompletionsProvider):
    timeouts = Timeouts(connect=2.0, read=2.0, write=2.0, pool=2.0)


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []
        self.sleeps: list[float] = []

    def emit(self, name: str, **data: Any) -> None:
        self.events.append((name, data))

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)


def answer(text: str) -> Reply:
    return Reply(
        body={
            "id": "c1",
            "model": "m1",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": "stop",
                }
            ],
        }
    )


def route(name: str, url: str, role: str) -> tuple[Route, Quick]:
    settings = ProviderSettings(name=name, base_url=url, api_key="sk-x", default_model="m1")
    return Route(name=name, spec=spec(name), settings=settings, role=role), Quick(
        spec(name), settings
    )


async def run_chain(primary_url: str, fallback_url: str, rec: Recorder) -> tuple[str, str]:
    first, first_provider = route("primary_host", primary_url, "primary")
    second, second_provider = route("spare_host", fallback_url, "fallback")
    chain = RouteChain(
        RoutePlan(first, (second,)),
        {"primary_host": first_provider, "spare_host": second_provider},
        rec.emit,
        sleep=rec.sleep,
    )
    try:
        turn, won = await chain.initial(ChatRequest(messages=[Message.user("hi")]))
    finally:
        await first_provider.aclose()
        await second_provider.aclose()
    return turn.content, won.name


async def test_a_primary_refusing_connections_fails_over_after_the_bounded_retry() -> None:
    async with LoopbackServer() as dead:
        dead_url = dead.url  # closed when the block ends: connections are refused
    rec = Recorder()
    async with LoopbackServer() as spare:
        spare.queue(answer("from the spare"))
        content, won = await run_chain(dead_url, spare.url, rec)
    assert (content, won) == ("from the spare", "spare_host")
    retries = [data for name, data in rec.events if name == "provider.retry"]
    assert [r["kind"] for r in retries] == ["transport", "transport"]
    assert rec.sleeps == [0.25, 0.5]
    [hop] = [data for name, data in rec.events if name == "provider.failover"]
    assert hop["from"] == "primary_host" and hop["kind"] == "transport"


@pytest.mark.parametrize("status", [500, 502, 503, 529])
async def test_provider_5xx_is_retried_in_place_then_fails_over(status: int) -> None:
    rec = Recorder()
    body = {"error": {"message": "Overloaded", "type": "overloaded_error"}}
    async with LoopbackServer() as primary, LoopbackServer() as spare:
        for _ in range(3):
            primary.queue(Reply(status=status, body=body))
        spare.queue(answer("from the spare"))
        content, won = await run_chain(primary.url, spare.url, rec)
        assert len(primary.requests) == 3
    assert (content, won) == ("from the spare", "spare_host")
    assert rec.sleeps == [0.25, 0.5]


async def test_a_5xx_flake_self_heals_on_the_same_route() -> None:
    rec = Recorder()
    async with LoopbackServer() as primary, LoopbackServer() as spare:
        primary.queue(Reply(status=529, body={"error": {"message": "Overloaded"}}))
        primary.queue(answer("second try"))
        content, won = await run_chain(primary.url, spare.url, rec)
        assert spare.requests == []
    assert (content, won) == ("second try", "primary_host")


async def test_refused_is_transport_but_a_down_network_is_connection_unavailable() -> None:
    import errno
    import socket

    import httpx
    from fermix_providers.http.errors import error_from_exception

    def wrapped(cause: BaseException) -> httpx.ConnectError:
        exc = httpx.ConnectError(str(cause))
        exc.__cause__ = cause
        return exc

    def kind(exc: httpx.HTTPError) -> ErrorKind:
        return error_from_exception("p", exc, chunks_seen=0, counts_chunks=True).kind

    assert kind(httpx.PoolTimeout("no connection available")) is ErrorKind.CONNECTION_UNAVAILABLE
    unreachable = OSError(errno.ENETUNREACH, "Network is unreachable")
    assert kind(wrapped(unreachable)) is ErrorKind.CONNECTION_UNAVAILABLE
    no_dns = socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")
    assert kind(wrapped(no_dns)) is ErrorKind.CONNECTION_UNAVAILABLE
    refused = ConnectionRefusedError(errno.ECONNREFUSED, "Connection refused")
    assert kind(wrapped(refused)) is ErrorKind.TRANSPORT
    reset = ConnectionResetError(errno.ECONNRESET, "Connection reset by peer")
    assert kind(wrapped(reset)) is ErrorKind.TRANSPORT
    error = error_from_exception("p", wrapped(refused), chunks_seen=0, counts_chunks=True)
    assert isinstance(error, ProviderError) and error.pre_response is True
