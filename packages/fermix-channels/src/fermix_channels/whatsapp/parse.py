"""WhatsApp Cloud API webhook bodies → what the adapter acts on.

A delivery is ``{"object": "whatsapp_business_account", "entry": [{"changes": [{"field":
"messages", "value": {...}}]}]}``. Its ``value`` carries ``messages`` (people writing to
the business number) and ``statuses`` (sent / delivered / read / failed callbacks for our
own replies). Only messages become turns; statuses are reported, and a failed one (the
24-hour window, an undeliverable number) is logged by the adapter. Anything else — other
fields, other objects, message types Fermix cannot use — is counted and ignored.

The parser never trusts the shape: every field is checked, and a body that is not the
documented structure raises :class:`MalformedPayload` (answered 400, nothing processed).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "MEDIA_TYPES",
    "MalformedPayload",
    "Media",
    "ParsedMessage",
    "Status",
    "Webhook",
    "parse_webhook",
]

#: Message types that carry one downloadable media object under the type's own key.
MEDIA_TYPES = ("image", "audio", "video", "document", "sticker")
#: Caps on what one delivery may hold, far above anything Meta sends.
_MAX_ITEMS = 1000
_MAX_TEXT = 65_536


class MalformedPayload(ValueError):
    """The body is not a WhatsApp Cloud API webhook delivery."""


@dataclass(frozen=True)
class Media:
    id: str
    kind: str
    mime_type: str | None = None
    filename: str | None = None
    caption: str | None = None
    sha256: str | None = None
    voice: bool = False


@dataclass(frozen=True)
class ParsedMessage:
    id: str
    sender: str
    phone_number_id: str | None
    type: str
    timestamp: int | None = None
    text: str = ""
    media: Media | None = None
    reply_to: str | None = None
    #: For ``reaction`` messages: the reacted-to message and the emoji ("" = removed).
    reaction: tuple[str, str] | None = None
    profile_name: str | None = None


@dataclass(frozen=True)
class Status:
    id: str
    status: str
    recipient: str | None
    phone_number_id: str | None
    errors: tuple[tuple[int | None, str], ...] = ()


@dataclass
class Webhook:
    messages: list[ParsedMessage] = field(default_factory=list)
    statuses: list[Status] = field(default_factory=list)
    #: Changes, fields or message types that were not used.
    ignored: list[str] = field(default_factory=list)


def _str(value: Any, what: str, *, required: bool = True, limit: int = 4096) -> str | None:
    if value is None and not required:
        return None
    if not isinstance(value, str) or (required and not value) or len(value) > limit:
        raise MalformedPayload(f"{what} must be a string")
    return value


def _dict(value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise MalformedPayload(f"{what} must be an object")
    return value


def _list(value: Any, what: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list) or len(value) > _MAX_ITEMS:
        raise MalformedPayload(f"{what} must be a list")
    return value


def _timestamp(value: Any) -> int | None:
    if isinstance(value, str) and value.isdigit():
        return int(value)
    return None


def _text_of(kind: str, message: dict[str, Any]) -> str:
    if kind == "text":
        body = _dict(message.get("text"), "text")
        return _str(body.get("body"), "text.body", limit=_MAX_TEXT) or ""
    if kind == "button":
        button = _dict(message.get("button"), "button")
        return _str(button.get("text"), "button.text", required=False) or ""
    if kind == "interactive":
        interactive = _dict(message.get("interactive"), "interactive")
        for key in ("button_reply", "list_reply"):
            reply = interactive.get(key)
            if isinstance(reply, dict):
                return _str(reply.get("title"), f"{key}.title", required=False) or ""
    if kind == "location":
        place = _dict(message.get("location"), "location")
        parts = [str(place.get(k)) for k in ("name", "address") if isinstance(place.get(k), str)]
        lat, lon = place.get("latitude"), place.get("longitude")
        if isinstance(lat, int | float) and isinstance(lon, int | float):
            parts.append(f"({lat}, {lon})")
        return "Location: " + " ".join(parts) if parts else ""
    return ""


def _media_of(kind: str, message: dict[str, Any]) -> Media:
    item = _dict(message.get(kind), kind)
    return Media(
        id=_str(item.get("id"), f"{kind}.id", limit=256) or "",
        kind=kind,
        mime_type=_str(item.get("mime_type"), f"{kind}.mime_type", required=False, limit=256),
        filename=_str(item.get("filename"), f"{kind}.filename", required=False, limit=512),
        caption=_str(item.get("caption"), f"{kind}.caption", required=False, limit=_MAX_TEXT),
        sha256=_str(item.get("sha256"), f"{kind}.sha256", required=False, limit=256),
        voice=item.get("voice") is True,
    )


def _message(raw: Any, phone_number_id: str | None, names: dict[str, str]) -> ParsedMessage:
    message = _dict(raw, "message")
    kind = _str(message.get("type"), "message.type", limit=64) or ""
    sender = _str(message.get("from"), "message.from", limit=64) or ""
    context = message.get("context")
    reply_to = None
    if isinstance(context, dict):
        reply_to = _str(context.get("id"), "context.id", required=False, limit=256)
    reaction = None
    media = None
    text = _text_of(kind, message)
    if kind in MEDIA_TYPES:
        media = _media_of(kind, message)
        text = media.caption or ""
    elif kind == "reaction":
        body = _dict(message.get("reaction"), "reaction")
        reaction = (
            _str(body.get("message_id"), "reaction.message_id", limit=256) or "",
            _str(body.get("emoji"), "reaction.emoji", required=False, limit=64) or "",
        )
    return ParsedMessage(
        id=_str(message.get("id"), "message.id", limit=256) or "",
        sender=sender,
        phone_number_id=phone_number_id,
        type=kind,
        timestamp=_timestamp(message.get("timestamp")),
        text=text,
        media=media,
        reply_to=reply_to,
        reaction=reaction,
        profile_name=names.get(sender),
    )


def _status(raw: Any, phone_number_id: str | None) -> Status:
    status = _dict(raw, "status")
    errors: list[tuple[int | None, str]] = []
    for error in _list(status.get("errors"), "status.errors"):
        if isinstance(error, dict):
            code = error.get("code") if isinstance(error.get("code"), int) else None
            detail = error.get("error_data")
            detail_text = detail.get("details") if isinstance(detail, dict) else None
            title = detail_text or error.get("message") or error.get("title") or "unknown error"
            errors.append((code, str(title)[:500]))
    return Status(
        id=_str(status.get("id"), "status.id", limit=256) or "",
        status=_str(status.get("status"), "status.status", limit=64) or "",
        recipient=_str(status.get("recipient_id"), "status.recipient_id", required=False),
        phone_number_id=phone_number_id,
        errors=tuple(errors),
    )


def parse_webhook(body: bytes) -> Webhook:
    """Parse one delivery; raises :class:`MalformedPayload` for anything not of its shape."""
    try:
        data = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise MalformedPayload(f"body is not JSON ({type(exc).__name__})") from None
    data = _dict(data, "body")
    result = Webhook()
    if data.get("object") != "whatsapp_business_account":
        result.ignored.append(f"object {str(data.get('object'))[:64]!r}")
        return result
    for entry in _list(data.get("entry"), "entry"):
        for change in _list(_dict(entry, "entry").get("changes"), "entry.changes"):
            change = _dict(change, "change")
            if change.get("field") != "messages":
                result.ignored.append(f"field {str(change.get('field'))[:64]!r}")
                continue
            value = _dict(change.get("value"), "change.value")
            metadata = value.get("metadata")
            phone_number_id = None
            if isinstance(metadata, dict):
                phone_number_id = _str(
                    metadata.get("phone_number_id"), "metadata.phone_number_id", required=False
                )
            names: dict[str, str] = {}
            for contact in _list(value.get("contacts"), "contacts"):
                if isinstance(contact, dict) and isinstance(contact.get("wa_id"), str):
                    profile = contact.get("profile")
                    if isinstance(profile, dict) and isinstance(profile.get("name"), str):
                        names[contact["wa_id"]] = profile["name"][:256]
            for raw in _list(value.get("messages"), "messages"):
                result.messages.append(_message(raw, phone_number_id, names))
            for raw in _list(value.get("statuses"), "statuses"):
                result.statuses.append(_status(raw, phone_number_id))
    return result
