"""The Telegram adapter against the loopback Bot API: polling, offsets, health, sends."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest
from fermix_channels.telegram.adapter import (
    ALLOWED_UPDATES,
    MAX_INBOUND_FILE,
    OFFSET_FILE,
    TelegramChannel,
)
from fermix_core.channel import (
    Attachment,
    AttachmentKind,
    ChannelError,
    ChannelFormatError,
    ChannelRateLimited,
    ChannelTransientError,
    OutboundMessage,
)
from fermix_core.home import FermixHome
from fermix_core.testing import StubChannelHost

from .conftest import ft, telegram_config

pytestmark = pytest.mark.anyio

OWNER = ft.OWNER_ID


async def test_start_reads_the_bot_and_polls_only_handled_updates(fake, running) -> None:
    async with running() as (channel, host):
        await fake.wait_polling()
        assert channel.bot_id == ft.BOT_ID
        assert channel.bot_username == ft.BOT_USERNAME
        assert host.state == "ready"
    assert fake.last_allowed_updates == ALLOWED_UPDATES
    assert fake.calls_to("getMe") and fake.calls_to("getWebhookInfo")


async def test_private_message_is_delivered(fake, running) -> None:
    async with running() as (_, host):
        fake.message("hello there")
        await host.wait_for_deliveries(1)
    message = host.deliveries[0]
    assert (message.chat_id, message.sender_id, message.text) == (
        str(OWNER),
        str(OWNER),
        "hello there",
    )
    assert message.sender_name == "Ada Lovelace"


async def test_group_rules_and_bots(fake, running) -> None:
    async with running() as (_, host):
        fake.message("chatter", chat_id=ft.GROUP_ID)
        fake.message("a bot talking", sender=999, sender_is_bot=True)
        fake.message(f"@{ft.BOT_USERNAME} hi", chat_id=ft.GROUP_ID)
        fake.message(
            f"@{ft.BOT_USERNAME} topic",
            chat_id=ft.GROUP_ID,
            message_thread_id=33,
            is_topic_message=True,
        )
        await host.wait_for_deliveries(2)
        last = fake.updates[-1]["update_id"] if fake.updates else 0
        await fake.wait_confirmed(last + 1)
    texts = [m.text for m in host.deliveries]
    assert texts == [f"@{ft.BOT_USERNAME} hi", f"@{ft.BOT_USERNAME} topic"]
    assert host.deliveries[0].is_group and host.deliveries[1].thread_id == "33"


async def test_offset_survives_a_restart_without_replay_or_loss(fake, tmp_path) -> None:
    home = FermixHome(tmp_path / "home")
    config = telegram_config(fake)
    first = fake.message("one")
    fake.message("two")
    async with StubChannelHost("telegram", config=config, home=home) as host:
        channel = TelegramChannel(config, jitter=lambda: 0.0)
        await channel.start(host)
        await host.wait_for_deliveries(2)
        await fake.wait_polling(2)  # the batch was handled and the next poll is waiting
        await channel.stop()
    saved = json.loads((home.path / OFFSET_FILE).read_text())
    assert saved == {"bot_id": ft.BOT_ID, "offset": first["update_id"] + 2}
    fake.message("three")  # arrives while the daemon is down
    # A fresh host has an empty in-memory seen set: only the durable offset prevents replay.
    async with StubChannelHost("telegram", config=config, home=home) as host2:
        channel2 = TelegramChannel(config, jitter=lambda: 0.0)
        await channel2.start(host2)
        await host2.wait_for_deliveries(1)
        await fake.wait_confirmed(first["update_id"] + 3)
        await channel2.stop()
    assert [m.text for m in host2.deliveries] == ["three"]


async def test_a_failed_hand_off_is_fetched_again(fake, running) -> None:
    async with running() as (_, host):
        host.unavailable = True
        update = fake.message("retry me")
        await fake.until(lambda: fake.polls >= 2)
        assert fake.confirmed_offset <= update["update_id"]
        host.unavailable = False
        await host.wait_for_deliveries(1)
    assert host.deliveries[0].text == "retry me"


async def test_second_poller_conflict_is_reported(fake, running) -> None:
    fake.fail(
        "getUpdates",
        409,
        "Conflict: terminated by other getUpdates request; make sure that only one bot "
        "instance is running",
    )
    async with running(poll_timeout=1) as (_, host):
        await fake.until(lambda: host.state == "degraded")
        assert "another program is polling this bot token" in host.reports[-1][1]
        await fake.until(lambda: host.state == "ready")  # the other poller went away
        fake.message("back")
        await host.wait_for_deliveries(1)


async def test_a_real_concurrent_poller_gets_409(fake, running) -> None:
    async with running() as (_, host):
        await fake.wait_polling()
        # Another program polls the same token: Telegram ends our waiting poll with 409.
        other = TelegramChannel(telegram_config(fake))
        from fermix_channels.telegram.client import TelegramApi, TelegramConflict

        async with StubChannelHost("telegram") as other_host:
            api = TelegramApi(ft.TOKEN, fake.url, http=other_host.http)
            with anyio.move_on_after(0.5):
                await api.get_updates(None, timeout=1, allowed_updates=ALLOWED_UPDATES)
        await fake.until(lambda: any(s == "degraded" for s, _ in host.reports))
        assert other.name == "telegram"
        assert issubclass(TelegramConflict, ChannelError)


async def test_webhook_set_is_reported_and_recovers(fake, running) -> None:
    fake.set_webhook("https://example.invalid/hook")
    async with running(poll_timeout=1) as (_, host):
        assert host.state == "degraded"
        assert "webhook" in host.reports[-1][1]
        assert "deleteWebhook" in host.reports[-1][1]
        fake.set_webhook("")
        await fake.until(lambda: host.state == "ready")
        fake.message("after webhook")
        await host.wait_for_deliveries(1)


async def test_network_errors_back_off_and_recover(fake, running) -> None:
    fake.fail("getUpdates", 502, "Bad Gateway")
    async with running() as (_, host):
        await fake.until(lambda: any(s == "degraded" for s, _ in host.reports))
        fake.message("ok now")
        await host.wait_for_deliveries(1)
        assert host.state == "ready"


async def test_token_never_from_environment(fake, monkeypatch) -> None:
    monkeypatch.setenv("TELEGRAM_BOT_TOKEN", ft.TOKEN)
    config = telegram_config(fake, bot_token=None)
    channel = TelegramChannel(config)
    async with StubChannelHost("telegram", config=config) as host:
        with pytest.raises(ChannelError, match="TELEGRAM_BOT_TOKEN is deliberately not read"):
            await channel.start(host)
    assert not fake.calls


async def test_media_downloaded_for_the_owner(fake, running) -> None:
    file_id = fake.add_file(b"\x89PNG-data", path="photos/file_1.jpg")
    async with running() as (_, host):
        fake.message(
            None,
            caption="see",
            photo=[{"file_id": file_id, "width": 10, "height": 10, "file_size": 9}],
        )
        await host.wait_for_deliveries(1)
    (attachment,) = host.deliveries[0].attachments
    assert attachment.kind is AttachmentKind.IMAGE and attachment.data == b"\x89PNG-data"
    assert host.deliveries[0].text == "see"


async def test_stranger_media_is_never_downloaded(fake, running) -> None:
    file_id = fake.add_file(b"secret", path="documents/x.bin")
    async with running() as (_, host):
        host.drop_senders = {str(ft.STRANGER_ID)}
        fake.message(None, sender=ft.STRANGER_ID, document={"file_id": file_id, "file_size": 6})
        update = fake.updates[-1]
        await fake.wait_confirmed(update["update_id"] + 1)
    assert not fake.calls_to("getFile") and not fake.downloads
    assert not host.deliveries


async def test_oversized_media_is_refused_before_download(fake, running) -> None:
    async with running() as (_, host):
        fake.message(
            "big",
            document={"file_id": "NOPE", "file_size": MAX_INBOUND_FILE + 1, "file_name": "a.iso"},
        )
        await host.wait_for_deliveries(1)
    assert not fake.calls_to("getFile")
    assert "a.iso is over 20 MB" in host.deliveries[0].text


async def test_audio_over_the_gateways_cap_is_handed_over_unfetched(fake, running) -> None:
    big = fake.add_file(b"OggS" * 1000, path="voice/big.oga")
    # Declared small but larger when getFile answers: caught there, still not downloaded.
    liar = fake.add_file(b"OggS" * 600, path="voice/liar.oga")
    note = fake.add_file(b"\x00\x00\x00\x20ftypisom", path="video_notes/n.mp4")
    async with running() as (_, host):
        host.inbound_caps["audio"] = 2048  # the transcription cap, as the runtime reports it
        fake.message(None, voice={"file_id": big, "file_size": 4000, "mime_type": "audio/ogg"})
        fake.message(None, voice={"file_id": liar, "mime_type": "audio/ogg"})
        fake.message(None, video_note={"file_id": note, "file_size": 12, "length": 240})
        await host.wait_for_deliveries(3)
    first, second, third = (m.attachments[0] for m in host.deliveries)
    assert (first.kind, first.withheld, first.size) == (AttachmentKind.AUDIO, True, 4000)
    assert (second.withheld, second.size) == (True, 2400)
    assert third.kind is AttachmentKind.AUDIO and third.mime_type == "video/mp4"
    assert third.data == b"\x00\x00\x00\x20ftypisom"
    assert [c.params["file_id"] for c in fake.calls_to("getFile")] == [liar, note]
    assert fake.downloads == ["video_notes/n.mp4"]


async def test_an_oversized_photo_is_withheld_for_the_gateway_to_refuse(fake, running) -> None:
    size = MAX_INBOUND_FILE + 1
    async with running() as (_, host):
        fake.message(
            None, photo=[{"file_id": "BIG", "width": 9000, "height": 9000, "file_size": size}]
        )
        await host.wait_for_deliveries(1)
    assert not fake.calls_to("getFile")
    (message,) = host.deliveries
    (attachment,) = message.attachments
    assert attachment.withheld and attachment.kind == "image" and attachment.size == size
    assert message.text == ""  # no note: the gateway answers the sender naming the cap


async def test_a_photo_larger_than_declared_is_withheld_too(fake, running, monkeypatch) -> None:
    import fermix_channels.telegram.adapter as adapter

    monkeypatch.setattr(adapter, "MAX_INBOUND_FILE", 1024)
    # Declared small, but getFile reports the real (larger) size: never downloaded.
    file_id = fake.add_file(b"\xff\xd8" * 2048, path="photos/liar.jpg")
    async with running() as (_, host):
        fake.message(None, photo=[{"file_id": file_id, "width": 9, "height": 9, "file_size": 10}])
        await host.wait_for_deliveries(1)
    (attachment,) = host.deliveries[0].attachments
    assert isinstance(attachment, Attachment)
    assert attachment.withheld and attachment.kind == "image"
    assert not fake.downloads


async def test_send_html_silent_thread_reply(fake, running) -> None:
    inbound = fake.message("q")["message"]
    async with running() as (channel, _):
        sent = await channel.send(
            OutboundMessage(
                chat_id=str(OWNER),
                text="<b>bold</b> answer",
                silent=True,
                reply_to=f"{OWNER}:{inbound['message_id']}",
            )
        )
    call = fake.calls_to("sendMessage")[-1]
    assert call.params["parse_mode"] == "HTML"
    assert call.params["link_preview_options"] == {"is_disabled": True}
    assert call.params["disable_notification"] is True
    assert call.params["reply_parameters"]["message_id"] == inbound["message_id"]
    assert sent.message_id.startswith(f"{OWNER}:")


async def test_plain_send_has_no_parse_mode(fake, running) -> None:
    async with running() as (channel, _):
        await channel.send(OutboundMessage(chat_id=str(OWNER), text="<b>x", plain=True))
    assert "parse_mode" not in fake.calls_to("sendMessage")[-1].params
    assert fake.sent(OWNER)[-1]["text"] == "<b>x"


async def test_bad_html_is_a_format_error(fake, running) -> None:
    async with running() as (channel, _):
        with pytest.raises(ChannelFormatError):
            await channel.send(OutboundMessage(chat_id=str(OWNER), text="<b>unclosed"))


async def test_flood_control_and_server_errors_are_typed(fake, running) -> None:
    fake.fail("sendMessage", 429, "Too Many Requests: retry after 7", retry_after=7)
    fake.fail("sendMessage", 500, "Internal Server Error")
    async with running() as (channel, _):
        with pytest.raises(ChannelRateLimited) as limited:
            await channel.send(OutboundMessage(chat_id=str(OWNER), text="a"))
        assert limited.value.retry_after == 7
        with pytest.raises(ChannelTransientError):
            await channel.send(OutboundMessage(chat_id=str(OWNER), text="a"))


async def test_outbound_port_plain_fallback_and_retry_after(fake, running) -> None:
    """Through the core's reply port: a 429 waits retry_after, a parse error resends plain."""
    fake.fail("sendMessage", 429, "Too Many Requests: retry after 0", retry_after=0)
    fake.fail("sendMessage", 400, "Bad Request: can't parse entities: broken")
    async with running() as (channel, _):
        port = _port(channel)
        await port.send(OutboundMessage(chat_id=str(OWNER), text="**hi** there"))
    calls = fake.calls_to("sendMessage")
    assert len(calls) == 3
    assert calls[1].params.get("parse_mode") == "HTML"
    assert "parse_mode" not in calls[2].params
    assert fake.sent(OWNER)[-1]["text"] == "hi there"


async def test_media_caps_and_methods(fake, running) -> None:
    async with running() as (channel, _):
        await channel.send(
            OutboundMessage(
                chat_id=str(OWNER),
                attachments=[
                    Attachment(kind=AttachmentKind.IMAGE, data=b"img", filename="a.jpg"),
                    Attachment(kind=AttachmentKind.DOCUMENT, data=b"doc", filename="a.txt"),
                    Attachment(
                        kind=AttachmentKind.AUDIO,
                        data=b"ogg",
                        filename="v.ogg",
                        mime_type="audio/ogg",
                        caption="listen",
                    ),
                ],
            )
        )
        with pytest.raises(ChannelError, match="up to 10 MB"):
            await channel.send(
                OutboundMessage(
                    chat_id=str(OWNER),
                    attachments=[
                        Attachment(kind=AttachmentKind.IMAGE, data=b"x" * (10 * 1024 * 1024 + 1))
                    ],
                )
            )
    assert [c.method for c in fake.calls if c.method.startswith("send")] == [
        "sendPhoto",
        "sendDocument",
        "sendVoice",
    ]
    voice = fake.calls_to("sendVoice")[0]
    assert voice.content_type.startswith("multipart/form-data")
    assert voice.files["voice"] == ("v.ogg", b"ogg") and voice.params["caption"] == "listen"
    assert channel.media_caps["voice"] == 1024 * 1024


async def test_edit_delete_react_typing(fake, running) -> None:
    async with running() as (channel, _):
        sent = await channel.send(OutboundMessage(chat_id=str(OWNER), text="draft"))
        await channel.edit(str(OWNER), sent.message_id, "draft, longer")
        await channel.edit(str(OWNER), sent.message_id, "draft, longer")  # not modified: fine
        await channel.react(str(OWNER), sent.message_id, "👍")
        await channel.react(str(OWNER), sent.message_id, "❤️")  # variation selector form
        with pytest.raises(ChannelError, match="fixed reaction set"):
            await channel.react(str(OWNER), sent.message_id, "🦖")
        await channel.typing(str(OWNER))
        await channel.delete(str(OWNER), sent.message_id)
        await channel.delete(str(OWNER), sent.message_id)  # already gone: fine
    assert [r[2][0]["emoji"] for r in fake.reactions] == ["👍", "❤"]
    assert fake.actions[0]["action"] == "typing"
    assert len(fake.calls_to("editMessageText")) == 2
    assert not fake.sent(OWNER)


async def test_draft_streaming_edits_through_the_port(fake, running) -> None:
    async with running() as (channel, _):
        port = _port(channel)
        sent = await port.send(OutboundMessage(chat_id=str(OWNER), text="Partial *answer*"))
        await port.edit(str(OWNER), sent.message_id, "Partial *answer*, now complete.")
    (message,) = fake.sent(OWNER)
    assert fake.sent_html(OWNER) == ["Partial <i>answer</i>, now complete."]
    # As Telegram stores it: markup parsed into entities with UTF-16 offsets.
    assert message["text"] == "Partial answer, now complete."
    assert message["entities"] == [{"type": "italic", "offset": 8, "length": 6}]


def _port(channel: TelegramChannel) -> Any:
    from fermix_core.channels.outbound import OutboundPort
    from fermix_core.gateway.reply import features_of

    return OutboundPort(channel, features_of(channel, reactions=channel.reactions_allowed))


def _proposal(token: str = "ABCD2345") -> Any:  # noqa: S107 - a confirmation code
    from pathlib import Path

    from fermix_core.sandbox.grants import Proposal

    return Proposal(token, Path("/srv/data"), "read the logs", "+ /srv/data")


async def test_approval_button_private_and_group(fake, running) -> None:
    async with running() as (channel, _):
        port = _port(channel)
        await port.approval(str(OWNER), None, _proposal())
        await port.approval(str(ft.GROUP_ID), "5", _proposal("WXYZ6789"))
    private, group = fake.calls_to("sendMessage")
    button = private.params["reply_markup"]["inline_keyboard"][0][0]
    assert button == {"text": "Approve", "callback_data": "fx-confirm:ABCD2345"}
    assert "/confirm ABCD2345" in private.params["text"]
    assert "WXYZ6789" not in group.params["text"]
    assert "button below" in group.params["text"]
    assert group.params["message_thread_id"] == 5


async def test_approval_tap_owner_confirms_non_owner_refused(fake, running) -> None:
    async with running() as (channel, host):
        await channel.send_approval(str(ft.GROUP_ID), None, _proposal())
        (prompt,) = fake.sent(ft.GROUP_ID)
        fake.tap("fx-confirm:ABCD2345", sender=ft.GUEST_ID, on=prompt)
        await fake.wait_call("answerCallbackQuery")
        assert fake.callback_answers[0]["text"] == "not authorized"
        assert not host.deliveries  # refused before the token reaches /confirm
        fake.tap("fx-confirm:ABCD2345", sender=OWNER, on=prompt)
        await host.wait_for_deliveries(1)
        await fake.wait_call("answerCallbackQuery", 2)
    confirm = host.deliveries[0]
    assert confirm.text == "/confirm ABCD2345"
    assert confirm.sender_id == str(OWNER) and confirm.chat_id == str(ft.GROUP_ID)
    assert confirm.is_group
    assert fake.callback_answers[1]["text"] == "Approving…"
