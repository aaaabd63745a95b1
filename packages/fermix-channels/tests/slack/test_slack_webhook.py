"""POST /webhook/slack on a started SlackChannel: verify → parse → hand off → answer,
including the hostile cases (bad, missing and stale signatures, replays, malformed and giant
bodies, unknown event types, strangers, bots)."""

from __future__ import annotations

import json
import sys
import time

import pytest
from fermix_channels.slack.adapter import MAX_WEBHOOK_BODY, WEBHOOK_PATH, SlackChannel
from fermix_channels.slack.config import SlackConfig
from fermix_core.channel import DeliveryResult, WebhookRequest

pytestmark = pytest.mark.anyio

#: The loopback Slack helpers, loaded by conftest.py.
fs = sys.modules["fermix_channels_tests_fake_slack"]


def request(body: bytes | dict, headers: dict | None = None, **extra: str) -> WebhookRequest:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    signed = fs.sign(raw) if headers is None else headers
    return WebhookRequest(
        method="POST", path=WEBHOOK_PATH, query={}, headers={**signed, **extra}, body=raw
    )


async def test_the_route_is_declared_in_events_mode_only(fake) -> None:
    events = SlackChannel(config=SlackConfig(api_base_url=fake.api_url))
    (route,) = events.webhook_routes()
    assert route.path == "/webhook/slack" and route.methods == ("POST",)
    assert route.max_body_bytes == MAX_WEBHOOK_BODY
    socket = SlackChannel(config=SlackConfig(mode="socket"))
    assert tuple(socket.webhook_routes()) == ()


async def test_url_verification_is_answered_with_the_challenge(running) -> None:
    async with running() as (channel, host):
        body = {"token": "x", "challenge": "3eZbrw1aBm2rZgRNFdxV2", "type": "url_verification"}
        response = await channel.handle_webhook(request(body))
    assert response.status == 200
    assert response.body == b"3eZbrw1aBm2rZgRNFdxV2"
    assert host.results == []


async def test_a_direct_message_is_handed_off_and_answered_200(running, fake) -> None:
    async with running() as (channel, host):
        response = await channel.handle_webhook(request(fs.message_event("hello", channel="D1")))
        assert response.status == 200
        assert host.results == [DeliveryResult.ACCEPTED]
    (message,) = host.deliveries
    assert (message.chat_id, message.sender_id, message.text) == ("D1", fs.OWNER_ID, "hello")
    assert host.reports[0][0] == "starting" and ("ready", None) in host.reports
    assert fake.calls_of("auth.test"), "bot_user_id was learned from auth.test"


async def test_a_slack_retry_of_the_same_event_runs_once(running) -> None:
    event = fs.message_event("only once", channel="D1")
    async with running() as (channel, host):
        first = await channel.handle_webhook(request(event))
        retry = await channel.handle_webhook(
            request(event, **{"x-slack-retry-num": "1", "x-slack-retry-reason": "http_timeout"})
        )
    assert (first.status, retry.status) == (200, 200)
    assert host.results == [DeliveryResult.ACCEPTED, DeliveryResult.DUPLICATE]
    assert len(host.deliveries) == 1


async def test_a_mention_delivered_as_app_mention_and_message_runs_once(running) -> None:
    ts = fs.make_ts()
    text = f"<@{fs.BOT_USER_ID}> status?"
    async with running() as (channel, host):
        for kind in ("app_mention", "message"):
            event = fs.message_event(
                text, channel="C0CHAN001", channel_type="channel", event_type=kind, ts=ts
            )
            assert (await channel.handle_webhook(request(event))).status == 200
    assert host.results == [DeliveryResult.ACCEPTED, DeliveryResult.DUPLICATE]
    assert host.deliveries[0].is_group is True
    assert host.deliveries[0].text == "status?"


async def test_a_failed_hand_off_answers_503_and_slacks_retry_is_accepted(running) -> None:
    event = fs.message_event("try again", channel="D1")
    async with running() as (channel, host):
        host.unavailable = True
        refused = await channel.handle_webhook(request(event))
        host.unavailable = False
        retried = await channel.handle_webhook(request(event, **{"x-slack-retry-num": "1"}))
    assert refused.status == 503
    assert retried.status == 200
    assert host.results == [DeliveryResult.ACCEPTED]
    assert [m.text for m in host.deliveries] == ["try again"]


async def test_strangers_are_dropped_with_no_reply(running, fake) -> None:
    async with running() as (channel, host):
        response = await channel.handle_webhook(
            request(fs.message_event("let me in", user=fs.STRANGER_ID, channel="D9"))
        )
    assert response.status == 200
    assert host.results == [DeliveryResult.DROPPED]
    assert host.deliveries == []
    assert fake.posted == [] and fake.calls_of("chat.postMessage") == []


@pytest.mark.parametrize(
    "extra",
    [{"bot_id": "B0OTHER01"}, {"subtype": "bot_message", "bot_id": "B1"}, {"user": fs.BOT_USER_ID}],
)
async def test_bots_and_our_own_messages_never_reach_the_gateway(running, extra) -> None:
    async with running() as (channel, host):
        response = await channel.handle_webhook(request(fs.message_event("beep", **extra)))
    assert response.status == 200
    assert host.results == []


async def test_edits_and_unknown_event_types_are_acknowledged_and_ignored(running) -> None:
    edited = fs.message_event("x", subtype="message_changed")
    reaction = fs.message_event("x")
    reaction["event"] = {"type": "reaction_added", "user": fs.OWNER_ID, "reaction": "eyes"}
    async with running() as (channel, host):
        for body in (edited, reaction, {"type": "block_actions", "actions": []}):
            assert (await channel.handle_webhook(request(body))).status == 200
        limited = {"type": "app_rate_limited", "minute_rate_limited": 1518467820}
        assert (await channel.handle_webhook(request(limited))).status == 200
    assert host.results == []


async def test_channel_chatter_not_addressed_to_the_bot_is_not_a_turn(running) -> None:
    async with running() as (channel, host):
        body = fs.message_event("lunch?", channel="C0CHAN001", channel_type="channel")
        assert (await channel.handle_webhook(request(body))).status == 200
    assert host.results == []


# --------------------------------------------------------------------------- hostile


async def test_a_bad_signature_is_401_and_nothing_runs(running) -> None:
    body = json.dumps(fs.message_event("forged", channel="D1")).encode()
    async with running() as (channel, host):
        forged = await channel.handle_webhook(request(body, fs.sign(body, secret="guessed")))
        tampered = await channel.handle_webhook(
            request(body.replace(b"forged", b"f0rged"), fs.sign(body))
        )
    assert (forged.status, tampered.status) == (401, 401)
    assert host.results == []


@pytest.mark.parametrize("drop", ["x-slack-signature", "x-slack-request-timestamp", "both"])
async def test_missing_signature_headers_are_401(running, drop) -> None:
    body = json.dumps(fs.message_event("hi")).encode()
    headers = fs.sign(body)
    for name in ("x-slack-signature", "x-slack-request-timestamp"):
        if drop in (name, "both"):
            del headers[name]
    async with running() as (channel, host):
        response = await channel.handle_webhook(request(body, headers))
    assert response.status == 401
    assert host.results == []


async def test_a_replayed_request_older_than_five_minutes_is_401(running) -> None:
    body = json.dumps(fs.message_event("replayed", channel="D1")).encode()
    stale = fs.sign(body, timestamp=int(time.time()) - 301)
    async with running() as (channel, host):
        response = await channel.handle_webhook(request(body, stale))
    assert response.status == 401
    assert host.results == []


async def test_url_verification_needs_a_signature_too(running) -> None:
    body = b'{"type":"url_verification","challenge":"abc"}'
    async with running() as (channel, _):
        response = await channel.handle_webhook(request(body, {"content-type": "application/json"}))
    assert response.status == 401
    assert b"abc" not in response.body


@pytest.mark.parametrize(
    "body",
    [b"", b"{not json", b"[]", b'{"type":"event_callback","event":[]}', b"\x00\x01" * 64],
)
async def test_a_signed_but_malformed_body_is_400(running, body) -> None:
    async with running() as (channel, host):
        response = await channel.handle_webhook(request(body))
    assert response.status == 400
    assert host.results == []


async def test_a_signed_body_that_is_not_utf8_is_400_without_crashing(running) -> None:
    body = b'{"type":"event_callback","x":"\xff\xfe"}'
    stamp = str(int(time.time()))
    headers = {
        "x-slack-request-timestamp": stamp,
        "x-slack-signature": fs.manual_signature(body, stamp),
    }
    async with running() as (channel, host):
        response = await channel.handle_webhook(request(body, headers))
    assert response.status == 400
    assert host.results == []


async def test_a_giant_body_is_413_before_any_parsing(running) -> None:
    body = b'{"type":"event_callback","pad":"' + b"x" * MAX_WEBHOOK_BODY + b'"}'
    async with running() as (channel, host):
        response = await channel.handle_webhook(request(body))
    assert response.status == 413
    assert host.results == []


async def test_a_refused_channel_keeps_its_route_and_denies_every_sender(fake, config_for) -> None:
    channel = SlackChannel(config=config_for())  # never started: refused by the runtime
    (route,) = channel.webhook_routes()
    ok = await route.handler(request(fs.message_event("anyone?", channel="D1")))
    challenge = await route.handler(
        request({"type": "url_verification", "challenge": "still-answered"})
    )
    forged = await route.handler(request(b"{}", {"x-slack-signature": "v0=00"}))
    assert ok.status == 200 and fake.calls == []
    assert challenge.body == b"still-answered"
    assert forged.status == 401


async def test_a_restarting_channel_asks_slack_to_retry(running) -> None:
    async with running() as (channel, _):
        pass  # started, then stopped: the runtime restarts it
    response = await channel.handle_webhook(request(fs.message_event("during restart")))
    assert response.status == 503


async def test_a_flood_across_50_chats_keeps_order_and_runs_each_message_once(running) -> None:
    import anyio

    chats = [f"D{n:04d}" for n in range(50)]
    per_chat = 20
    statuses: list[int] = []

    async with running() as (channel, host):

        async def chat(chat_id: str) -> None:
            for n in range(per_chat):
                event = fs.message_event(f"{chat_id} #{n}", channel=chat_id)
                statuses.append((await channel.handle_webhook(request(event))).status)
                if n % 4 == 0:  # Slack retrying some of them
                    retry = request(event, **{"x-slack-retry-num": "1"})
                    statuses.append((await channel.handle_webhook(retry)).status)

        async with anyio.create_task_group() as tg:
            for chat_id in chats:
                tg.start_soon(chat, chat_id)

    assert set(statuses) == {200}
    assert len(host.deliveries) == len(chats) * per_chat
    assert host.results.count(DeliveryResult.DUPLICATE) == len(chats) * (per_chat // 4)
    for chat_id in chats:
        texts = [m.text for m in host.deliveries if m.chat_id == chat_id]
        assert texts == [f"{chat_id} #{n}" for n in range(per_chat)]
