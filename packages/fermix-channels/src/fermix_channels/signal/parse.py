"""signal-cli ``receive`` notifications → :class:`~fermix_core.channel.InboundMessage`.

Pure functions over the decoded JSON, so every rule is unit-testable without a process:

* both notification shapes: ``params.envelope`` (signal-cli receiving on start) and
  ``params.result.envelope`` with ``params.subscription`` (after ``subscribeReceive``);
* only ``dataMessage`` envelopes are turns. Sync messages (what the account itself sent
  from another device), receipts, typing indicators, calls, stories, edits, reactions,
  remote deletes and group-update messages are skipped, and so is anything whose source
  is the account itself — the bot never answers itself;
* the sender: ``sourceNumber`` (``source`` on older signal-cli) and ``sourceUuid``. The
  sender id is the number, or the UUID when the number is hidden (phone-number privacy) or
  the UUID is what the configuration lists; ``sourceName`` is the display name only;
* groups (``groupInfo.groupId``) are chats of their own: ``chat_id = "group:<groupId>"``,
  ``is_group``. In a group the bot answers only what is addressed to it: a mention of the
  account, a quote of one of its messages, or a ``/command``. A direct chat's id is the
  sender's id;
* mentions arrive as U+FFFC placeholders with ``start``/``length`` in UTF-16 units; they are
  written back as ``@name`` so the text reads as the sender saw it;
* attachments are described (id, content type, file name, declared size), never opened:
  signal-cli has already stored them under ``<data dir>/attachments/<id>``, and the adapter
  turns them into local-path attachments for an authorized sender only;
* the idempotency key is ``<sender>:<timestamp>`` (the sender's own millisecond timestamp,
  unique per sender), the same string a reply quotes and a reaction targets.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fermix_core.channel import Attachment, AttachmentKind, InboundMessage

__all__ = [
    "GROUP_PREFIX",
    "AttachmentRef",
    "SignalRef",
    "Skip",
    "envelope_of",
    "local_attachments",
    "parse_envelope",
    "split_message_id",
]

#: ``chat_id`` prefix of a group chat; the rest is signal-cli's base64 ``groupId``.
GROUP_PREFIX = "group:"
_PLACEHOLDER = "\ufffc"
_IGNORED = (
    "syncMessage",
    "receiptMessage",
    "typingMessage",
    "callMessage",
    "storyMessage",
    "editMessage",
)


@dataclass(frozen=True)
class Skip:
    """Not a turn: why, for the debug log."""

    reason: str


@dataclass(frozen=True)
class AttachmentRef:
    """One attachment as signal-cli describes it; the file is in its attachments folder."""

    id: str
    kind: AttachmentKind
    mime_type: str | None
    filename: str | None
    size: int | None


@dataclass(frozen=True)
class SignalRef:
    """The adapter's handle on an inbound message (``InboundMessage.raw_ref``)."""

    author: str
    timestamp: int
    group_id: str | None = None
    attachments: tuple[AttachmentRef, ...] = field(default=())


def envelope_of(notification: Mapping[str, Any]) -> dict[str, Any] | None:
    """The envelope of a ``receive`` notification in either shape, else ``None``."""
    if notification.get("method") != "receive":
        return None
    params = notification.get("params")
    if not isinstance(params, Mapping):
        return None
    envelope = params.get("envelope")
    if envelope is None:
        result = params.get("result")
        envelope = result.get("envelope") if isinstance(result, Mapping) else None
    return envelope if isinstance(envelope, dict) else None


def _str(value: Any) -> str | None:
    return value.strip() or None if isinstance(value, str) else None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def split_message_id(message_id: str) -> tuple[str, int] | None:
    """``"<author>:<timestamp>"`` → ``(author, timestamp)``; ``None`` if it is not one."""
    author, sep, tail = str(message_id).rpartition(":")
    if not sep or not author or not tail.isdigit():
        return None
    return author, int(tail)


def _kind(mime: str | None) -> AttachmentKind:
    major = (mime or "").split("/", 1)[0].lower()
    return {
        "image": AttachmentKind.IMAGE,
        "audio": AttachmentKind.AUDIO,
        "video": AttachmentKind.VIDEO,
    }.get(major, AttachmentKind.DOCUMENT)


def _attachments(data: Mapping[str, Any]) -> tuple[AttachmentRef, ...]:
    items = data.get("attachments")
    if not isinstance(items, list):
        return ()
    refs: list[AttachmentRef] = []
    for item in items:
        if not isinstance(item, Mapping):
            continue
        ident = _str(item.get("id"))
        if ident is None:
            continue
        mime = _str(item.get("contentType"))
        size = _int(item.get("size"))
        refs.append(
            AttachmentRef(
                id=ident,
                kind=_kind(mime),
                mime_type=mime,
                filename=_str(item.get("filename")),
                size=size if size is None or size >= 0 else None,
            )
        )
    return tuple(refs)


def _with_mentions(text: str, mentions: Any, selves: Collection[str]) -> tuple[str, bool]:
    """*text* with each mention placeholder written as ``@name``; whether the bot is named."""
    if not isinstance(mentions, list) or not text:
        return text, False
    units = text.encode("utf-16-le")
    addressed = False
    spans: list[tuple[int, int, str]] = []
    for mention in mentions:
        if not isinstance(mention, Mapping):
            continue
        start, length = _int(mention.get("start")), _int(mention.get("length"))
        ids = {_str(mention.get(k)) for k in ("number", "uuid", "name")} - {None}
        if ids & set(selves):
            addressed = True
        if start is None or length is None or start < 0 or length < 1:
            continue
        if (start + length) * 2 > len(units):
            continue
        name = _str(mention.get("name")) or _str(mention.get("number")) or "someone"
        spans.append((start, length, name))
    for start, length, name in sorted(spans, reverse=True):
        piece = units[start * 2 : (start + length) * 2].decode("utf-16-le", errors="replace")
        if _PLACEHOLDER not in piece:
            continue  # the span does not point at a placeholder: leave the text alone
        label = name if name.startswith("@") else f"@{name}"
        units = units[: start * 2] + label.encode("utf-16-le") + units[(start + length) * 2 :]
    return units.decode("utf-16-le", errors="replace"), addressed


def parse_envelope(
    envelope: Mapping[str, Any],
    *,
    account: str,
    channel: str = "signal",
    self_ids: Collection[str] = (),
    known_ids: Collection[str] = (),
) -> InboundMessage | Skip:
    """One envelope as a message for the gateway, or why it is not one.

    *self_ids* are the account's own identifiers (its number, and its UUID when known);
    *known_ids* the ids the configuration names (owner, allowlists), which decide whether a
    sender with both a number and a UUID is known by the UUID.
    """
    selves = {account, *self_ids}
    number = _str(envelope.get("sourceNumber")) or _str(envelope.get("source"))
    uuid = _str(envelope.get("sourceUuid"))
    if number is None and uuid is None:
        return Skip("an envelope without a sender")
    if number in selves or uuid in selves:
        return Skip("the account's own message")
    data = envelope.get("dataMessage")
    if not isinstance(data, Mapping):
        kinds = [k for k in _IGNORED if k in envelope]
        return Skip(f"not a data message ({', '.join(kinds) or 'no dataMessage'})")
    if data.get("reaction") is not None:
        return Skip("a reaction")
    if data.get("remoteDelete") is not None:
        return Skip("a remote delete")
    timestamp = _int(data.get("timestamp")) or _int(envelope.get("timestamp"))
    if timestamp is None or timestamp <= 0:
        return Skip("a data message without a timestamp")
    # The number unless it is hidden or the configuration knows this sender by UUID.
    by_uuid = uuid is not None and (uuid in known_ids or number is None)
    sender = uuid if by_uuid else number or uuid
    assert sender is not None
    text = data.get("message") if isinstance(data.get("message"), str) else ""
    text, mentioned = _with_mentions(text, data.get("mentions"), selves)
    attachments = _attachments(data)
    group = data.get("groupInfo")
    group_id = _str(group.get("groupId")) if isinstance(group, Mapping) else None
    if group_id is not None:
        kind = _str(group.get("type"))
        if kind not in (None, "DELIVER") and not text.strip() and not attachments:
            return Skip(f"a group {kind.lower()} message")
        quote = data.get("quote")
        quoted = isinstance(quote, Mapping) and bool(
            {_str(quote.get(k)) for k in ("author", "authorNumber", "authorUuid")} & selves
        )
        if not (mentioned or quoted or text.lstrip().startswith("/")):
            return Skip("a group message not addressed to the bot")
    return InboundMessage(
        channel=channel,
        chat_id=GROUP_PREFIX + group_id if group_id is not None else sender,
        sender_id=sender,
        sender_name=_str(envelope.get("sourceName")),
        text=text,
        message_id=f"{sender}:{timestamp}",
        is_group=group_id is not None,
        received_at=datetime.fromtimestamp(timestamp / 1000, UTC),
        raw_ref=SignalRef(
            author=sender, timestamp=timestamp, group_id=group_id, attachments=attachments
        ),
    )


def local_attachments(
    refs: tuple[AttachmentRef, ...], folder: Path
) -> tuple[list[Attachment], list[str]]:
    """The files signal-cli stored for *refs* (as local-path attachments) and a note for
    each one that is not there. An id that would leave *folder* is refused."""
    attachments: list[Attachment] = []
    notes: list[str] = []
    root = folder.resolve()
    for ref in refs:
        label = ref.filename or ref.kind.value
        if "/" in ref.id or "\\" in ref.id or ref.id in (".", ".."):
            notes.append(f"[attachment not received: {label} has an invalid id]")
            continue
        path = root / ref.id
        if not path.is_file():
            notes.append(f"[attachment not received: signal-cli did not store {label}]")
            continue
        attachments.append(
            Attachment(
                kind=ref.kind,
                path=path,
                mime_type=ref.mime_type,
                filename=ref.filename or ref.id,
                size=ref.size,
            )
        )
    return attachments, notes
