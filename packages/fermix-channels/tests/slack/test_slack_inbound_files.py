"""Files on an inbound message: fetched with the bot token for allowed senders only, after
the duplicate check, capped, and typed by MIME."""

from __future__ import annotations

import json
import sys

import pytest
from fermix_channels.slack.adapter import MAX_INBOUND_FILE, WEBHOOK_PATH
from fermix_core.channel import AttachmentKind, DeliveryResult, WebhookRequest

pytestmark = pytest.mark.anyio

#: The loopback Slack helpers, loaded by conftest.py.
fs = sys.modules["fermix_channels_tests_fake_slack"]


def request(body: dict) -> WebhookRequest:
    raw = json.dumps(body).encode()
    return WebhookRequest("POST", WEBHOOK_PATH, {}, fs.sign(raw), raw)


async def test_an_allowed_senders_files_are_downloaded_and_typed(running, fake) -> None:
    photo = fake.private_file("cat.png", b"\x89PNG fake image", "image/png")
    memo = fake.private_file("memo.m4a", b"audio bytes", "audio/mp4")
    report = fake.private_file("report.pdf", b"%PDF-1.7", "application/pdf")
    body = fs.message_event("see these", subtype="file_share", files=[photo, memo, report])
    async with running() as (channel, host):
        assert (await channel.handle_webhook(request(body))).status == 200
    (message,) = host.deliveries
    assert message.text == "see these"
    assert [(a.kind, a.filename, a.mime_type, a.data) for a in message.attachments] == [
        (AttachmentKind.IMAGE, "cat.png", "image/png", b"\x89PNG fake image"),
        (AttachmentKind.AUDIO, "memo.m4a", "audio/mp4", b"audio bytes"),
        (AttachmentKind.DOCUMENT, "report.pdf", "application/pdf", b"%PDF-1.7"),
    ]


async def test_a_captionless_image_is_still_a_message(running, fake) -> None:
    photo = fake.private_file("only.jpg", b"jpeg", "image/jpeg")
    body = fs.message_event("", subtype="file_share", files=[photo])
    async with running() as (channel, host):
        await channel.handle_webhook(request(body))
    assert not host.deliveries[0].is_empty


async def test_a_strangers_files_are_never_downloaded(running, fake) -> None:
    photo = fake.private_file("bait.png", b"x", "image/png")
    body = fs.message_event("hi", user=fs.STRANGER_ID, subtype="file_share", files=[photo])
    async with running() as (channel, host):
        assert (await channel.handle_webhook(request(body))).status == 200
    assert host.results == [DeliveryResult.DROPPED]
    assert fake.downloads == []


async def test_a_retried_delivery_downloads_nothing_again(running, fake) -> None:
    photo = fake.private_file("once.png", b"x", "image/png")
    body = fs.message_event("pic", subtype="file_share", files=[photo])
    async with running() as (channel, host):
        await channel.handle_webhook(request(body))
        await channel.handle_webhook(request(body))
    assert host.results == [DeliveryResult.ACCEPTED, DeliveryResult.DUPLICATE]
    assert len(fake.downloads) == 1


async def test_an_oversized_file_is_named_not_fetched(running, fake) -> None:
    big = fake.private_file("huge.mov", b"x", "video/quicktime", size=MAX_INBOUND_FILE + 1)
    body = fs.message_event("watch", subtype="file_share", files=[big])
    async with running() as (channel, host):
        await channel.handle_webhook(request(body))
    message = host.deliveries[0]
    assert message.attachments == []
    assert "huge.mov is over 25 MB" in message.text
    assert fake.downloads == []


async def test_an_oversized_image_is_withheld_not_fetched(running, fake) -> None:
    big = fake.private_file("pano.jpg", b"x", "image/jpeg", size=MAX_INBOUND_FILE + 1)
    body = fs.message_event("look", subtype="file_share", files=[big])
    async with running() as (channel, host):
        await channel.handle_webhook(request(body))
    (attachment,) = host.deliveries[0].attachments
    assert attachment.withheld and attachment.filename == "pano.jpg"
    assert attachment.size == MAX_INBOUND_FILE + 1
    assert fake.downloads == []


async def test_a_file_larger_than_declared_is_cut_off(running, fake, monkeypatch) -> None:
    import fermix_channels.slack.adapter as adapter

    monkeypatch.setattr(adapter, "MAX_INBOUND_FILE", 1024)
    liar = fake.private_file("small.bin", b"x" * 4096, "application/octet-stream", size=10)
    body = fs.message_event("", subtype="file_share", files=[liar])
    async with running() as (channel, host):
        await channel.handle_webhook(request(body))
    message = host.deliveries[0]
    assert message.attachments == []
    assert "small.bin is over" in message.text


async def test_files_on_untrusted_hosts_and_without_urls_are_skipped(running, fake) -> None:
    evil = fake.private_file(
        "x.png", b"x", "image/png", url_private_download="https://attacker.example/x.png"
    )
    gone = {"id": "F0GONE", "name": "gone.txt", "mode": "tombstone"}
    body = fs.message_event("two", subtype="file_share", files=[evil, gone, "junk"])
    async with running() as (channel, host):
        await channel.handle_webhook(request(body))
    message = host.deliveries[0]
    assert message.attachments == []
    assert "x.png could not be fetched" in message.text
    assert "gone.txt is not available" in message.text


async def test_a_slack_outage_during_download_asks_for_a_retry(running, fake) -> None:
    from fermix_core.testing.loopback import Reply

    photo = fake.private_file("later.png", b"x", "image/png")
    body = fs.message_event("pic", subtype="file_share", files=[photo])
    original = fake.http.handler
    outage = [Reply(status=503, body="down")]

    async def handler(request):
        if request.path.startswith("/files-pri/") and outage:
            return outage.pop()
        return await original(request)

    fake.http.handler = handler
    async with running() as (channel, host):
        first = await channel.handle_webhook(request(body))
        second = await channel.handle_webhook(request(body))
    assert (first.status, second.status) == (503, 200)
    assert len(host.deliveries) == 1 and host.deliveries[0].attachments


async def test_audio_over_the_gateways_cap_is_handed_over_unfetched(running, fake) -> None:
    memo = fake.private_file("memo.m4a", b"a" * 4096, "audio/mp4")
    photo = fake.private_file("cat.png", b"\x89PNG", "image/png")
    body = fs.message_event("listen", subtype="file_share", files=[memo, photo])
    async with running() as (channel, host):
        host.inbound_caps["audio"] = 1024  # the transcription cap, as the runtime reports it
        await channel.handle_webhook(request(body))
    (message,) = host.deliveries
    withheld, image = message.attachments
    assert (withheld.kind, withheld.withheld, withheld.size) == (AttachmentKind.AUDIO, True, 4096)
    assert image.data == b"\x89PNG"
    assert len(fake.downloads) == 1  # only the image
