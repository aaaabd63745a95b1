"""The WhatsApp Cloud API (Graph API) over the runtime's shared httpx client.

The API is small — send a message, upload and fetch media, mark a message read — so it is
raw HTTP, not an SDK. Every failure becomes one of the channel seam's typed errors:

* HTTP 429 and Meta's throttling codes (4, 80007, 130429, 131048, 131056) →
  :class:`~fermix_core.channel.ChannelRateLimited` (``Retry-After`` honoured when sent);
* network errors, timeouts, 5xx and Meta's temporary codes (1, 2, 131000, 131016) →
  :class:`~fermix_core.channel.ChannelTransientError`;
* everything else → :class:`~fermix_core.channel.ChannelError` with Meta's own message, and
  for code **131047** an explanation of the 24-hour customer-service window.

The access token travels only in the ``Authorization`` header and never appears in an
error message.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import httpx
from fermix_core.channel import ChannelError, ChannelRateLimited, ChannelTransientError

__all__ = [
    "RATE_LIMIT_CODES",
    "TRANSIENT_CODES",
    "WINDOW_CLOSED",
    "GraphError",
    "WhatsAppApi",
]

log = logging.getLogger("fermix_channels.whatsapp")

#: Outside the 24-hour customer-service window only templates may be sent.
WINDOW_CLOSED = 131047
RATE_LIMIT_CODES = frozenset({4, 80007, 130429, 131048, 131056})
TRANSIENT_CODES = frozenset({1, 2, 131000, 131016})


class GraphError(ChannelError):
    """A permanent Graph API refusal; ``code`` is Meta's error code when it sent one."""

    def __init__(self, message: str, code: int | None = None) -> None:
        super().__init__(message)
        self.code = code


def _error_of(response: httpx.Response) -> tuple[int | None, str]:
    try:
        body = response.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None, response.text[:200] or response.reason_phrase
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict):
        return None, str(body)[:200]
    code = error.get("code") if isinstance(error.get("code"), int) else None
    detail = error.get("error_data")
    details = detail.get("details") if isinstance(detail, dict) else None
    message = details or error.get("message") or "unknown error"
    return code, str(message)[:500]


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("retry-after")
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None


def raise_for(response: httpx.Response, what: str, recipient: str | None = None) -> None:
    """Turn a failed Graph API answer into the seam's typed errors."""
    if response.is_success:
        return
    code, message = _error_of(response)
    label = f"WhatsApp {what}"
    if response.status_code == 429 or code in RATE_LIMIT_CODES:
        raise ChannelRateLimited(
            _retry_after(response), f"{label} was rate-limited (code {code}): {message}"
        )
    if response.status_code >= 500 or code in TRANSIENT_CODES:
        raise ChannelTransientError(
            f"{label} failed temporarily (HTTP {response.status_code}, code {code}): {message}"
        )
    if code == WINDOW_CLOSED:
        who = f" to {recipient}" if recipient else ""
        raise GraphError(
            f"{label}{who} was refused: the 24-hour customer-service window is closed "
            f"(error 131047). WhatsApp lets a business reply only within 24 hours of the "
            "user's last message; the user must write again first (only approved template "
            "messages can open a conversation).",
            code,
        )
    if response.status_code in (401, 403) or code == 190:
        raise GraphError(
            f"{label} was refused: the access token is invalid or lacks permission "
            f"(HTTP {response.status_code}, code {code}): {message}. Set a valid "
            "[fermix_channels.whatsapp] access_token (`fermix setup --reconfigure`).",
            code,
        )
    raise GraphError(
        f"{label} was refused (HTTP {response.status_code}, code {code}): {message}", code
    )


class WhatsAppApi:
    """Calls for one business phone number."""

    def __init__(
        self, http: httpx.AsyncClient, base_url: str, phone_number_id: str, token: str
    ) -> None:
        self.http = http
        self.base_url = base_url.rstrip("/")
        self.phone_number_id = phone_number_id
        # Parsed once: every reply and read receipt posts here (a str is parsed per call).
        self._messages_url = httpx.URL(f"{self.base_url}/{phone_number_id}/messages")
        self._headers = {"Authorization": f"Bearer {token}"}

    async def _request(
        self,
        method: str,
        url: str | httpx.URL,
        what: str,
        recipient: str | None = None,
        **kwargs: Any,
    ) -> httpx.Response:
        try:
            response = await self.http.request(method, url, headers=self._headers, **kwargs)
        except httpx.TimeoutException as exc:
            raise ChannelTransientError(
                f"WhatsApp {what} timed out ({type(exc).__name__})"
            ) from None
        except httpx.TransportError as exc:
            raise ChannelTransientError(
                f"WhatsApp {what} could not reach {self.base_url} ({type(exc).__name__})"
            ) from None
        raise_for(response, what, recipient)
        return response

    async def _post_message(self, to: str, payload: dict[str, Any], what: str) -> str:
        body = {"messaging_product": "whatsapp", "recipient_type": "individual", "to": to}
        body.update(payload)
        response = await self._request("POST", self._messages_url, what, to, json=body)
        try:
            message_id = response.json()["messages"][0]["id"]
        except (json.JSONDecodeError, KeyError, IndexError, TypeError):
            raise ChannelTransientError(
                f"WhatsApp {what}: the answer carried no message id"
            ) from None
        if not isinstance(message_id, str) or not message_id:
            raise ChannelTransientError(f"WhatsApp {what}: the answer carried no message id")
        return message_id

    async def send_text(self, to: str, text: str, *, reply_to: str | None = None) -> str:
        payload: dict[str, Any] = {"type": "text", "text": {"preview_url": False, "body": text}}
        if reply_to:
            payload["context"] = {"message_id": reply_to}
        return await self._post_message(to, payload, "text send")

    async def send_media(
        self,
        to: str,
        kind: str,
        media_id: str,
        *,
        caption: str | None = None,
        filename: str | None = None,
        reply_to: str | None = None,
    ) -> str:
        item: dict[str, Any] = {"id": media_id}
        if caption and kind in ("image", "video", "document"):
            item["caption"] = caption
        if filename and kind == "document":
            item["filename"] = filename
        payload: dict[str, Any] = {"type": kind, kind: item}
        if reply_to:
            payload["context"] = {"message_id": reply_to}
        return await self._post_message(to, payload, f"{kind} send")

    async def send_reaction(self, to: str, message_id: str, emoji: str) -> str:
        payload = {"type": "reaction", "reaction": {"message_id": message_id, "emoji": emoji}}
        return await self._post_message(to, payload, "reaction")

    async def mark_read(self, message_id: str, *, typing: bool = False) -> None:
        body: dict[str, Any] = {
            "messaging_product": "whatsapp",
            "status": "read",
            "message_id": message_id,
        }
        if typing:
            body["typing_indicator"] = {"type": "text"}
        await self._request("POST", self._messages_url, "read receipt", json=body)

    async def upload(self, data: bytes, mime_type: str, filename: str) -> str:
        response = await self._request(
            "POST",
            f"{self.base_url}/{self.phone_number_id}/media",
            "media upload",
            data={"messaging_product": "whatsapp", "type": mime_type},
            files={"file": (filename, data, mime_type)},
        )
        media_id = response.json().get("id") if response.content else None
        if not isinstance(media_id, str) or not media_id:
            raise ChannelTransientError("WhatsApp media upload: the answer carried no media id")
        return media_id

    async def media_info(self, media_id: str) -> dict[str, Any]:
        response = await self._request("GET", f"{self.base_url}/{media_id}", "media lookup")
        info = response.json()
        if not isinstance(info, dict) or not isinstance(info.get("url"), str):
            raise GraphError("WhatsApp media lookup: the answer carried no download URL")
        return info

    async def download(self, url: str, limit: int) -> bytes | None:
        """The media bytes at *url*, or ``None`` when they exceed *limit* (not all read)."""
        try:
            async with self.http.stream("GET", url, headers=self._headers) as response:
                if not response.is_success:
                    await response.aread()
                    raise_for(response, "media download")
                declared = response.headers.get("content-length")
                if declared is not None and declared.isdigit() and int(declared) > limit:
                    return None
                data = bytearray()
                async for chunk in response.aiter_bytes():
                    data += chunk
                    if len(data) > limit:
                        return None
                return bytes(data)
        except httpx.TimeoutException as exc:
            raise ChannelTransientError(
                f"WhatsApp media download timed out ({type(exc).__name__})"
            ) from None
        except httpx.TransportError as exc:
            raise ChannelTransientError(
                f"WhatsApp media download failed ({type(exc).__name__})"
            ) from None
