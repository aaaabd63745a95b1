"""Replies through the Web API: mrkdwn and plain text, threads, unfurling off, edit,
delete, reactions and uploads (files_upload_v2's three steps against the fake)."""

from __future__ import annotations

import sys

import pytest
from fermix_channels.slack.adapter import REACTIONS, SlackChannel, shortcode
from fermix_channels.slack.client import MAX_UPLOAD_BYTES
from fermix_core.channel import (
    Attachment,
    AttachmentKind,
    ChannelCapabilityError,
    ChannelError,
    OutboundMessage,
)

pytestmark = pytest.mark.anyio

#: The loopback Slack helpers, loaded by conftest.py.
fs = sys.modules["fermix_channels_tests_fake_slack"]


def test_declared_abilities() -> None:
    channel = SlackChannel()
    assert (channel.supports_edit, channel.supports_delete, channel.supports_reactions) == (
        True,
        True,
        True,
    )
    assert channel.supports_typing is False
    assert channel.dialect == "slack"
    assert (channel.max_text, channel.text_measure) == (40_000, "chars")
    assert channel.media_caps["document"] == 100 * 1024 * 1024
    assert channel.reactions_allowed == REACTIONS
    assert channel.send_interval == 1.0
    assert all(shortcode(name) == name for name in REACTIONS)


async def test_mrkdwn_reply_in_a_thread_with_unfurling_off(running, fake) -> None:
    async with running() as (channel, _):
        sent = await channel.send(
            OutboundMessage(chat_id="C0CHAN001", thread_id="1760000000.000001", text="*bold*")
        )
    posted = fake.find("C0CHAN001", sent.message_id)
    assert posted.text == "*bold*"
    assert posted.thread_ts == "1760000000.000001"
    assert posted.mrkdwn is True
    assert (posted.unfurl_links, posted.unfurl_media) == (False, False)


async def test_plain_text_is_sent_with_mrkdwn_off_and_escaped(running, fake) -> None:
    async with running() as (channel, _):
        sent = await channel.send(OutboundMessage(chat_id="D1", text="a <b> & *c*", plain=True))
    posted = fake.find("D1", sent.message_id)
    assert posted.mrkdwn is False
    assert posted.text == "a &lt;b&gt; &amp; *c*"


async def test_edit_and_plain_edit(running, fake) -> None:
    async with running() as (channel, _):
        sent = await channel.send(OutboundMessage(chat_id="D1", text="draft"))
        await channel.edit("D1", sent.message_id, "*final*")
        posted = fake.find("D1", sent.message_id)
        assert posted.text == "*final*" and not posted.blocks
        long = "x" * 6500
        await channel.edit("D1", sent.message_id, long, plain=True)
    blocks = posted.blocks
    assert [b["text"]["type"] for b in blocks] == ["plain_text"] * 3
    assert "".join(b["text"]["text"] for b in blocks) == long
    assert posted.text == long


async def test_delete_is_idempotent(running, fake) -> None:
    async with running() as (channel, _):
        sent = await channel.send(OutboundMessage(chat_id="D1", text="status"))
        await channel.delete("D1", sent.message_id)
        await channel.delete("D1", sent.message_id)  # already gone: fine
    assert fake.find("D1", sent.message_id).deleted


@pytest.mark.parametrize(
    ("given", "name"),
    [("thumbsup", "thumbsup"), (":eyes:", "eyes"), ("👍", "thumbsup"), ("✅", "white_check_mark")],
)
async def test_reactions_take_shortcodes_and_known_emoji(running, fake, given, name) -> None:
    async with running() as (channel, _):
        sent = await channel.send(OutboundMessage(chat_id="D1", text="ok"))
        await channel.react("D1", sent.message_id, given)
        await channel.react("D1", sent.message_id, given)  # already_reacted is success
    assert fake.find("D1", sent.message_id).reactions == [name]


async def test_a_reaction_that_is_not_a_shortcode_is_refused_before_any_call(running, fake) -> None:
    async with running() as (channel, _):
        sent = await channel.send(OutboundMessage(chat_id="D1", text="ok"))
        with pytest.raises(ChannelError, match="shortcode"):
            await channel.react("D1", sent.message_id, "🦜 party")
    assert fake.calls_of("reactions.add") == []


async def test_typing_is_not_available_to_bots(running) -> None:
    async with running() as (channel, _):
        with pytest.raises(ChannelCapabilityError):
            await channel.typing("D1")


async def test_a_file_upload_with_caption_in_a_thread(running, fake, tmp_path) -> None:
    path = tmp_path / "notes.md"
    path.write_bytes(b"# notes\n" * 100)
    async with running() as (channel, _):
        sent = await channel.send(
            OutboundMessage(
                chat_id="C0CHAN001",
                thread_id="1760000000.000009",
                attachments=[
                    Attachment(kind=AttachmentKind.DOCUMENT, path=path, caption="the notes")
                ],
            )
        )
    assert sent.message_id.startswith("file:")
    file = fake.files[sent.message_id.removeprefix("file:")]
    assert file.data == path.read_bytes() and file.length == len(file.data)
    assert (file.filename, file.channel, file.thread_ts) == (
        "notes.md",
        "C0CHAN001",
        "1760000000.000009",
    )
    assert file.initial_comment == "the notes"
    methods = [name for name, _ in fake.calls]
    assert methods.index("files.getUploadURLExternal") < methods.index(
        "files.completeUploadExternal"
    )


async def test_text_and_media_post_the_text_first(running, fake) -> None:
    image = Attachment(kind=AttachmentKind.IMAGE, data=b"\x89PNG...", filename="a.png")
    async with running() as (channel, _):
        sent = await channel.send(OutboundMessage(chat_id="D1", text="here", attachments=[image]))
        await channel.delete("D1", sent.message_id)
    assert fake.find("D1", sent.message_id).text == "here"
    assert [f.filename for f in fake.files.values()] == ["a.png"]


async def test_an_uploaded_file_can_be_deleted(running, fake) -> None:
    doc = Attachment(kind=AttachmentKind.DOCUMENT, data=b"x", filename="x.txt")
    async with running() as (channel, _):
        sent = await channel.send(OutboundMessage(chat_id="D1", attachments=[doc]))
        await channel.delete("D1", sent.message_id)
        with pytest.raises(ChannelError):
            await channel.edit("D1", sent.message_id, "no")
    assert fake.files[sent.message_id.removeprefix("file:")].deleted


async def test_a_file_over_100_mb_is_refused_before_upload(running, fake) -> None:
    big = Attachment(
        kind=AttachmentKind.VIDEO, data=b"x", filename="big.mp4", size=MAX_UPLOAD_BYTES + 1
    )
    async with running() as (channel, _):
        with pytest.raises(ChannelError, match="100 MB"):
            await channel.send(OutboundMessage(chat_id="D1", attachments=[big]))
    assert fake.calls_of("files.getUploadURLExternal") == []


async def test_send_before_start_is_a_clear_error() -> None:
    with pytest.raises(ChannelError, match="not running"):
        await SlackChannel().send(OutboundMessage(chat_id="D1", text="hi"))


# --------------------------------------------------------------------------- start


async def test_start_without_a_bot_token_names_the_key_and_env(fake, config_for) -> None:
    from fermix_core.testing import StubChannelHost

    channel = SlackChannel(config=config_for(bot_token=None))
    async with StubChannelHost("slack") as host:
        with pytest.raises(ChannelError, match=r"bot_token.*SLACK_BOT_TOKEN"):
            await channel.start(host)
    await channel.stop()


async def test_events_mode_needs_the_signing_secret(fake, config_for) -> None:
    from fermix_core.testing import StubChannelHost

    channel = SlackChannel(config=config_for(signing_secret=None))
    async with StubChannelHost("slack") as host:
        with pytest.raises(ChannelError, match="signing_secret"):
            await channel.start(host)


async def test_socket_mode_needs_an_app_level_token(fake, config_for) -> None:
    from fermix_core.testing import StubChannelHost

    for token, match in ((None, "app_token"), (fs.BOT_TOKEN, "xapp-")):
        channel = SlackChannel(config=config_for(mode="socket", app_token=token))
        async with StubChannelHost("slack") as host:
            with pytest.raises(ChannelError, match=match):
                await channel.start(host)


async def test_a_configured_bot_user_id_skips_auth_test(running, fake) -> None:
    async with running(bot_user_id="UCONFIGURED") as (channel, _):
        assert channel.bot_user_id == "UCONFIGURED"
    assert fake.calls_of("auth.test") == []


async def test_a_revoked_token_fails_start_with_the_fix(fake, config_for) -> None:
    from fermix_core.testing import StubChannelHost

    channel = SlackChannel(config=config_for(bot_token="xoxb-revoked"))
    async with StubChannelHost("slack") as host:
        with pytest.raises(ChannelError, match="invalid_auth"):
            await channel.start(host)
    await channel.stop()


async def test_secrets_from_an_env_reference_are_resolved(fake, config_for, monkeypatch) -> None:
    from fermix_core.testing import StubChannelHost

    monkeypatch.setenv("WORK_SLACK_BOT", fs.BOT_TOKEN)
    config = config_for(bot_token={"source": "env", "env": "WORK_SLACK_BOT"})
    channel = SlackChannel(config=config)
    async with StubChannelHost("slack") as host:
        await channel.start(host)
        sent = await channel.send(OutboundMessage(chat_id="D1", text="resolved"))
        await channel.stop()
    assert fake.find("D1", sent.message_id).text == "resolved"
