"""StubChannelHost: the daemon-free ChannelHost adapter tests run against."""

from __future__ import annotations

import anyio
import pytest
from fermix_core.channel import (
    Channel,
    ChannelError,
    ChannelFormatError,
    ChannelHost,
    ChannelRateLimited,
    ChannelTransientError,
    DeliveryResult,
    DeliveryUnavailable,
    InboundMessage,
    OutboundMessage,
    WebhookRequest,
    WebhookResponse,
    WebhookRoute,
)
from fermix_core.testing import MemoryChannel, StubChannelHost

pytestmark = pytest.mark.anyio


def _message(message_id: str | None = "p1", sender: str = "owner") -> InboundMessage:
    return InboundMessage(
        channel="mem", chat_id="c", sender_id=sender, text="hi", message_id=message_id
    )


async def test_the_stub_is_a_channel_host() -> None:
    async with StubChannelHost("mem") as host:
        assert isinstance(host, ChannelHost)


async def test_a_platform_id_is_delivered_once() -> None:
    host = StubChannelHost("mem")
    assert await host.deliver(_message()) is DeliveryResult.ACCEPTED
    assert await host.seen("p1")
    assert await host.deliver(_message()) is DeliveryResult.DUPLICATE
    # A message without a platform id is never a duplicate.
    assert await host.deliver(_message(None)) is DeliveryResult.ACCEPTED
    assert await host.deliver(_message(None)) is DeliveryResult.ACCEPTED
    assert [m.message_id for m in host.deliveries] == ["p1", None, None]
    assert host.results.count(DeliveryResult.DUPLICATE) == 1


async def test_a_failed_hand_off_rolls_the_seen_record_back() -> None:
    calls: list[str] = []

    async def flaky(message: InboundMessage) -> None:
        calls.append(message.text)
        if len(calls) == 1:
            raise OSError("gateway socket closed")

    host = StubChannelHost("mem", on_deliver=flaky)
    with pytest.raises(DeliveryUnavailable, match="gateway socket closed"):
        await host.deliver(_message())
    assert not await host.seen("p1")
    # The platform's retry is accepted.
    assert await host.deliver(_message()) is DeliveryResult.ACCEPTED
    host.unavailable = True
    with pytest.raises(DeliveryUnavailable):
        await host.deliver(_message("p2"))
    assert not await host.seen("p2")


async def test_dropped_senders_and_gateway_outcomes() -> None:
    class Outcome:
        status = "dropped"

    host = StubChannelHost("mem", drop_senders={"stranger"})
    assert await host.deliver(_message("a", sender="stranger")) is DeliveryResult.DROPPED
    gated = StubChannelHost("mem", on_deliver=lambda m: Outcome())
    assert await gated.deliver(_message("b")) is DeliveryResult.DROPPED
    assert host.deliveries == [] and gated.deliveries == []


async def test_reports_are_checked_and_recorded() -> None:
    host = StubChannelHost("mem")
    assert host.state is None
    host.report("degraded", "token expired")
    host.emit("channel.test", n=1)
    assert host.state == "degraded"
    assert host.reports == [("degraded", "token expired")]
    assert host.events == [("channel.test", {"n": 1})]
    with pytest.raises(ValueError, match="starting, ready"):
        host.report("sleepy")


async def test_task_group_http_and_home_live_inside_the_block() -> None:
    host = StubChannelHost("mem")
    with pytest.raises(RuntimeError, match="async with"):
        _ = host.task_group
    ran = anyio.Event()
    async with host:
        home = host.home.path
        assert home.is_dir()
        assert not host.http.is_closed

        async def mark() -> None:
            ran.set()

        host.task_group.start_soon(mark)
        with anyio.fail_after(5):
            await ran.wait()

        async def forever() -> None:
            await anyio.sleep_forever()

        host.task_group.start_soon(forever)  # cancelled on exit, never hangs
    assert not home.exists()
    with pytest.raises(RuntimeError):
        _ = host.http


async def test_wait_for_deliveries_fails_instead_of_hanging() -> None:
    host = StubChannelHost("mem")
    channel = MemoryChannel("mem")
    await channel.start(host)
    assert host.state == "ready"

    async def later() -> None:
        await channel.inject("one")
        await channel.inject("two")

    async with anyio.create_task_group() as tg:
        tg.start_soon(later)
        await host.wait_for_deliveries(2)
    assert [m.text for m in host.deliveries] == ["one", "two"]
    assert channel.last_result is DeliveryResult.ACCEPTED
    with pytest.raises(TimeoutError):
        await host.wait_for_deliveries(3, timeout=0.05)


def test_typed_errors_and_new_defaults() -> None:
    limited = ChannelRateLimited(2.5)
    assert limited.retry_after == 2.5 and "2.5s" in str(limited)
    assert ChannelRateLimited().retry_after is None
    for error in (limited, ChannelTransientError("502"), ChannelFormatError("entities")):
        assert isinstance(error, ChannelError)
    assert OutboundMessage(chat_id="c", text="x").plain is False
    assert Channel.dialect == "plain" and Channel.max_text == 4096
    assert Channel.text_measure == "chars" and dict(Channel.media_caps) == {}
    assert Channel.reactions_allowed is None
    assert tuple(MemoryChannel().webhook_routes()) == ()


async def test_webhook_route_values() -> None:
    async def handler(request: WebhookRequest) -> WebhookResponse:
        return WebhookResponse(body=request.query["hub.challenge"].encode())

    route = WebhookRoute("/webhook/x", ("GET",), handler)
    assert route.max_body_bytes == 1_048_576
    answer = await route.handler(
        WebhookRequest("GET", "/webhook/x", {"hub.challenge": "42"}, {}, b"")
    )
    assert answer.status == 200 and answer.body == b"42"
    assert answer.content_type.startswith("text/plain")
