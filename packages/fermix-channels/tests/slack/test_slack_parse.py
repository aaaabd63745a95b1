"""Events API payloads into InboundMessage: what is a turn, what is ignored, what is malformed."""

from __future__ import annotations

import json
import sys

import pytest
from fermix_channels.slack.parse import MalformedPayload, Skip, classify, parse_body, to_inbound
from fermix_core.channel import InboundMessage

#: The loopback Slack helpers, loaded by conftest.py.
fs = sys.modules["fermix_channels_tests_fake_slack"]


def inbound(callback: dict, *, bot: str | None = fs.BOT_USER_ID) -> InboundMessage | Skip:
    return to_inbound(callback, channel_name="slack", bot_user_id=bot)


def test_a_direct_message_is_normalized() -> None:
    callback = fs.message_event("hello there", channel="D0DM00001", ts="1760000001.000100")
    message = inbound(callback)
    assert isinstance(message, InboundMessage)
    assert message.channel == "slack"
    assert message.chat_id == "D0DM00001"
    assert message.sender_id == fs.OWNER_ID
    assert message.text == "hello there"
    assert message.thread_id is None
    assert message.is_group is False
    assert message.message_id == "D0DM00001:1760000001.000100"


def test_thread_ts_is_the_thread_key() -> None:
    callback = fs.message_event("in a thread", thread_ts="1760000000.000001")
    message = inbound(callback)
    assert isinstance(message, InboundMessage)
    assert message.thread_id == "1760000000.000001"
    assert message.conversation_key == ("slack", message.chat_id, "1760000000.000001")


def test_an_app_mention_in_a_channel_is_addressed_and_the_mention_is_stripped() -> None:
    callback = fs.message_event(
        f"<@{fs.BOT_USER_ID}> /new please", channel="C0CHAN001", event_type="app_mention"
    )
    message = inbound(callback)
    assert isinstance(message, InboundMessage)
    assert message.is_group is True
    assert message.text == "/new please"


def test_a_channel_message_mentioning_the_bot_is_addressed() -> None:
    callback = fs.message_event(
        f"hey <@{fs.BOT_USER_ID}|fermix> what is up", channel="C0CHAN001", channel_type="channel"
    )
    message = inbound(callback)
    assert isinstance(message, InboundMessage)
    assert message.text == "hey what is up"


def test_the_mention_and_message_events_of_one_post_share_the_platform_id() -> None:
    ts = "1760000002.000200"
    text = f"<@{fs.BOT_USER_ID}> hi"
    mention = inbound(fs.message_event(text, channel="C1", event_type="app_mention", ts=ts))
    message = inbound(fs.message_event(text, channel="C1", channel_type="channel", ts=ts))
    assert isinstance(mention, InboundMessage) and isinstance(message, InboundMessage)
    assert mention.message_id == message.message_id == f"C1:{ts}"


@pytest.mark.parametrize("channel_type", ["channel", "group", "mpim"])
def test_channel_chatter_not_addressed_to_the_bot_is_skipped(channel_type: str) -> None:
    callback = fs.message_event("lunch?", channel="C0CHAN001", channel_type=channel_type)
    result = inbound(callback)
    assert isinstance(result, Skip)
    assert "not addressed" in result.reason


def test_another_users_mention_does_not_address_the_bot() -> None:
    callback = fs.message_event("<@U0OTHER01> ping", channel="C1", channel_type="channel")
    assert isinstance(inbound(callback), Skip)


def test_a_reply_in_a_thread_the_bot_started_is_addressed() -> None:
    callback = fs.message_event(
        "follow-up",
        channel="C0CHAN001",
        channel_type="channel",
        thread_ts="1760000000.000001",
        parent_user_id=fs.BOT_USER_ID,
    )
    message = inbound(callback)
    assert isinstance(message, InboundMessage)
    assert message.thread_id == "1760000000.000001"


@pytest.mark.parametrize(
    "extra",
    [
        {"bot_id": "B0OTHER01"},
        {"bot_id": "B0BOT0001", "user": fs.BOT_USER_ID},
        {"subtype": "bot_message", "bot_id": "B0OTHER01"},
        {"bot_profile": {"id": "B0OTHER01", "name": "otherbot"}},
    ],
)
def test_bots_are_never_answered(extra: dict) -> None:
    result = inbound(fs.message_event("beep", **extra))
    assert isinstance(result, Skip)


def test_our_own_message_is_skipped_even_without_bot_id() -> None:
    result = inbound(fs.message_event("echo", user=fs.BOT_USER_ID))
    assert isinstance(result, Skip)
    assert result.reason == "our own message"


@pytest.mark.parametrize(
    "subtype", ["message_changed", "message_deleted", "channel_join", "me_message", "huddle_thread"]
)
def test_other_subtypes_are_ignored(subtype: str) -> None:
    assert isinstance(inbound(fs.message_event("x", subtype=subtype)), Skip)


@pytest.mark.parametrize("subtype", ["file_share", "thread_broadcast"])
def test_a_person_sharing_a_file_or_broadcasting_is_still_a_message(subtype: str) -> None:
    assert isinstance(inbound(fs.message_event("look", subtype=subtype)), InboundMessage)


@pytest.mark.parametrize(
    "event",
    [
        {"type": "reaction_added", "user": "U1", "reaction": "thumbsup"},
        {"type": "member_joined_channel", "user": "U1", "channel": "C1"},
        {"type": "message"},  # no user, no channel, no ts
        {"type": "message", "user": "U1", "channel": "D1"},  # no ts
        {"type": "message", "user": 5, "channel": "D1", "ts": "1.2"},
        {"type": ["message"]},
    ],
)
def test_events_that_are_not_messages_or_lack_fields_are_skipped(event: dict) -> None:
    assert isinstance(inbound({"type": "event_callback", "event": event}), Skip)


def test_a_non_string_text_becomes_empty() -> None:
    message = inbound(
        fs.message_event("x") | {"event": fs.message_event("x")["event"] | {"text": 7}}
    )
    assert isinstance(message, InboundMessage)
    assert message.text == ""


def test_url_verification_carries_its_challenge() -> None:
    parsed = parse_body(
        b'{"type":"url_verification","token":"t","challenge":"3eZbrw1aBm2rZgRNFdxV2"}'
    )
    assert parsed.kind == "url_verification"
    assert parsed.challenge == "3eZbrw1aBm2rZgRNFdxV2"


def test_unknown_payload_types_are_classified_not_refused() -> None:
    assert parse_body(b'{"type":"block_actions"}').kind == "other"
    assert parse_body(b'{"type":"app_rate_limited","minute_rate_limited":1}').kind == "rate_limited"


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"not json",
        b"\xff\xfe\x00",
        b"[1,2,3]",
        b'"event_callback"',
        b"{}",
        b'{"type": 5}',
        b'{"type":"event_callback"}',
        b'{"type":"event_callback","event":"message"}',
        b'{"type":"url_verification"}',
        b"payload=%7B%22type%22%3A%22block_actions%22%7D",
        b"[" * 100_000 + b"]" * 100_000,
    ],
)
def test_malformed_bodies_raise_one_error(body: bytes) -> None:
    with pytest.raises(MalformedPayload):
        parse_body(body)


def test_classify_takes_a_decoded_socket_mode_payload() -> None:
    callback = fs.message_event("hi")
    assert classify(callback).kind == "event_callback"
    assert classify(json.loads(json.dumps(callback))).data == callback
    with pytest.raises(MalformedPayload):
        classify(["not", "an", "object"])
