"""Inbound through the running adapter: server rules, threads, and attachments (downloaded
for an allowed sender only, capped, from Discord's CDN or the configured API host only)."""

from __future__ import annotations

import pytest
from fermix_channels.discord.adapter import MAX_INBOUND_FILE
from fermix_core.channel import AttachmentKind

from .conftest import fd

pytestmark = pytest.mark.anyio


async def test_server_rules_and_threads_through_the_gateway(running, fake) -> None:
    server = {"channel": fd.GUILD_CHANNEL, "guild": fd.GUILD_ID}
    async with running() as (_, host):
        await fake.message("chatter", **server)
        await fake.message("bot talk", sender=fd.OTHER_BOT_ID, bot=True, **server)
        await fake.message(f"<@{fd.BOT_ID}> hello", mentions=[fd.BOT_ID], **server)
        await fake.message("/help", channel=fd.THREAD_ID, guild=fd.GUILD_ID)
        await host.wait_for_deliveries(2, timeout=15)
    first, second = host.deliveries
    assert (first.text, first.chat_id, first.thread_id) == ("hello", fd.GUILD_CHANNEL, None)
    assert (second.chat_id, second.thread_id) == (fd.GUILD_CHANNEL, fd.THREAD_ID)


async def test_attachments_are_downloaded_for_an_allowed_sender(running, fake) -> None:
    picture = fake.add_file("cat.png", b"\x89PNG cat", "image/png")
    voice = fake.add_file("voice-message.ogg", b"OggS voice", "audio/ogg")
    async with running() as (_, host):
        await fake.message("look", attachments=[picture, voice])
        await host.wait_for_deliveries(1, timeout=15)
    (message,) = host.deliveries
    assert [(a.kind, a.mime_type, a.filename, a.size, a.data) for a in message.attachments] == [
        (AttachmentKind.IMAGE, "image/png", "cat.png", 8, b"\x89PNG cat"),
        (AttachmentKind.AUDIO, "audio/ogg", "voice-message.ogg", 10, b"OggS voice"),
    ]


async def test_a_stranger_costs_no_download_and_big_or_foreign_files_are_refused(
    running, fake
) -> None:
    picture = fake.add_file("cat.png", b"\x89PNG cat", "image/png")
    huge = {**fake.add_file("huge.bin", b"x", "application/octet-stream"),
            "size": MAX_INBOUND_FILE + 1}  # fmt: skip
    foreign = {**picture, "filename": "elsewhere.png",
               "url": "http://169.254.169.254/latest/meta-data"}  # fmt: skip
    async with running() as (_, host):
        await fake.message("mine?", sender=fd.STRANGER_ID, channel=fd.STRANGER_DM,
                           attachments=[picture])  # fmt: skip
        await fake.message("files", attachments=[huge, foreign])
        await host.wait_for_deliveries(2, timeout=15)
    stranger, owner = host.deliveries  # the stub host accepts; the gateway would drop
    assert not stranger.attachments
    assert fake.downloads == []  # neither the stranger's, the huge nor the foreign one
    assert not owner.attachments
    assert "huge.bin is over 25 MB" in owner.text
    assert "elsewhere.png is not on Discord's CDN" in owner.text


async def test_audio_over_the_gateways_cap_is_handed_over_unfetched(running, fake) -> None:
    big = {**fake.add_file("long.ogg", b"OggS long", "audio/ogg"), "size": 4096}
    small = fake.add_file("short.ogg", b"OggS short", "audio/ogg")
    async with running() as (_, host):
        host.inbound_caps["audio"] = 1024  # the transcription cap, as the runtime reports it
        await fake.message("listen", attachments=[big, small])
        await host.wait_for_deliveries(1, timeout=15)
    (message,) = host.deliveries
    held, fetched = message.attachments
    assert (held.kind, held.withheld, held.size) == (AttachmentKind.AUDIO, True, 4096)
    assert fetched.data == b"OggS short"
    assert len(fake.downloads) == 1  # only the short one
