"""Slack event payloads into :class:`~fermix_core.channel.InboundMessage`, pure and total.

Both transports carry the same Events API body: a webhook POST's JSON, or the ``payload`` of
a Socket Mode ``events_api`` envelope. :func:`parse_body` classifies a raw body;
:func:`to_inbound` decides whether one ``event_callback`` is a message for the agent and
normalizes it. Nothing here raises on hostile input other than :class:`MalformedPayload`,
and nothing does I/O.

Which events become turns:

* ``message`` events with no ``subtype`` (and ``file_share`` / ``thread_broadcast``, which
  are still a person writing) from a person — never one carrying ``bot_id`` (ours or any
  other bot's, so two bots cannot loop), never our own user id;
* in a direct message (``channel_type = "im"``) every such message;
* elsewhere (channels, private channels, group DMs) only messages addressed to the bot: an
  ``app_mention`` event, a message containing ``<@BOTID>``, or a reply in a thread the bot
  started.

Files on a message are listed in ``raw_ref`` (:class:`SlackRef`), not fetched: the adapter
downloads them only for an allowed sender and a message not seen before. Edits
(``message_changed``), deletions, joins and every other subtype are ignored. The
platform id is ``<channel>:<ts>``: Slack's ``ts`` is unique per channel and present on
every message, and an ``app_mention`` and the ``message`` event for the same post share it,
so a mention subscribed both ways runs once.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Literal

from fermix_core.channel import InboundMessage

__all__ = [
    "HUMAN_SUBTYPES",
    "MalformedPayload",
    "ParsedBody",
    "Skip",
    "SlackRef",
    "classify",
    "message_id_for",
    "parse_body",
    "to_inbound",
]

#: Message subtypes that are still a person writing to us.
HUMAN_SUBTYPES = frozenset({"file_share", "thread_broadcast"})

_MENTION = re.compile(r"<@([A-Z0-9]+)(?:\|[^>]*)?>")


class MalformedPayload(ValueError):
    """The body is not an Events API payload (not JSON, not an object, fields of wrong type)."""


@dataclass(frozen=True)
class ParsedBody:
    """One classified Events API body."""

    kind: Literal["url_verification", "event_callback", "rate_limited", "other"]
    #: The body's ``type`` as sent.
    type: str
    data: dict[str, Any]

    @property
    def challenge(self) -> str:
        value = self.data.get("challenge")
        return value if isinstance(value, str) else ""


@dataclass(frozen=True)
class SlackRef:
    """What the adapter keeps about a message for later (``InboundMessage.raw_ref``): the
    files Slack attached (fetched only after the sender is known to be allowed)."""

    ts: Any = None
    team: Any = None
    files: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class Skip:
    """Why an event is not a turn (for the log and telemetry)."""

    reason: str


def parse_body(body: bytes | str) -> ParsedBody:
    """Classify a raw Events API body; :class:`MalformedPayload` if it is not one."""
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise MalformedPayload(f"body is not JSON: {type(exc).__name__}") from None
    return classify(data)


def classify(data: Any) -> ParsedBody:
    """Classify an already decoded body (a Socket Mode envelope's ``payload``)."""
    if not isinstance(data, dict):
        raise MalformedPayload("body is not a JSON object")
    kind = data.get("type")
    if not isinstance(kind, str):
        raise MalformedPayload("body has no string 'type'")
    if kind == "url_verification":
        if not isinstance(data.get("challenge"), str):
            raise MalformedPayload("url_verification without a string 'challenge'")
        return ParsedBody("url_verification", kind, data)
    if kind == "event_callback":
        if not isinstance(data.get("event"), dict):
            raise MalformedPayload("event_callback without an 'event' object")
        return ParsedBody("event_callback", kind, data)
    if kind == "app_rate_limited":
        return ParsedBody("rate_limited", kind, data)
    return ParsedBody("other", kind, data)


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def message_id_for(event: dict[str, Any]) -> str | None:
    """The platform id the idempotency record keys on: ``<channel>:<ts>``."""
    channel, ts = _text(event.get("channel")), _text(event.get("ts"))
    return f"{channel}:{ts}" if channel and ts else None


def _mentions(text: str, bot_user_id: str | None) -> bool:
    return bool(bot_user_id) and any(m.group(1) == bot_user_id for m in _MENTION.finditer(text))


def _strip_mention(text: str, bot_user_id: str | None) -> str:
    """Drop the bot's own ``<@BOTID>`` tokens, so "@fermix /new" reads as the command."""
    if not bot_user_id:
        return text.strip()
    stripped = _MENTION.sub(lambda m: "" if m.group(1) == bot_user_id else m.group(0), text)
    return re.sub(r"[ \t]{2,}", " ", stripped).strip()


def to_inbound(
    callback: dict[str, Any], *, channel_name: str, bot_user_id: str | None
) -> InboundMessage | Skip:
    """Normalize one ``event_callback`` body, or say why it is not a turn."""
    event = callback.get("event")
    if not isinstance(event, dict):
        return Skip("no event object")
    event_type = event.get("type")
    if event_type not in ("message", "app_mention"):
        return Skip(f"event type {event_type!r} is not a message")
    if event.get("bot_id") or event.get("bot_profile") or event.get("subtype") == "bot_message":
        return Skip("sent by a bot")
    subtype = event.get("subtype")
    if subtype is not None and subtype not in HUMAN_SUBTYPES:
        return Skip(f"message subtype {subtype!r} is ignored")
    user = _text(event.get("user"))
    if user is None:
        return Skip("no sender user id")
    if bot_user_id and user == bot_user_id:
        return Skip("our own message")
    chat_id = _text(event.get("channel"))
    message_id = message_id_for(event)
    if chat_id is None or message_id is None:
        return Skip("no channel or ts")
    raw_text = event.get("text")
    text = raw_text if isinstance(raw_text, str) else ""
    channel_type = event.get("channel_type")
    is_dm = channel_type == "im" or (channel_type is None and chat_id.startswith("D"))
    if not is_dm:
        addressed = (
            event_type == "app_mention"
            or _mentions(text, bot_user_id)
            or (bool(bot_user_id) and event.get("parent_user_id") == bot_user_id)
        )
        if not addressed:
            return Skip("a channel message not addressed to the bot")
    thread_ts = _text(event.get("thread_ts"))
    listed = event.get("files")
    files = [f for f in listed if isinstance(f, dict)] if isinstance(listed, list) else []
    return InboundMessage(
        channel=channel_name,
        chat_id=chat_id,
        thread_id=thread_ts,
        sender_id=user,
        text=_strip_mention(text, bot_user_id),
        message_id=message_id,
        is_group=not is_dm,
        raw_ref=SlackRef(ts=event.get("ts"), team=callback.get("team_id"), files=files),
    )
