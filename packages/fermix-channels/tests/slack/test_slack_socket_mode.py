"""Socket Mode against a loopback websocket speaking Slack's protocol: hello, events_api
envelopes and their acks, redelivery, disconnect/reconnect and the refusals."""

from __future__ import annotations

import json
import sys

import anyio
import pytest
from fermix_channels.slack.client import SlackApi
from fermix_channels.slack.socket import SocketModeClient
from fermix_core.channel import ChannelError, DeliveryResult
from fermix_core.testing.loopback import Reply

pytestmark = pytest.mark.anyio

#: The loopback Slack helpers, loaded by conftest.py.
fs = sys.modules["fermix_channels_tests_fake_slack"]

SOCKET = {"mode": "socket", "app_token": fs.APP_TOKEN, "signing_secret": None}


async def test_hello_makes_the_channel_ready_and_events_are_delivered_then_acked(
    running, fake
) -> None:
    async with running(**SOCKET) as (channel, host):
        assert host.state == "ready"  # start() returned after Slack's hello
        envelope = await fake.push_event(fs.message_event("over the socket", channel="D1"))
        await fake.wait_ack(envelope)
    assert [m.text for m in host.deliveries] == ["over the socket"]
    assert fake.calls_of("apps.connections.open")
    assert tuple(channel.webhook_routes()) == ()


async def test_a_redelivered_envelope_is_acked_and_runs_once(running, fake) -> None:
    event = fs.message_event("once", channel="D1")
    async with running(**SOCKET) as (_, host):
        await fake.wait_ack(await fake.push_event(event))
        await fake.wait_ack(await fake.push_event(event, retry_attempt=1))
    assert host.results == [DeliveryResult.ACCEPTED, DeliveryResult.DUPLICATE]


async def test_a_failed_hand_off_is_not_acked_so_slack_redelivers(running, fake) -> None:
    event = fs.message_event("later", channel="D1")
    async with running(**SOCKET) as (_, host):
        host.unavailable = True
        first = await fake.push_event(event)
        # The client handles envelopes in order: once the next one is acked, the first was
        # handled and deliberately left unacknowledged.
        probe = await fake.push_event({"type": "block_actions"})
        await fake.wait_ack(probe)
        assert first not in fake.acks
        host.unavailable = False
        await fake.wait_ack(await fake.push_event(event, retry_attempt=1))
    assert [m.text for m in host.deliveries] == ["later"]


async def test_refresh_requested_reconnects_on_a_fresh_url(running, fake) -> None:
    async with running(**SOCKET) as (_, host):
        await fake.wait_socket(1)
        await fake.disconnect("refresh_requested")
        await fake.wait_socket(2)
        await fake.wait_ack(await fake.push_event(fs.message_event("after refresh")))
    assert fake.connections_opened == 2
    assert [m.text for m in host.deliveries] == ["after refresh"]


async def test_a_dropped_connection_reconnects_after_backoff(fake) -> None:
    api = SlackApi(fs.BOT_TOKEN, fake.api_url)
    delivered: list[dict] = []
    states: list[str] = []

    async def handle(payload: dict) -> bool:
        delivered.append(payload)
        return True

    client = SocketModeClient(
        api,
        fs.APP_TOKEN,
        handle,
        on_state=lambda state, error: states.append(state),
        backoff_initial=0.01,
        backoff_max=0.05,
    )
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(client.run)
            socket = await fake.wait_socket(1)
            await socket.close(code=1011)  # no disconnect message: the link just died
            await fake.wait_socket(2)
            await fake.wait_ack(await fake.push_event(fs.message_event("back")))
            tg.cancel_scope.cancel()
    finally:
        await api.aclose()
    assert [p["event"]["text"] for p in delivered] == ["back"]
    assert client.sessions == 2
    assert states.count("ready") == 2


async def test_rate_limited_or_failing_url_requests_are_retried(fake) -> None:
    fake.fail(
        "apps.connections.open",
        Reply(status=429, headers={"Retry-After": "0"}, body={"ok": False, "error": "ratelimited"}),
        Reply(status=500, body={"ok": False, "error": "internal_error"}),
    )
    api = SlackApi(fs.BOT_TOKEN, fake.api_url)
    states: list[str] = []

    async def handle(payload: dict) -> bool:
        return True

    client = SocketModeClient(
        api,
        fs.APP_TOKEN,
        handle,
        on_state=lambda state, error: states.append(state),
        backoff_initial=0.01,
        backoff_max=0.05,
    )
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(client.run)
            await fake.wait_socket(1)
            await fake.wait_ack(await fake.push_event(fs.message_event("finally")))
            tg.cancel_scope.cancel()
    finally:
        await api.aclose()
    assert len(fake.calls_of("apps.connections.open")) == 3
    assert states == ["degraded", "degraded", "ready"]


async def test_link_disabled_is_a_configuration_fault_that_raises(fake) -> None:
    api = SlackApi(fs.BOT_TOKEN, fake.api_url)

    async def handle(payload: dict) -> bool:
        return True

    async def disable() -> None:
        await fake.wait_socket(1)
        await fake.disconnect("link_disabled")

    client = SocketModeClient(api, fs.APP_TOKEN, handle)
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(disable)
            with anyio.fail_after(10), pytest.raises(ChannelError, match="Socket Mode"):
                await client.run()
    finally:
        await api.aclose()


async def test_a_refused_app_token_raises_out_of_the_loop(fake) -> None:
    api = SlackApi(fs.BOT_TOKEN, fake.api_url)

    async def handle(payload: dict) -> bool:
        return True

    try:
        with anyio.fail_after(10), pytest.raises(ChannelError, match="invalid_auth"):
            await SocketModeClient(api, "xapp-revoked", handle).run()
    finally:
        await api.aclose()


async def test_junk_frames_and_other_envelope_types_do_not_break_the_loop(running, fake) -> None:
    async with running(**SOCKET) as (_, host):
        await fake.push_raw("not json")
        await fake.push_raw("[1, 2]")
        await fake.push_raw(json.dumps({"type": "events_api"}))  # no envelope id
        await fake.push_raw(json.dumps({"envelope_id": "e-slash", "type": "slash_commands"}))
        await fake.wait_ack("e-slash")
        await fake.push_raw(
            json.dumps({"envelope_id": "e-bad", "type": "events_api", "payload": {"type": 5}})
        )
        await fake.wait_ack("e-bad")
        await fake.wait_ack(await fake.push_event(fs.message_event("still here")))
    assert [m.text for m in host.deliveries] == ["still here"]


async def test_stop_closes_the_socket(running, fake) -> None:
    async with running(**SOCKET) as (channel, _):
        socket = await fake.wait_socket(1)
        await channel.stop()
        await fake.wait_for(lambda: socket.close_code is not None)
    assert channel.api is None


async def test_start_returns_degraded_when_slack_never_says_hello(
    running, fake, monkeypatch
) -> None:
    import fermix_channels.slack.adapter as adapter

    monkeypatch.setattr(adapter, "SOCKET_HELLO_WAIT", 0.05)
    fake.fail(
        "apps.connections.open",
        *[Reply(status=500, body={"ok": False, "error": "internal_error"})] * 50,
    )
    async with running(**SOCKET) as (_, host):
        assert host.state == "degraded"
        assert any("hello" in (error or "") for state, error in host.reports)
        assert "ready" not in [state for state, _ in host.reports]
