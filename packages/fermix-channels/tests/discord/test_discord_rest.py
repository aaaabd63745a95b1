"""Outbound over the loopback REST: sends, splits, media, edits, reactions, typing, and the
per-route and global rate limits."""

from __future__ import annotations

import pytest
from fermix_channels.discord.adapter import MEDIA_CAP
from fermix_channels.discord.rest import DiscordRest, route_key
from fermix_core.channel import (
    Attachment,
    AttachmentKind,
    ChannelError,
    ChannelRateLimited,
    OutboundMessage,
)

from .conftest import fd

pytestmark = pytest.mark.anyio


def test_route_keys_keep_the_major_id_and_shape_the_rest() -> None:
    assert route_key("POST", "/channels/123456789/messages") == (
        "POST /channels/{channels}/messages",
        "123456789",
    )
    assert route_key("PATCH", "/channels/1234567/messages/98765432") == (
        "PATCH /channels/{channels}/messages/{id}",
        "1234567",
    )
    assert route_key("PUT", "/channels/1234567/messages/98765432/reactions/%F0%9F%91%8D/@me")[
        0
    ] == ("PUT /channels/{channels}/messages/{id}/reactions/{emoji}/@me")
    assert route_key("POST", "/interactions/1234567/tok-en/callback")[0] == (
        "POST /interactions/{id}/{token}/callback"
    )


async def test_a_reply_is_markdown_passed_through_with_previews_and_pings_off(
    running, fake
) -> None:
    async with running() as (channel, _):
        sent = await channel.send(
            OutboundMessage(
                chat_id=fd.DM_CHANNEL, text="**bold** and `code` https://x.test", reply_to="77777"
            )
        )
    (message,) = fake.sent(fd.DM_CHANNEL)
    assert message["content"] == "**bold** and `code` https://x.test"
    assert sent.message_id == f"{fd.DM_CHANNEL}:{message['id']}"
    assert message["flags"] & (1 << 2)  # SUPPRESS_EMBEDS: no link preview
    assert message["_allowed_mentions"]["parse"] == []  # never @everyone or a role
    assert message["message_reference"] == {
        "channel_id": fd.DM_CHANNEL,
        "message_id": "77777",
        "fail_if_not_exists": False,
    }


async def test_a_silent_send_suppresses_the_notification(running, fake) -> None:
    async with running() as (channel, _):
        await channel.send(OutboundMessage(chat_id=fd.DM_CHANNEL, text="quiet", silent=True))
    assert fake.sent(fd.DM_CHANNEL)[0]["flags"] & (1 << 12)


async def test_text_over_2000_chars_is_split_never_refused(running, fake) -> None:
    text = ("word " * 900).strip()  # 4,499 characters
    async with running() as (channel, _):
        await channel.send(OutboundMessage(chat_id=fd.DM_CHANNEL, text=text))
    contents = fake.texts(fd.DM_CHANNEL)
    assert len(contents) == 3 and all(len(c) <= 2000 for c in contents)
    assert " ".join(contents).split() == text.split()


async def test_a_thread_reply_goes_to_the_thread(running, fake) -> None:
    async with running() as (channel, _):
        await channel.send(
            OutboundMessage(chat_id=fd.GUILD_CHANNEL, thread_id=fd.THREAD_ID, text="in thread")
        )
        await channel.typing(fd.GUILD_CHANNEL, fd.THREAD_ID)
    assert fake.texts(fd.THREAD_ID) == ["in thread"] and not fake.sent(fd.GUILD_CHANNEL)
    assert fake.typing == [fd.THREAD_ID]


async def test_media_is_multipart_with_payload_json(running, fake, tmp_path) -> None:
    path = tmp_path / "report.pdf"
    path.write_bytes(b"%PDF-1.7 test")
    async with running() as (channel, _):
        await channel.send(
            OutboundMessage(
                chat_id=fd.DM_CHANNEL,
                attachments=[
                    Attachment(kind=AttachmentKind.DOCUMENT, path=path, caption="the report"),
                    Attachment(
                        kind=AttachmentKind.IMAGE,
                        data=b"\x89PNG fake",
                        filename="a.png",
                        mime_type="image/png",
                    ),
                ],
            )
        )
    (message,) = fake.sent(fd.DM_CHANNEL)
    assert message["content"] == "the report"
    assert message["_files"] == [("report.pdf", b"%PDF-1.7 test"), ("a.png", b"\x89PNG fake")]


async def test_media_over_10_mb_is_refused_with_what_to_do(running, fake) -> None:
    big = Attachment(kind=AttachmentKind.VIDEO, data=b"\0" * (MEDIA_CAP + 1), filename="clip.mp4")
    async with running() as (channel, host):
        with pytest.raises(ChannelError, match=r"up to 10 MB.*clip\.mp4.*send a link"):
            await channel.send(OutboundMessage(chat_id=fd.DM_CHANNEL, attachments=[big]))
        # Through the outbound port (how replies reach the adapter) the refusal is one
        # channel.media_send_error, emitted by the port for every channel alike.
        from fermix_core.channels.outbound import OutboundPort
        from fermix_core.gateway.reply import features_of

        events: list[tuple[str, dict]] = []
        port = OutboundPort(
            channel, features_of(channel), emit=lambda name, **data: events.append((name, data))
        )
        with pytest.raises(ChannelError, match=r"clip\.mp4"):
            await port.send(OutboundMessage(chat_id=fd.DM_CHANNEL, attachments=[big]))
    assert not fake.sent(fd.DM_CHANNEL)
    assert not [e for e in host.events if e[0] == "channel.media_send_error"]
    ((_, data),) = [e for e in events if e[0] == "channel.media_send_error"]
    assert data["kind"] == "video" and "clip.mp4" in data["error"]


async def test_edit_delete_react_and_typing(running, fake) -> None:
    async with running() as (channel, _):
        sent = await channel.send(OutboundMessage(chat_id=fd.DM_CHANNEL, text="draft"))
        await channel.edit(fd.DM_CHANNEL, sent.message_id, "draft, longer")
        await channel.react(fd.DM_CHANNEL, sent.message_id, "🧪")
        await channel.react(fd.DM_CHANNEL, sent.message_id, "👍🏽")
        await channel.react(fd.DM_CHANNEL, sent.message_id, "party:1234567890123")
        await channel.typing(fd.DM_CHANNEL)
        await channel.delete(fd.DM_CHANNEL, sent.message_id)
        await channel.delete(fd.DM_CHANNEL, sent.message_id)  # already gone: fine
    number = sent.message_id.split(":")[1]
    assert fake.edits[0][2]["content"] == "draft, longer"
    assert [r[2] for r in fake.reactions] == ["🧪", "👍🏽", "party:1234567890123"]
    assert fake.deletes == [(fd.DM_CHANNEL, number)]
    assert fake.typing == [fd.DM_CHANNEL]


async def test_a_429_on_a_bucket_is_typed_and_the_bucket_then_honoured(running, fake) -> None:
    async with running() as (channel, _):
        fake.rate_limit("POST /channels/", 0.3)
        with pytest.raises(ChannelRateLimited) as info:
            await channel.send(OutboundMessage(chat_id=fd.DM_CHANNEL, text="too fast"))
        assert info.value.retry_after == pytest.approx(0.3)
        # The next send waits for the bucket's reset instead of earning another 429.
        await channel.send(OutboundMessage(chat_id=fd.DM_CHANNEL, text="after the wait"))
    assert fake.texts(fd.DM_CHANNEL) == ["after the wait"]
    assert fake.rate_limited == 1 and fake.violations == 0


async def test_an_exhausted_bucket_is_waited_for_before_the_request(running, fake) -> None:
    async with running() as (channel, _):
        fake.exhaust("POST /channels/", 0.3)
        await channel.send(OutboundMessage(chat_id=fd.DM_CHANNEL, text="last slot"))
        await channel.send(OutboundMessage(chat_id=fd.DM_CHANNEL, text="waited"))
        # Another route's bucket is not held up by that one.
        await channel.typing(fd.DM_CHANNEL)
    assert fake.texts(fd.DM_CHANNEL) == ["last slot", "waited"]
    assert fake.rate_limited == 0 and fake.violations == 0


async def test_the_global_limit_stops_every_route(running, fake) -> None:
    async with running() as (channel, _):
        fake.rate_limit("POST /channels/", 0.3, global_=True)
        with pytest.raises(ChannelRateLimited, match="global"):
            await channel.send(OutboundMessage(chat_id=fd.DM_CHANNEL, text="x"))
        await channel.typing(fd.DM_CHANNEL)  # another route: waits for the global reset too
        await channel.send(OutboundMessage(chat_id=fd.DM_CHANNEL, text="y"))
    assert fake.violations == 0 and fake.typing == [fd.DM_CHANNEL]


async def test_a_long_wait_is_raised_not_slept(fake) -> None:
    import httpx

    async with httpx.AsyncClient() as http:
        rest = DiscordRest(fd.TOKEN, fake.api_base_url, http=http, max_wait=0.05)
        fake.rate_limit("POST /channels/", 30.0)
        with pytest.raises(ChannelRateLimited):
            await rest.create_message(fd.DM_CHANNEL, {"content": "a"})
        with pytest.raises(ChannelRateLimited) as info:
            await rest.create_message(fd.DM_CHANNEL, {"content": "b"})
    assert info.value.retry_after is not None and info.value.retry_after > 20
    assert fake.rate_limited == 1  # the second was refused locally, never sent


async def test_refusals_say_what_to_do(running, fake) -> None:
    async with running() as (channel, _):
        with pytest.raises(ChannelError, match="no longer exists"):
            await channel.edit(fd.DM_CHANNEL, f"{fd.DM_CHANNEL}:12345678", "x")
        with pytest.raises(ChannelError, match="not a Discord"):
            await channel.send(OutboundMessage(chat_id="not-a-channel", text="x"))
