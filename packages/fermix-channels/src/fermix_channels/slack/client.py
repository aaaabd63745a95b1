"""The Slack Web API through slack_sdk's ``AsyncWebClient``, errors mapped to the channel's.

One :class:`SlackApi` per adapter holds one aiohttp session (connections are reused across
sends), talks to ``api_base_url`` (Slack, a proxy, or a test double) and turns every failure
into the typed errors the core's outbound path acts on:

* HTTP 429 or ``ratelimited`` → :class:`~fermix_core.channel.ChannelRateLimited` with
  Slack's ``Retry-After``;
* HTTP 5xx, Slack's own transient codes, timeouts and network errors →
  :class:`~fermix_core.channel.ChannelTransientError`;
* any other ``ok: false`` → :class:`~fermix_core.channel.ChannelError` naming Slack's error
  code and, for the common ones, what to do.

The SDK's own retry handlers are switched off: retrying is the core's job, with its pacing.
The SDK logs request and response bodies at DEBUG; its logger here is held at INFO so a
message's text never reaches a log line.
"""

from __future__ import annotations

import asyncio
import logging
import urllib.parse
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
from fermix_core.channel import ChannelError, ChannelRateLimited, ChannelTransientError
from slack_sdk.errors import SlackApiError, SlackClientError, SlackRequestError
from slack_sdk.web.async_client import AsyncWebClient

__all__ = ["MAX_UPLOAD_BYTES", "SlackApi", "SlackRefused", "map_error"]

#: Slack's file size limit for files_upload_v2.
MAX_UPLOAD_BYTES = 100 * 1024 * 1024

_sdk_log = logging.getLogger("fermix_channels.slack.sdk")
_sdk_log.setLevel(logging.INFO)

#: Slack error codes that mean "try again later" rather than "this will never work".
_TRANSIENT_CODES = frozenset(
    {"internal_error", "fatal_error", "service_unavailable", "request_timeout", "team_added_to_org"}
)

#: What to do next for the refusals an operator is likely to meet.
_HINTS = {
    "invalid_auth": "the token is wrong; copy the Bot User OAuth Token into bot_token again",
    "not_authed": "no bot_token is configured in [fermix_channels.slack]",
    "token_revoked": "the bot token was revoked; reinstall the app and set the new bot_token",
    "account_inactive": "the bot token belongs to a deleted or deactivated app",
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


def _status(response: Any) -> int | None:
    for attribute in ("status_code", "status"):
        value = getattr(response, attribute, None)
        if isinstance(value, int):
            return value
    return None


def _header(response: Any, name: str) -> str | None:
    headers = getattr(response, "headers", None) or {}
    for key, value in dict(headers).items():
        if str(key).lower() == name.lower():
            return value[0] if isinstance(value, list) and value else str(value)
    return None


def _error_code(response: Any) -> str | None:
    data = getattr(response, "data", None)
    if isinstance(data, dict):
        code = data.get("error")
        return code if isinstance(code, str) else None
    return None


def _retry_after(response: Any) -> float | None:
    raw = _header(response, "retry-after")
    try:
        return max(0.0, float(raw)) if raw is not None else None
    except ValueError:
        return None


def map_error(method: str, exc: BaseException) -> ChannelError:
    """The channel error for a failed Web API call; never includes a token or message text."""
    if isinstance(exc, SlackApiError):
        response = exc.response
        status = _status(response)
        code = _error_code(response)
        if status == 429 or code == "ratelimited":
            return ChannelRateLimited(
                _retry_after(response), f"Slack rate-limited {method}; retrying later"
            )
        if (status is not None and status >= 500) or code in _TRANSIENT_CODES:
            return ChannelTransientError(
                f"Slack {method} failed with {code or f'HTTP {status}'}; retrying later"
            )
        if code is None and (status is None or status < 400):
            # Not Slack's JSON at all (a proxy's error page): worth another try.
            return ChannelTransientError(
                f"Slack {method} answered something that is not the Web API's JSON; retrying later"
            )
        label = code or f"HTTP {status}"
        hint = _HINTS.get(code or "")
        if code is None:
            hint = "check api_base_url in [fermix_channels.slack]"
        return SlackRefused(
            method, code, f"Slack refused {method}: {label}" + (f" — {hint}" if hint else "")
        )
    if isinstance(exc, aiohttp.ClientError | asyncio.TimeoutError | TimeoutError | OSError):
        return ChannelTransientError(
            f"Slack {method} did not complete ({type(exc).__name__}); retrying later"
        )
    if isinstance(exc, SlackRequestError):
        # files_upload_v2's PUT to the upload URL answered something other than 200.
        return ChannelTransientError(f"Slack {method} failed: the file upload was not accepted")
    if isinstance(exc, SlackClientError):
        return ChannelError(f"Slack {method} failed: {type(exc).__name__}")
    return ChannelError(f"Slack {method} failed: {type(exc).__name__}")


class SlackApi:
    """The Web API calls the adapter makes, each returning Slack's JSON object."""

    def __init__(self, token: str | None, base_url: str) -> None:
        self._token = token
        self.base_url = base_url
        self._session: aiohttp.ClientSession | None = None
        self._client: AsyncWebClient | None = None

    @property
    def client(self) -> AsyncWebClient:
        """The SDK client (its aiohttp session opens on first use, inside the event loop)."""
        if self._client is None or self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=15, sock_read=60)
            )
            self._client = AsyncWebClient(
                token=self._token,
                base_url=self.base_url,
                session=self._session,
                retry_handlers=[],
                logger=_sdk_log,
            )
        return self._client

    async def aclose(self) -> None:
        session, self._session, self._client = self._session, None, None
        if session is not None and not session.closed:
            await session.close()

    async def call(self, method: str, make: Callable[[AsyncWebClient], Awaitable[Any]]) -> Any:
        """Run one SDK call, mapping its failures with :func:`map_error`."""
        try:
            response = await make(self.client)
        except ChannelError:
            raise
        except Exception as exc:
            raise map_error(method, exc) from None
        data = getattr(response, "data", response)
        return data if isinstance(data, dict) else {}

    async def download(self, url: str, *, limit: int) -> bytes | None:
        """A private file's bytes (``url_private_download``, fetched with the bot token);
        ``None`` when it is larger than *limit*, whatever size Slack declared.

        The token goes only to Slack's own file hosts (``*.slack.com``) or the configured
        API host, never to a URL that merely appeared in a payload.
        """
        split = urllib.parse.urlsplit(url)
        api_host = urllib.parse.urlsplit(self.base_url).hostname
        host = split.hostname or ""
        trusted = host == api_host or (split.scheme == "https" and host.endswith(".slack.com"))
        if not trusted:
            raise ChannelError(f"refused to fetch a Slack file from untrusted host {host!r}")
        self.client  # noqa: B018 - opens the session
        assert self._session is not None
        headers = {"Authorization": f"Bearer {self._token}"} if self._token else {}
        try:
            async with self._session.get(url, headers=headers, allow_redirects=False) as response:
                if response.status == 429:
                    raise ChannelRateLimited(
                        _retry_after(response), "Slack rate-limited a download"
                    )
                if response.status >= 500:
                    raise ChannelTransientError(
                        f"Slack file download failed: HTTP {response.status}"
                    )
                if response.status != 200:  # a redirect too: the token is not followed
                    raise ChannelError(
                        f"Slack refused a file download: HTTP {response.status} — the app needs "
                        "the files:read scope"
                    )
                data = bytearray()
                async for chunk in response.content.iter_chunked(65536):
                    data += chunk
                    if len(data) > limit:
                        return None
                return bytes(data)
        except ChannelError:
            raise
        except Exception as exc:
            raise map_error("file download", exc) from None

    # ------------------------------------------------------------------ methods

    async def auth_test(self) -> dict[str, Any]:
        return await self.call("auth.test", lambda c: c.auth_test())

    async def connections_open(self, app_token: str) -> str:
        """A fresh Socket Mode websocket URL (``apps.connections.open`` with the xapp token)."""
        data = await self.call(
            "apps.connections.open", lambda c: c.apps_connections_open(app_token=app_token)
        )
        url = data.get("url")
        if not isinstance(url, str) or not url.startswith(("wss://", "ws://")):
            raise ChannelTransientError("Slack apps.connections.open returned no websocket URL")
        return url

    async def post_message(
        self, channel: str, text: str, *, thread_ts: str | None, mrkdwn: bool
    ) -> dict[str, Any]:
        return await self.call(
            "chat.postMessage",
            lambda c: c.chat_postMessage(
                channel=channel,
                text=text,
                thread_ts=thread_ts,
                mrkdwn=mrkdwn,
                unfurl_links=False,
                unfurl_media=False,
            ),
        )

    async def update(
        self, channel: str, ts: str, text: str, *, blocks: list[dict[str, Any]] | None = None
    ) -> dict[str, Any]:
        return await self.call(
            "chat.update", lambda c: c.chat_update(channel=channel, ts=ts, text=text, blocks=blocks)
        )

    async def delete(self, channel: str, ts: str) -> dict[str, Any]:
        return await self.call("chat.delete", lambda c: c.chat_delete(channel=channel, ts=ts))

    async def delete_file(self, file_id: str) -> dict[str, Any]:
        return await self.call("files.delete", lambda c: c.files_delete(file=file_id))

    async def react(self, channel: str, ts: str, name: str) -> dict[str, Any]:
        return await self.call(
            "reactions.add",
            lambda c: c.reactions_add(channel=channel, timestamp=ts, name=name),
        )

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
        """``files_upload_v2``: getUploadURLExternal → POST to the upload URL → complete."""
        return await self.call(
            "files.upload",
            lambda c: c.files_upload_v2(
                channel=channel,
                file=data,
                filename=filename,
                title=title or filename,
                initial_comment=initial_comment,
                thread_ts=thread_ts,
            ),
        )
