"""The WhatsApp adapter against the loopback Graph API, on a StubChannelHost.

Hostile cases included: bad, missing and stale signatures, replays, malformed and giant
bodies, unknown events, status callbacks, strangers (dropped before any download).
"""

from __future__ import annotations

import json
import logging
import sys
from typing import Any

import pytest
from fermix_channels.whatsapp.adapter import WhatsAppChannel
from fermix_channels.whatsapp.client import GraphError
from fermix_core.channel import (
    Attachment,
    ChannelRateLimited,
    ChannelTransientError,
    DeliveryResult,
    OutboundMessage,
    WebhookRequest,
)
from fermix_core.testing import StubChannelHost

pytestmark = pytest.mark.anyio

# Loaded by conftest.py (test directories are not packages).
fg = sys.modules["fermix_channels_tests_fake_graph"]
whatsapp_config = fg.whatsapp_config


def post(body: bytes, headers: dict[str, str] | None = None) -> WebhookRequest:
    signed = fg.signed_headers(body) if headers is None else headers
    return WebhookRequest("POST", "/webhook/whatsapp", {}, signed, body)


async def running(graph: Any, **overrides: Any) -> tuple[WhatsAppChannel, StubChannelHost]:
    # Album merging is tested in test_whatsapp_albums.py; here each image is its own turn.
    overrides.setdefault("album_debounce_ms", 0)
    channel = WhatsAppChannel(whatsapp_config(graph, **overrides))
    host = StubChannelHost("whatsapp", config=channel.config)
    await host.__aenter__()
    await channel.start(host)
    return channel, host


@pytest.fixture
async def wa(graph):
    channel, host = await running(graph)
    try:
        yield channel, host
    finally:
        await channel.stop()
        await host.__aexit__(None, None, None)


async def test_the_subscription_handshake(wa) -> None:
    channel, _ = wa
    good = {
        "hub.mode": "subscribe",
        "hub.verify_token": fg.VERIFY_TOKEN,
        "hub.challenge": "1158201444",
    }
    answer = await channel.handle_webhook(WebhookRequest("GET", "/webhook/whatsapp", good, {}, b""))
    assert answer.status == 200 and answer.body == b"1158201444"
    for bad in (
        {**good, "hub.verify_token": "guess"},
        {**good, "hub.mode": "unsubscribe"},
        {k: v for k, v in good.items() if k != "hub.challenge"},
    ):
        refused = await channel.handle_webhook(WebhookRequest("GET", "/", bad, {}, b""))
        assert refused.status == 403


async def test_a_signed_text_becomes_one_normalized_message(wa, graph) -> None:
    channel, host = wa
    body = fg.delivery(fg.value([fg.text_message(fg.OWNER, "hello *there*", "wamid.A1")]))
    answer = await channel.handle_webhook(post(body))
    assert answer.status == 200
    (message,) = host.deliveries
    assert message.channel == "whatsapp"
    assert message.chat_id == message.sender_id == fg.OWNER
    assert message.text == "hello *there*"
    assert message.message_id == "wamid.A1"
    assert not message.is_group
    # A reply goes to the Graph API with previews off and the original quoted.
    sent = await channel.send(OutboundMessage(chat_id=fg.OWNER, text="hi!", reply_to="wamid.A1"))
    assert sent.message_id.startswith("wamid.out.")
    (out,) = graph.messages
    assert out["to"] == fg.OWNER and out["type"] == "text"
    assert out["text"] == {"preview_url": False, "body": "hi!"}
    assert out["context"] == {"message_id": "wamid.A1"}
    assert out["recipient_type"] == "individual"


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ({}, 401),  # missing
        ({"x-hub-signature-256": "sha256=" + "0" * 64}, 403),  # bad
        ({"x-hub-signature-256": "sha1=abc"}, 403),  # wrong scheme
        ({"x-hub-signature-256": "sha256=ünïcode"}, 403),
        (fg.signed_headers(b"other body"), 403),  # signed for a different body
        (None, 403),  # stale: signed with a rotated-out app secret (filled in below)
    ],
)
async def test_bad_signatures_are_refused_and_nothing_runs(wa, graph, headers, status) -> None:
    channel, host = wa
    body = fg.delivery(fg.value([fg.text_message(fg.OWNER, "forged", "wamid.F1")]))
    if headers is None:
        headers = fg.signed_headers(body, secret="old-app-secret-before-rotation")
    answer = await channel.handle_webhook(post(body, headers))
    assert answer.status == status
    assert host.results == [] and graph.messages == []


async def test_replays_run_once(wa) -> None:
    channel, host = wa
    body = fg.delivery(fg.value([fg.text_message(fg.OWNER, "once", "wamid.R1")]))
    for _ in range(3):
        assert (await channel.handle_webhook(post(body))).status == 200
    assert [m.message_id for m in host.deliveries] == ["wamid.R1"]


async def test_malformed_giant_and_unknown_bodies(wa, caplog) -> None:
    channel, host = wa
    wrong_shape = json.dumps({"object": "whatsapp_business_account", "entry": "x"}).encode()
    for body in (b"{not json", b"[1, 2]", wrong_shape):
        assert (await channel.handle_webhook(post(body))).status == 400
    deep = b"[" * 100_000 + b"]" * 100_000
    assert (await channel.handle_webhook(post(deep))).status in (400, 413)
    giant = b'{"x":"' + b"a" * 1_100_000 + b'"}'
    assert (await channel.handle_webhook(post(giant))).status == 413
    other_object = json.dumps({"object": "page", "entry": []}).encode()
    assert (await channel.handle_webhook(post(other_object))).status == 200
    other_field = fg.delivery(fg.value([]), field="account_update")
    assert (await channel.handle_webhook(post(other_field))).status == 200
    odd = fg.delivery(
        fg.value(
            [
                {"from": fg.OWNER, "id": "wamid.U1", "type": "unsupported", "errors": []},
                {
                    "from": fg.OWNER,
                    "id": "wamid.U2",
                    "type": "reaction",
                    "reaction": {"message_id": "wamid.out.1", "emoji": "👍"},
                },
            ]
        )
    )
    assert (await channel.handle_webhook(post(odd))).status == 200
    elsewhere = fg.delivery(
        fg.value([fg.text_message(fg.OWNER, "hi", "wamid.E1")], phone_number_id="999")
    )
    assert (await channel.handle_webhook(post(elsewhere))).status == 200
    assert host.results == []


async def test_status_callbacks_are_not_turns_and_failures_are_reported(wa, caplog) -> None:
    channel, host = wa
    statuses = [
        {"id": "wamid.out.1", "status": "sent", "timestamp": "1", "recipient_id": fg.OWNER},
        {"id": "wamid.out.1", "status": "delivered", "timestamp": "2", "recipient_id": fg.OWNER},
        {"id": "wamid.out.1", "status": "read", "timestamp": "3", "recipient_id": fg.OWNER},
        {
            "id": "wamid.out.2",
            "status": "failed",
            "timestamp": "4",
            "recipient_id": fg.OWNER,
            "errors": [
                {
                    "code": 131047,
                    "title": "Re-engagement message",
                    "error_data": {"details": "more than 24 hours have passed"},
                }
            ],
        },
    ]
    with caplog.at_level(logging.ERROR, logger="fermix_channels.whatsapp"):
        answer = await channel.handle_webhook(post(fg.delivery(fg.value(statuses=statuses))))
    assert answer.status == 200
    assert host.results == []
    (event,) = [e for e in host.events if e[0] == "channel.delivery_failed"]
    assert "24-hour customer-service window" in event[1]["error"]
    assert any("24-hour" in r.getMessage() for r in caplog.records)


async def test_strangers_are_dropped_before_any_download(wa, graph) -> None:
    channel, host = wa
    graph.add_media("MEDIA1", b"\xff\xd8jpeg", "image/jpeg")
    body = fg.delivery(
        fg.value(
            [
                fg.media_message(fg.STRANGER, "image", "MEDIA1", "wamid.S1"),
                fg.text_message(fg.STRANGER, "let me in", "wamid.S2"),
            ]
        )
    )
    assert (await channel.handle_webhook(post(body))).status == 200
    assert graph.lookups == [] and graph.downloads == []
    assert host.results == []


async def test_owner_media_is_downloaded_and_a_guest_is_served(wa, graph) -> None:
    channel, host = wa
    graph.add_media("MEDIA2", b"\xff\xd8\xffjpeg-bytes", "image/jpeg")
    graph.add_media("HUGE", b"x", "video/mp4", declared=30 * 1024 * 1024)
    body = fg.delivery(
        fg.value(
            [
                fg.media_message(fg.OWNER, "image", "MEDIA2", "wamid.M1", caption="look"),
                fg.media_message(fg.GUEST, "video", "HUGE", "wamid.M2", mime_type="video/mp4"),
            ]
        )
    )
    assert (await channel.handle_webhook(post(body))).status == 200
    image, video = host.deliveries
    assert image.text == "look"
    (attachment,) = image.attachments
    assert attachment.kind == "image" and attachment.data == b"\xff\xd8\xffjpeg-bytes"
    assert attachment.mime_type == "image/jpeg"
    assert video.attachments == [] and "over 25 MB" in video.text
    assert graph.downloads == ["MEDIA2"]  # the oversized one was never fetched


async def test_a_failed_hand_off_answers_503_and_the_retry_is_accepted(wa) -> None:
    channel, host = wa
    body = fg.delivery(fg.value([fg.text_message(fg.OWNER, "later", "wamid.H1")]))
    host.unavailable = True
    answer = await channel.handle_webhook(post(body))
    assert answer.status == 503
    host.unavailable = False
    assert (await channel.handle_webhook(post(body))).status == 200
    assert [m.message_id for m in host.deliveries] == ["wamid.H1"]
    assert host.results[-1] is DeliveryResult.ACCEPTED


async def test_send_errors_are_typed(wa, graph) -> None:
    channel, _ = wa
    graph.fail("15550000047", fg.graph_error(131047, "Re-engagement message"))
    with pytest.raises(GraphError, match="24-hour customer-service window") as info:
        await channel.send(OutboundMessage(chat_id="15550000047", text="late"))
    assert info.value.code == 131047
    graph.fail("15550000429", fg.graph_error(130429, "Rate limit hit", 400))
    with pytest.raises(ChannelRateLimited):
        await channel.send(OutboundMessage(chat_id="15550000429", text="fast"))
    graph.fail("15550000500", fg.Reply(status=503, body="upstream down"))
    with pytest.raises(ChannelTransientError):
        await channel.send(OutboundMessage(chat_id="15550000500", text="x"))
    assert fg.ACCESS_TOKEN not in str(info.value)


async def test_media_reactions_and_typing(wa, graph, tmp_path) -> None:
    channel, _ = wa
    pdf = tmp_path / "report.pdf"
    pdf.write_bytes(b"%PDF-1.7 test")
    attachment = Attachment(
        kind="document",
        path=pdf,
        mime_type="application/pdf",
        filename="report.pdf",
        caption="the report",
    )
    await channel.send(OutboundMessage(chat_id=fg.OWNER, attachments=[attachment]))
    (upload,) = graph.uploads
    assert upload["filename"] == "report.pdf" and upload["has_product"]
    (sent,) = graph.messages
    assert sent["type"] == "document"
    assert sent["document"] == {
        "id": upload["id"],
        "caption": "the report",
        "filename": "report.pdf",
    }
    await channel.react(fg.OWNER, "wamid.X", "🎉")
    assert graph.messages[-1]["reaction"] == {"message_id": "wamid.X", "emoji": "🎉"}
    # Typing rides on a read receipt for the chat's last inbound message.
    await channel.typing(fg.OWNER)  # no inbound yet: nothing to attach it to
    assert len(graph.messages) == 2
    body = fg.delivery(fg.value([fg.text_message(fg.OWNER, "hi", "wamid.T1")]))
    await channel.handle_webhook(post(body))
    await channel.typing(fg.OWNER)
    assert graph.messages[-1] == {
        "messaging_product": "whatsapp",
        "status": "read",
        "message_id": "wamid.T1",
        "typing_indicator": {"type": "text"},
    }


async def test_missing_credentials_degrade_instead_of_crashing(graph) -> None:
    channel = WhatsAppChannel(whatsapp_config(graph, app_secret=None))
    async with StubChannelHost("whatsapp") as host:
        await channel.start(host)
        assert host.state == "degraded"
        assert "app_secret is not set" in host.reports[-1][1]
        body = fg.delivery(fg.value([fg.text_message(fg.OWNER, "hi", "wamid.C1")]))
        assert (await channel.handle_webhook(post(body))).status == 503
        with pytest.raises(ChannelTransientError):
            await channel.send(OutboundMessage(chat_id=fg.OWNER, text="x"))
        await channel.stop()


async def test_a_voice_note_over_the_gateways_cap_is_handed_over_unfetched(wa, graph) -> None:
    channel, host = wa
    host.inbound_caps["audio"] = 1024  # the transcription cap, as the runtime reports it
    graph.add_media("VOICE1", b"OggS" * 1000, "audio/ogg; codecs=opus")
    graph.add_media("VOICE2", b"OggS small", "audio/ogg; codecs=opus")
    body = fg.delivery(
        fg.value(
            [
                fg.media_message(fg.OWNER, "audio", "VOICE1", "wamid.V1", voice=True),
                fg.media_message(fg.OWNER, "audio", "VOICE2", "wamid.V2", voice=True),
            ]
        )
    )
    assert (await channel.handle_webhook(post(body))).status == 200
    big, small = host.deliveries
    (withheld,) = big.attachments
    assert withheld.kind == "audio" and withheld.withheld and withheld.size == 4000
    assert small.attachments[0].data == b"OggS small"
    assert graph.downloads == ["VOICE2"]  # the oversized voice note was never fetched
