"""Envelope parsing and error mapping, without a process."""

from __future__ import annotations

from pathlib import Path

import pytest
from fermix_channels.signal.parse import (
    AttachmentRef,
    SignalRef,
    Skip,
    envelope_of,
    local_attachments,
    parse_envelope,
    split_message_id,
)
from fermix_channels.signal.rpc import SignalCliError, rpc_error
from fermix_core.channel import (
    AttachmentKind,
    ChannelRateLimited,
    ChannelTransientError,
    InboundMessage,
)

ACCOUNT = "+15550000001"
OWNER = "+15550000002"
UUID = "0e4f8c2a-1111-4c3b-9d7e-000000000002"


def envelope(**data) -> dict:
    body = {"timestamp": 1700000000123, "message": "hi", **data}
    return {
        "source": OWNER,
        "sourceNumber": OWNER,
        "sourceUuid": UUID,
        "sourceName": "Owner",
        "timestamp": 1700000000123,
        "dataMessage": body,
    }


def parse(env: dict, **kw) -> InboundMessage | Skip:
    return parse_envelope(env, account=ACCOUNT, **kw)


def test_both_notification_shapes_hold_the_same_envelope() -> None:
    env = envelope()
    plain = {"jsonrpc": "2.0", "method": "receive", "params": {"envelope": env}}
    sub = {
        "jsonrpc": "2.0",
        "method": "receive",
        "params": {"subscription": 0, "result": {"envelope": env, "account": ACCOUNT}},
    }
    assert envelope_of(plain) == env == envelope_of(sub)
    assert envelope_of({"method": "receive", "params": {"result": 3}}) is None
    assert envelope_of({"method": "other", "params": {"envelope": env}}) is None
    assert envelope_of({"method": "receive", "params": "x"}) is None


def test_a_direct_message() -> None:
    message = parse(envelope(message="hello"))
    assert isinstance(message, InboundMessage)
    assert (message.chat_id, message.sender_id, message.text) == (OWNER, OWNER, "hello")
    assert message.message_id == f"{OWNER}:1700000000123"
    assert message.received_at.year == 2023
    assert message.raw_ref == SignalRef(author=OWNER, timestamp=1700000000123)


@pytest.mark.parametrize(
    ("env", "reason"),
    [
        ({"source": OWNER, "timestamp": 1, "receiptMessage": {}}, "receiptMessage"),
        ({"source": OWNER, "timestamp": 1, "typingMessage": {}}, "typingMessage"),
        ({"source": OWNER, "timestamp": 1, "syncMessage": {}}, "syncMessage"),
        ({"source": OWNER, "timestamp": 1, "editMessage": {}}, "editMessage"),
        ({"timestamp": 1, "dataMessage": {"timestamp": 1, "message": "x"}}, "without a sender"),
        ({**envelope(), "sourceNumber": ACCOUNT, "source": ACCOUNT}, "own message"),
        (envelope(reaction={"emoji": "👍"}), "a reaction"),
        (envelope(remoteDelete={"timestamp": 1}), "remote delete"),
        (envelope(timestamp=None) | {"timestamp": None}, "without a timestamp"),
    ],
)
def test_what_is_not_a_turn(env: dict, reason: str) -> None:
    skipped = parse(env)
    assert isinstance(skipped, Skip)
    assert reason in skipped.reason


def test_the_account_uuid_counts_as_itself() -> None:
    skipped = parse(envelope(), self_ids=(UUID,))
    assert isinstance(skipped, Skip) and "own" in skipped.reason


def test_sender_is_the_number_unless_config_names_the_uuid_or_it_is_hidden() -> None:
    assert parse(envelope()).sender_id == OWNER
    assert parse(envelope(), known_ids={UUID}).sender_id == UUID
    hidden = {**envelope(), "sourceNumber": None, "source": None}
    assert parse(hidden).sender_id == UUID


def test_group_rules_and_mentions() -> None:
    group = {"groupId": "R3JvdXA=", "type": "DELIVER"}
    assert isinstance(parse(envelope(groupInfo=group, message="just chatting")), Skip)
    mention = [{"number": ACCOUNT, "name": "Fermix", "start": 0, "length": 1}]
    named = parse(envelope(groupInfo=group, message="\ufffc, hi 👋", mentions=mention))
    assert isinstance(named, InboundMessage)
    assert named.text == "@Fermix, hi 👋" and named.is_group
    assert named.chat_id == "group:R3JvdXA="
    assert named.raw_ref.group_id == "R3JvdXA="
    # Offsets are UTF-16 units: a mention after an emoji (two units) still lands.
    late = [{"number": "+15550000077", "name": "Ann", "start": 3, "length": 1}]
    text = parse(envelope(message="👋 \ufffc /help", mentions=late)).text
    assert text == "👋 @Ann /help"
    quoted = parse(
        envelope(groupInfo=group, message="yes", quote={"authorNumber": ACCOUNT, "id": 5})
    )
    assert isinstance(quoted, InboundMessage)
    assert isinstance(parse(envelope(groupInfo=group, message=" /new")), InboundMessage)
    update = envelope(groupInfo={"groupId": "R3JvdXA=", "type": "UPDATE"}, message=None)
    assert isinstance(parse(update), Skip)


def test_bad_mentions_leave_the_text_alone() -> None:
    mentions = [
        {"number": "+1", "start": 50, "length": 1},
        {"number": "+1", "start": 0, "length": 2},
        "junk",
        {"start": -1, "length": 1},
    ]
    assert parse(envelope(message="plain words", mentions=mentions)).text == "plain words"


def test_attachments_are_described_then_resolved_inside_the_folder(tmp_path: Path) -> None:
    items = [
        {"contentType": "image/png", "filename": "a.png", "id": "img1.png", "size": 4},
        {"contentType": "audio/aac", "id": "v.aac", "size": -3},
        {"contentType": "application/pdf", "filename": "doc.pdf", "id": "d.pdf"},
        {"contentType": "video/mp4", "id": ".."},
        {"contentType": "image/gif"},
        "junk",
    ]
    message = parse(envelope(attachments=items))
    refs = message.raw_ref.attachments
    assert [r.kind for r in refs] == [
        AttachmentKind.IMAGE,
        AttachmentKind.AUDIO,
        AttachmentKind.DOCUMENT,
        AttachmentKind.VIDEO,
    ]
    assert refs[1].size is None  # a negative declared size is not believed
    (tmp_path / "img1.png").write_bytes(b"png!")
    (tmp_path / "d.pdf").write_bytes(b"%PDF")
    attachments, notes = local_attachments(refs, tmp_path)
    assert [a.path for a in attachments] == [tmp_path / "img1.png", tmp_path / "d.pdf"]
    assert attachments[0].filename == "a.png" and attachments[0].size == 4
    assert len(notes) == 2 and "invalid id" in notes[1]
    traversal = (AttachmentRef("../outside", AttachmentKind.DOCUMENT, None, None, 1),)
    assert local_attachments(traversal, tmp_path)[0] == []


def test_message_ids_split_back_into_author_and_timestamp() -> None:
    assert split_message_id(f"{OWNER}:1700000000123") == (OWNER, 1700000000123)
    assert split_message_id(f"{UUID}:5") == (UUID, 5)
    for bad in ("nocolon", ":5", f"{OWNER}:", f"{OWNER}:12a"):
        assert split_message_id(bad) is None


def test_signal_cli_error_codes_map_to_typed_errors() -> None:
    assert isinstance(rpc_error("send", {"code": -5, "message": "slow"}), ChannelRateLimited)
    assert isinstance(rpc_error("send", {"code": -3, "message": "io"}), ChannelTransientError)
    untrusted = rpc_error("send", {"code": -4, "message": "Untrusted Identity"})
    assert isinstance(untrusted, SignalCliError) and "trust" in str(untrusted)
    network = rpc_error(
        "send",
        {
            "code": -1,
            "message": "Failed to send message",
            "data": {"response": {"results": [{"type": "NETWORK_FAILURE"}]}},
        },
    )
    assert isinstance(network, ChannelTransientError)
    plain = rpc_error("listGroups", {"code": -32603, "message": "boom"})
    assert isinstance(plain, SignalCliError) and plain.code == -32603
    assert "boom" in str(plain)
    assert isinstance(rpc_error("send", "not an object"), SignalCliError)
