"""The Telegram Bot API over the runtime's shared httpx client, errors mapped to the channel's.

Every method is ``POST <api_base_url>/bot<token>/<method>``: parameters as a JSON body, or
``multipart/form-data`` when a file is uploaded (nested values JSON-encoded, as the Bot API
documents). Every answer is the Bot API envelope ``{"ok": true, "result": …}`` or
``{"ok": false, "error_code": …, "description": …, "parameters": {…}}``, and every failure
becomes one of the typed errors the core's outbound path acts on:

* 429 (flood control) → :class:`~fermix_core.channel.ChannelRateLimited` with
  ``parameters.retry_after``;
* 400 "can't parse entities" → :class:`~fermix_core.channel.ChannelFormatError` (the core
  resends once as plain text);
* 5xx, timeouts, network errors and answers that are not the Bot API's JSON →
  :class:`~fermix_core.channel.ChannelTransientError`;
* 409 (a webhook is set, or another poller holds the token) → :class:`TelegramConflict`;
* anything else → :class:`TelegramRefused` with Telegram's code and description.

The token sits in the URL path, so neither the URL nor an httpx exception's text ever goes
into an error or a log line here; the adapter also registers the token with the redacting
logger, which covers httpx's own request log. No retry happens here: retrying is the core's
job (sends) or the poller's (``getUpdates``).
"""

from __future__ import annotations

import json
from typing import Any

import httpx
from fermix_core.channel import (
    ChannelError,
    ChannelFormatError,
    ChannelRateLimited,
    ChannelTransientError,
)

__all__ = [
    "TelegramApi",
    "TelegramConflict",
    "TelegramRefused",
]


_API_TIMEOUT = httpx.Timeout(30.0, connect=15.0)
_TRANSFER_TIMEOUT = httpx.Timeout(300.0, connect=15.0)
#: Added to a long poll's own ``timeout`` so the HTTP read outlives Telegram's wait.
_POLL_SLACK = 15.0


class TelegramRefused(ChannelError):
    """Telegram answered ``ok: false`` with a permanent error."""

    def __init__(self, method: str, code: int | None, description: str, message: str) -> None:
        self.method = method
        self.code = code
        self.description = description
        super().__init__(message)


class TelegramConflict(TelegramRefused):
    """409: a webhook is set on the bot, or another ``getUpdates`` poller uses the token."""

    @property
    def webhook_active(self) -> bool:
        return "webhook" in self.description.lower()


def _hint(code: int | None, description: str) -> str | None:
    lowered = description.lower()
    if code == 401:
        return (
            "the bot token is wrong or was revoked; copy it from @BotFather again and run "
            "`fermix setup --reconfigure`"
        )
    if code == 403:
        return "the bot was blocked by the user or removed from the chat"
    if "chat not found" in lowered:
        return "the bot has no chat with this id; the user must message the bot first"
    if "message to edit not found" in lowered or "message to delete not found" in lowered:
        return "the message no longer exists"
    if "reaction_invalid" in lowered:
        return "Telegram accepts only its fixed reaction emoji set"
    return None


def _encode(params: dict[str, Any]) -> dict[str, str]:
    """Multipart form fields: scalars as text, nested values JSON-encoded, None dropped."""
    fields: dict[str, str] = {}
    for key, value in params.items():
        if value is None:
            continue
        if isinstance(value, bool):
            fields[key] = "true" if value else "false"
        elif isinstance(value, dict | list):
            fields[key] = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
        else:
            fields[key] = str(value)
    return fields


class TelegramApi:
    """The handful of Bot API methods the adapter uses, on one token."""

    def __init__(self, token: str, base_url: str, *, http: httpx.AsyncClient) -> None:
        self._token = token
        self.base_url = base_url.rstrip("/")
        self.http = http

    def _url(self, method: str) -> str:
        return f"{self.base_url}/bot{self._token}/{method}"

    def file_url(self, file_path: str) -> str:
        return f"{self.base_url}/file/bot{self._token}/{file_path.lstrip('/')}"

    async def call(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        files: dict[str, tuple[str, bytes, str]] | None = None,
        timeout: httpx.Timeout | float | None = None,
    ) -> Any:
        """Call *method*; its ``result`` on success, a typed error otherwise."""
        body = {k: v for k, v in (params or {}).items() if v is not None}
        try:
            if files:
                response = await self.http.post(
                    self._url(method),
                    data=_encode(body),
                    files=files,
                    timeout=timeout or _TRANSFER_TIMEOUT,
                    follow_redirects=False,
                )
            else:
                response = await self.http.post(
                    self._url(method),
                    json=body,
                    timeout=timeout or _API_TIMEOUT,
                    follow_redirects=False,
                )
        except httpx.HTTPError as exc:
            raise ChannelTransientError(
                f"Telegram {method} did not complete ({type(exc).__name__}); retrying later"
            ) from None
        return self._answer(method, response)

    @staticmethod
    def _answer(method: str, response: httpx.Response) -> Any:
        status = response.status_code
        try:
            data = response.json()
        except ValueError:
            data = None
        if not isinstance(data, dict):
            raise ChannelTransientError(
                f"Telegram {method} answered HTTP {status} without the Bot API's JSON "
                "(check api_base_url in [fermix_channels.telegram]); retrying later"
            )
        if data.get("ok") is True:
            return data.get("result")
        code = data.get("error_code")
        code = code if isinstance(code, int) and not isinstance(code, bool) else status
        description = str(data.get("description") or f"HTTP {status}")[:300]
        parameters = data.get("parameters") if isinstance(data.get("parameters"), dict) else {}
        if code == 429:
            retry = parameters.get("retry_after")
            retry_after = float(retry) if isinstance(retry, int | float) else None
            raise ChannelRateLimited(retry_after, f"Telegram flood control on {method}")
        if code >= 500:
            raise ChannelTransientError(f"Telegram {method} failed: {description}; retrying later")
        if code == 400 and "can't parse entities" in description.lower():
            raise ChannelFormatError(f"Telegram refused the formatting of {method}: {description}")
        if code == 409:
            raise TelegramConflict(method, code, description, f"Telegram {method}: {description}")
        hint = _hint(code, description)
        message = f"Telegram refused {method}: {description}" + (f" — {hint}" if hint else "")
        raise TelegramRefused(method, code, description, message)

    # ------------------------------------------------------------------ methods

    async def get_me(self) -> dict[str, Any]:
        result = await self.call("getMe")
        if not isinstance(result, dict) or not isinstance(result.get("id"), int):
            raise ChannelTransientError("Telegram getMe answered without the bot's id")
        return result

    async def get_webhook_info(self) -> dict[str, Any]:
        result = await self.call("getWebhookInfo")
        return result if isinstance(result, dict) else {}

    async def get_updates(
        self, offset: int | None, *, timeout: int, allowed_updates: list[str], limit: int = 100
    ) -> list[dict[str, Any]]:
        result = await self.call(
            "getUpdates",
            {
                "offset": offset,
                "timeout": timeout,
                "limit": limit,
                "allowed_updates": allowed_updates,
            },
            timeout=httpx.Timeout(timeout + _POLL_SLACK, connect=15.0),
        )
        if not isinstance(result, list):
            raise ChannelTransientError("Telegram getUpdates answered without an update list")
        return [update for update in result if isinstance(update, dict)]

    async def get_file(self, file_id: str) -> dict[str, Any]:
        result = await self.call("getFile", {"file_id": file_id})
        if not isinstance(result, dict):
            raise ChannelTransientError("Telegram getFile answered without a file")
        return result

    async def download(self, file_path: str, *, limit: int) -> bytes | None:
        """A file's bytes from ``<api_base_url>/file/bot<token>/<file_path>``; ``None`` when
        it grows past *limit*, whatever size Telegram declared."""
        try:
            async with self.http.stream(
                "GET", self.file_url(file_path), timeout=_TRANSFER_TIMEOUT, follow_redirects=False
            ) as response:
                status = response.status_code
                if status == 429:
                    raise ChannelRateLimited(None, "Telegram rate-limited a file download")
                if status >= 500:
                    raise ChannelTransientError(f"Telegram file download failed: HTTP {status}")
                if status != 200:
                    raise ChannelError(f"Telegram refused a file download: HTTP {status}")
                data = bytearray()
                async for chunk in response.aiter_bytes():
                    data += chunk
                    if len(data) > limit:
                        return None
                return bytes(data)
        except httpx.HTTPError as exc:
            raise ChannelTransientError(
                f"Telegram file download did not complete ({type(exc).__name__})"
            ) from None
