"""The Slack Web API over the runtime's shared httpx client, errors mapped to the channel's.

The adapter calls eight methods — ``auth.test``, ``apps.connections.open``,
``chat.postMessage``, ``chat.update``, ``chat.delete``, ``reactions.add``, ``files.delete``
and the ``files_upload_v2`` sequence (``files.getUploadURLExternal``, a POST of the bytes to
the returned upload URL, ``files.completeUploadExternal``) — plus downloads of the files
people share. That is a small API, so it is spoken here directly over the daemon's shared
``httpx.AsyncClient`` rather than through slack_sdk's ``AsyncWebClient``: the SDK's generated
clients and the aiohttp stack under them cost an idle daemon ~16 MiB of resident memory
(``bench/bench_slack.py``), against a budget of 10 MiB for Slack and WhatsApp together. The
tests point slack_sdk's own client at the loopback Slack these calls are tested against, so
that stand-in speaks what the SDK speaks.

Every method is a form-encoded POST to ``<api_base_url><method>`` with
``Authorization: Bearer <token>`` (nested values JSON-encoded, as Slack documents), and every
failure becomes one of the typed errors the core's outbound path acts on:

* HTTP 429 or ``ratelimited`` → :class:`~fermix_core.channel.ChannelRateLimited` with
  Slack's ``Retry-After``;
* HTTP 5xx, Slack's own transient codes, timeouts, network errors and answers that are not
  the Web API's JSON → :class:`~fermix_core.channel.ChannelTransientError`;
* any other ``ok: false`` → :class:`SlackRefused` naming Slack's error code and, for the
  common ones, what to do.

No retry happens here: retrying is the core's job, with its pacing. Tokens and message text
never appear in an error or a log line.
"""

from __future__ import annotations

import json
import urllib.parse
from typing import Any

import httpx
from fermix_core.channel import ChannelError, ChannelRateLimited, ChannelTransientError

__all__ = ["MAX_UPLOAD_BYTES", "SlackApi", "SlackRefused"]

#: Slack's file size limit for uploads.
MAX_UPLOAD_BYTES = 100 * 1024 * 1024

_API_TIMEOUT = httpx.Timeout(30.0, connect=15.0)
_TRANSFER_TIMEOUT = httpx.Timeout(300.0, connect=15.0)

#: Slack error codes that mean "try again later" rather than "this will never work".
_TRANSIENT_CODES = frozenset(
    {"internal_error", "fatal_error", "service_unavailable", "request_timeout", "team_added_to_org"}
)

#: What to do next for the refusals an operator is likely to meet.
_HINTS = {
    "invalid_auth": "the token is wrong; copy it from the Slack app's settings again",
    "not_authed": "no token is configured in [fermix_channels.slack]",
    "token_revoked": "the token was revoked; reinstall the app and set the new token",
    "account_inactive": "the token belongs to a deleted or deactivated app",
    "channel_not_found": "the bot cannot see this channel; invite it with /invite @<bot>",
    "not_in_channel": "invite the bot to the channel with /invite @<bot>",
    "is_archived": "the channel is archived",
    "missing_scope": "add the missing scope on the app's OAuth & Permissions page and reinstall",
    "msg_too_long": "the message exceeds Slack's 40,000-character limit",
    "no_text": "Slack refused an empty message",
    "message_not_found": "the message no longer exists",
    "cant_update_message": "only messages the bot posted can be edited",
    "cant_delete_message": "only messages the bot posted can be deleted",
    "invalid_name": "reaction names must be Slack shortcodes such as thumbsup (no colons)",
    "too_many_reactions": "the message already carries Slack's maximum number of reactions",
}


class SlackRefused(ChannelError):
    """Slack answered ``ok: false`` with a permanent error; ``code`` is Slack's error code."""

    def __init__(self, method: str, code: str | None, message: str) -> None:
        self.method = method
        self.code = code
        super().__init__(message)


def _retry_after(response: httpx.Response) -> float | None:
    raw = response.headers.get("retry-after")
    try:
        return max(0.0, float(raw)) if raw is not None else None
    except ValueError:
        return None


def _form(params: dict[str, Any]) -> dict[str, str]:
    """Slack's form encoding: booleans as ``true``/``false``, nested values as JSON."""
    form: dict[str, str] = {}
    for key, value in params.items():
        if value is None:
            continue
        if isinstance(value, bool):
            form[key] = "true" if value else "false"
        elif isinstance(value, list | dict):
            form[key] = json.dumps(value, separators=(",", ":"))
        else:
            form[key] = str(value)
    return form


class SlackApi:
    """The Web API calls the adapter makes, each returning Slack's JSON object.

    *http* is the runtime's shared client; without one (a standalone use) the API opens
    its own and :meth:`aclose` closes it.
    """

    def __init__(self, token: str | None, base_url: str, *, http: httpx.AsyncClient | None = None):
        self._token = token
        self.base_url = base_url if base_url.endswith("/") else base_url + "/"
        self._http = http
        self._own: httpx.AsyncClient | None = None

    @property
    def http(self) -> httpx.AsyncClient:
        if self._http is not None:
            return self._http
        if self._own is None or self._own.is_closed:
            self._own = httpx.AsyncClient()
        return self._own

    async def aclose(self) -> None:
        own, self._own = self._own, None
        if own is not None:
            await own.aclose()

    # ------------------------------------------------------------------ the wire

    async def call(
        self, method: str, params: dict[str, Any] | None = None, *, token: str | None = None
    ) -> dict[str, Any]:
        """One Web API method; Slack's JSON object, or a typed error."""
        bearer = token if token is not None else self._token
        headers = {"Authorization": f"Bearer {bearer}"} if bearer else {}
        try:
            response = await self.http.post(
                self.base_url + method,
                data=_form(params or {}),
                headers=headers,
                timeout=_API_TIMEOUT,
                follow_redirects=False,
            )
        except httpx.HTTPError as exc:
            raise ChannelTransientError(
                f"Slack {method} did not complete ({type(exc).__name__}); retrying later"
            ) from None
        return self._answer(method, response)

    @staticmethod
    def _answer(method: str, response: httpx.Response) -> dict[str, Any]:
        status = response.status_code
        try:
            data = response.json()
        except ValueError:
            data = None
        code = data.get("error") if isinstance(data, dict) else None
        code = code if isinstance(code, str) else None
        if status == 429 or code == "ratelimited":
            raise ChannelRateLimited(
                _retry_after(response), f"Slack rate-limited {method}; retrying later"
            )
        if status >= 500 or code in _TRANSIENT_CODES:
            raise ChannelTransientError(
                f"Slack {method} failed with {code or f'HTTP {status}'}; retrying later"
            )
        if isinstance(data, dict) and data.get("ok") is True and status == 200:
            return data
        if code is None and status < 400:
            # Not Slack's JSON at all (a proxy's error page): worth another try.
            raise ChannelTransientError(
                f"Slack {method} answered something that is not the Web API's JSON; retrying later"
            )
        hint = _HINTS.get(code or "") or (
            None if code else "check api_base_url in [fermix_channels.slack]"
        )
        label = code or f"HTTP {status}"
        raise SlackRefused(
            method, code, f"Slack refused {method}: {label}" + (f" — {hint}" if hint else "")
        )

    # ------------------------------------------------------------------ methods

    async def auth_test(self) -> dict[str, Any]:
        return await self.call("auth.test")

    async def connections_open(self, app_token: str) -> str:
        """A fresh Socket Mode websocket URL (``apps.connections.open`` with the xapp token)."""
        data = await self.call("apps.connections.open", token=app_token)
        url = data.get("url")
        if not isinstance(url, str) or not url.startswith(("wss://", "ws://")):
            raise ChannelTransientError("Slack apps.connections.open returned no websocket URL")
        return url

    async def post_message(
        self, channel: str, text: str, *, thread_ts: str | None, mrkdwn: bool
    ) -> dict[str, Any]:
        return await self.call(
            "chat.postMessage",
            {
                "channel": channel,
                "text": text,
                "thread_ts": thread_ts,
                "mrkdwn": mrkdwn,
                "unfurl_links": False,
                "unfurl_media": False,
            },
        )

    async def update(
        self, channel: str, ts: str, text: str, *, blocks: list[dict[str, Any]] | None = None
    ) -> dict[str, Any]:
        # An update without blocks clears any the message had, so plain → formatted edits
        # go back to text rendering.
        return await self.call(
            "chat.update", {"channel": channel, "ts": ts, "text": text, "blocks": blocks or []}
        )

    async def delete(self, channel: str, ts: str) -> dict[str, Any]:
        return await self.call("chat.delete", {"channel": channel, "ts": ts})

    async def delete_file(self, file_id: str) -> dict[str, Any]:
        return await self.call("files.delete", {"file": file_id})

    async def react(self, channel: str, ts: str, name: str) -> dict[str, Any]:
        return await self.call("reactions.add", {"channel": channel, "timestamp": ts, "name": name})

    async def upload(
        self,
        channel: str,
        data: bytes,
        *,
        filename: str,
        title: str | None,
        initial_comment: str | None,
        thread_ts: str | None,
    ) -> dict[str, Any]:
        """Slack's external upload: reserve a URL, POST the bytes there, complete the share."""
        reserved = await self.call(
            "files.getUploadURLExternal", {"filename": filename, "length": len(data)}
        )
        upload_url, file_id = reserved.get("upload_url"), reserved.get("file_id")
        if not isinstance(upload_url, str) or not isinstance(file_id, str):
            raise ChannelTransientError("Slack files.getUploadURLExternal returned no upload URL")
        try:
            sent = await self.http.post(
                upload_url,
                content=data,
                headers={"Content-Type": "application/octet-stream"},
                timeout=_TRANSFER_TIMEOUT,
                follow_redirects=False,
            )
        except httpx.HTTPError as exc:
            raise ChannelTransientError(
                f"Slack file upload did not complete ({type(exc).__name__}); retrying later"
            ) from None
        if sent.status_code != 200:
            raise ChannelTransientError(
                f"Slack file upload failed: HTTP {sent.status_code}; retrying later"
            )
        return await self.call(
            "files.completeUploadExternal",
            {
                "files": [{"id": file_id, "title": title or filename}],
                "channel_id": channel,
                "initial_comment": initial_comment,
                "thread_ts": thread_ts,
            },
        )

    async def download(self, url: str, *, limit: int) -> bytes | None:
        """A private file's bytes (``url_private_download``, fetched with the bot token);
        ``None`` when it is larger than *limit*, whatever size Slack declared.

        The token goes only to Slack's own file hosts (``https://*.slack.com``) or the
        configured API host, never to a URL that merely appeared in a payload, and a
        redirect is not followed.
        """
        split = urllib.parse.urlsplit(url)
        api_host = urllib.parse.urlsplit(self.base_url).hostname
        host = split.hostname or ""
        trusted = host == api_host or (split.scheme == "https" and host.endswith(".slack.com"))
        if not trusted:
            raise ChannelError(f"refused to fetch a Slack file from untrusted host {host!r}")
        headers = {"Authorization": f"Bearer {self._token}"} if self._token else {}
        try:
            async with self.http.stream(
                "GET", url, headers=headers, timeout=_TRANSFER_TIMEOUT, follow_redirects=False
            ) as response:
                status = response.status_code
                if status == 429:
                    raise ChannelRateLimited(
                        _retry_after(response), "Slack rate-limited a download"
                    )
                if status >= 500:
                    raise ChannelTransientError(f"Slack file download failed: HTTP {status}")
                if status != 200:
                    raise ChannelError(
                        f"Slack refused a file download: HTTP {status} — the app needs the "
                        "files:read scope"
                    )
                data = bytearray()
                async for chunk in response.aiter_bytes():
                    data += chunk
                    if len(data) > limit:
                        return None
                return bytes(data)
        except httpx.HTTPError as exc:
            raise ChannelTransientError(
                f"Slack file download did not complete ({type(exc).__name__})"
            ) from None
