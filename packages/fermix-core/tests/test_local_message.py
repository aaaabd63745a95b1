"""The local turn's InboundMessage, built without validation when validation keeps it as is."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from fermix_core.channel import Attachment, AttachmentKind, InboundMessage
from fermix_core.service import CLI_CHANNEL, LOCAL_SENDER, local_message
from pydantic import ValidationError


def validated(session, text, attachments) -> InboundMessage:
    return InboundMessage(
        channel=CLI_CHANNEL,
        chat_id=session,
        sender_id=LOCAL_SENDER,
        text=text,
        attachments=attachments,
        local=True,
    )


@pytest.mark.parametrize(
    ("session", "text"),
    [("default", "hello"), ("s-1", ""), ("naïve ☃", "  spaced  \n"), ("x" * 300, "é" * 5000)],
)
def test_a_built_local_message_is_the_validated_one(session: str, text: str) -> None:
    before = datetime.now(UTC)
    built = local_message(session, text, [])
    after = datetime.now(UTC)
    reference = validated(session, text, [])
    assert list(built.__dict__) == list(InboundMessage.model_fields), "every field, in order"
    assert before <= built.received_at <= after and built.received_at.tzinfo is UTC
    same_time = reference.model_copy(update={"received_at": built.received_at})
    assert built == same_time
    assert built.model_dump() == same_time.model_dump()
    assert built.model_dump_json() == same_time.model_dump_json()
    assert built.model_fields_set == reference.model_fields_set
    assert built.conversation_key == reference.conversation_key
    assert built.is_empty == reference.is_empty
    with pytest.raises(ValidationError):
        built.text = "changed"  # frozen like the validated one


def test_anything_else_is_validated_as_before() -> None:
    with pytest.raises(ValidationError):
        local_message("", "hello", [])  # an empty session is refused by name
    coerced = local_message(42, "hello", [])  # type: ignore[arg-type]
    assert coerced.chat_id == "42"
    picture = Attachment(kind=AttachmentKind.IMAGE, data=b"\x89PNG")
    with_image = local_message("s", "look", [picture])
    assert with_image.attachments == [picture]
    assert with_image == validated("s", "look", [picture]).model_copy(
        update={"received_at": with_image.received_at}
    )
