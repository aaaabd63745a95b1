"""Discord's REST API over the runtime's shared httpx client, with its rate limits honoured.

Every call is ``<api_base_url><path>`` with ``Authorization: Bot <token>``; bodies are JSON,
or ``multipart/form-data`` with a ``payload_json`` part and ``files[n]`` parts when files are
uploaded. Errors become the channel's typed errors:

* 429 → :class:`~fermix_core.channel.ChannelRateLimited` with Discord's ``retry_after``
  (seconds, a float). ``global: true`` (or ``X-RateLimit-Global``) stops every request until
  then; otherwise only the route's bucket is stopped;
* 5xx, timeouts, network errors, answers that are not JSON →
  :class:`~fermix_core.channel.ChannelTransientError`;
* anything else → :class:`DiscordRefused` with Discord's JSON error ``code`` and message.

Rate limits are honoured *before* a request as well: every answer's ``X-RateLimit-Bucket``,
``X-RateLimit-Remaining`` and ``X-RateLimit-Reset-After`` headers are kept per bucket (a
bucket is shared by the routes Discord gives the same hash, per top-level resource — the
channel id), and a request whose bucket is exhausted waits for its reset instead of earning
a 429. Requests on one bucket are serialized, so two concurrent sends cannot both spend its
last slot. A wait longer than ``max_wait`` is not waited out here: it is raised as
:class:`~fermix_core.channel.ChannelRateLimited`, and the core's outbound port decides.

The token is a header, never part of a URL, and never appears in an error here.
"""

from __future__ import annotations

import json
import re
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx
from fermix_core.channel import ChannelError, ChannelRateLimited, ChannelTransientError

__all__ = ["DEFAULT_API_BASE_URL", "DiscordRefused", "DiscordRest", "route_key"]

DEFAULT_API_BASE_URL = "https://discord.com/api/v10"
_USER_AGENT = "DiscordBot (https://github.com/fermix, 0.1)"
_API_TIMEOUT = httpx.Timeout(30.0, connect=15.0)
_TRANSFER_TIMEOUT = httpx.Timeout(300.0, connect=15.0)
#: Path segments that name a top-level resource: their id is part of the bucket.
_MAJOR = ("channels", "guilds", "webhooks")
_SNOWFLAKE = re.compile(r"^[0-9]{5,25}$")


class DiscordRefused(ChannelError):
    """Discord answered with a permanent error (4xx other than 429)."""

    def __init__(self, status: int, code: int | None, detail: str, message: str) -> None:
        self.status = status
        self.code = code
        self.detail = detail
        super().__init__(message)


def route_key(method: str, path: str) -> tuple[str, str]:
    """``(route, major)``: the path with minor ids and emoji replaced, and the major id.

    ``POST /channels/1/messages`` and ``POST /channels/2/messages`` are the same route in
    different buckets; ``PATCH /channels/1/messages/9`` and ``…/messages/10`` share one.
    """
    parts = path.split("?", 1)[0].strip("/").split("/")
    major = ""
    shaped: list[str] = []
    for index, part in enumerate(parts):
        previous = parts[index - 1] if index else ""
        if previous in _MAJOR and not major:
            major = part
            shaped.append("{" + previous + "}")
        elif previous == "reactions":
            shaped.append("{emoji}")
        elif previous == "interactions" or _SNOWFLAKE.match(part):
            shaped.append("{id}")
        elif index >= 2 and parts[index - 2] == "interactions":
            shaped.append("{token}")
        else:
            shaped.append(part)
    return f"{method.upper()} /{'/'.join(shaped)}", major


def _hint(status: int, code: int | None) -> str | None:
    if status == 401:
        return (
            "the bot token is wrong or was reset; copy it again from the Developer Portal "
            "(Bot → Reset Token) and run `fermix setup --reconfigure --step discord`"
        )
    if code == 50001:
        return "the bot cannot see this channel; invite it or give it the View Channel permission"
    if code == 50013:
        return (
            "the bot lacks a permission here (Send Messages, Send Messages in Threads, Attach "
            "Files, Add Reactions or Read Message History); fix its role in the server settings"
        )
    if code == 50007:
        return "the user does not accept direct messages from this bot"
    if code in (10003, 10008):
        return "the channel or message no longer exists"
    if status == 413 or code == 40005:
        return "the upload is larger than Discord accepts for this bot"
    return None


@dataclass
class _Bucket:
    lock: anyio.Lock = field(default_factory=anyio.Lock)
    remaining: int | None = None
    #: Clock time the bucket refills.
    reset_at: float = 0.0


def _float(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


class DiscordRest:
    """The REST calls the adapter makes, on one bot token."""

    def __init__(
        self,
        token: str,
        base_url: str = DEFAULT_API_BASE_URL,
        *,
        http: httpx.AsyncClient,
        max_wait: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._token = token
        self.base_url = base_url.rstrip("/")
        self.http = http
        self.max_wait = max_wait
        self._clock = clock
        #: route -> bucket hash Discord named for it
        self._hashes: dict[str, str] = {}
        #: (hash or route, major) -> bucket state
        self._buckets: dict[tuple[str, str], _Bucket] = {}
        self._global_until = 0.0
        #: 429 answers seen (status and tests)
        self.rate_limited = 0

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bot {self._token}", "User-Agent": _USER_AGENT}

    def _bucket(self, route: str, major: str) -> _Bucket:
        key = (self._hashes.get(route, route), major)
        bucket = self._buckets.get(key)
        if bucket is None:
            if len(self._buckets) > 4096:  # old channels' buckets: drop the idle ones
                for old in [k for k, b in self._buckets.items() if not b.lock.locked()]:
                    del self._buckets[old]
            bucket = self._buckets[key] = _Bucket()
        return bucket

    async def _wait_for(self, until: float, what: str) -> None:
        wait = until - self._clock()
        if wait <= 0:
            return
        if wait > self.max_wait:
            raise ChannelRateLimited(wait, f"Discord rate limit on {what}; retry in {wait:.1f}s")
        await anyio.sleep(wait)

    async def request(
        self,
        method: str,
        path: str,
        *,
        json_body: Any = None,
        files: list[tuple[str, bytes, str]] | None = None,
        auth: bool = True,
    ) -> Any:
        """Call ``method path``; the decoded JSON answer (``None`` for 204)."""
        route, major = route_key(method, path)
        bucket = self._bucket(route, major)
        async with bucket.lock:
            await self._wait_for(self._global_until, route)
            if bucket.remaining == 0:
                await self._wait_for(bucket.reset_at, route)
            response = await self._send(method, path, route, json_body, files, auth)
            self._learn(route, major, bucket, response)
        return self._answer(route, response)

    async def _send(
        self,
        method: str,
        path: str,
        route: str,
        json_body: Any,
        files: list[tuple[str, bytes, str]] | None,
        auth: bool,
    ) -> httpx.Response:
        headers = self._headers() if auth else {"User-Agent": _USER_AGENT}
        url = self.base_url + path
        try:
            if files:
                parts = {
                    f"files[{index}]": (name, data, mime)
                    for index, (name, data, mime) in enumerate(files)
                }
                return await self.http.request(
                    method,
                    url,
                    data={"payload_json": json.dumps(json_body or {}, ensure_ascii=False)},
                    files=parts,
                    headers=headers,
                    timeout=_TRANSFER_TIMEOUT,
                    follow_redirects=False,
                )
            return await self.http.request(
                method,
                url,
                json=json_body,
                headers=headers,
                timeout=_API_TIMEOUT,
                follow_redirects=False,
            )
        except httpx.HTTPError as exc:
            raise ChannelTransientError(
                f"Discord {route} did not complete ({type(exc).__name__}); retrying later"
            ) from None

    def _learn(self, route: str, major: str, bucket: _Bucket, response: httpx.Response) -> None:
        """Keep what the rate-limit headers say about this route's bucket."""
        headers = response.headers
        name = headers.get("x-ratelimit-bucket")
        if name and self._hashes.get(route) != name:
            self._hashes[route] = name
            # Routes that share a hash share one state from now on.
            self._buckets.setdefault((name, major), bucket)
        remaining = headers.get("x-ratelimit-remaining")
        reset_after = _float(headers.get("x-ratelimit-reset-after"))
        now = self._clock()
        if remaining is not None and remaining.isdigit():
            bucket.remaining = int(remaining)
        if reset_after is not None:
            bucket.reset_at = now + reset_after
        if response.status_code == 429:
            self.rate_limited += 1
            body = _json(response)
            retry = _float(body.get("retry_after")) if isinstance(body, dict) else None
            if retry is None:
                retry = _float(headers.get("retry-after")) or 1.0
            is_global = (isinstance(body, dict) and body.get("global") is True) or (
                headers.get("x-ratelimit-global", "").lower() == "true"
            )
            if is_global:
                self._global_until = now + retry
            else:
                bucket.remaining = 0
                bucket.reset_at = max(bucket.reset_at, now + retry)

    def _answer(self, route: str, response: httpx.Response) -> Any:
        status = response.status_code
        if status == 204:
            return None
        data = _json(response)
        if status == 429:
            retry = _float(data.get("retry_after")) if isinstance(data, dict) else None
            scope = "global " if isinstance(data, dict) and data.get("global") is True else ""
            raise ChannelRateLimited(retry, f"Discord {scope}rate limit on {route}")
        if status >= 500:
            raise ChannelTransientError(f"Discord {route} failed: HTTP {status}; retrying later")
        if 200 <= status < 300:
            if data is _NOT_JSON:
                raise ChannelTransientError(
                    f"Discord {route} answered HTTP {status} without JSON (check api_base_url "
                    "in [fermix_channels.discord]); retrying later"
                )
            return data
        code = data.get("code") if isinstance(data, dict) else None
        code = code if isinstance(code, int) and not isinstance(code, bool) else None
        detail = str(data.get("message") if isinstance(data, dict) else f"HTTP {status}")[:300]
        hint = _hint(status, code)
        message = f"Discord refused {route}: {detail}" + (f" — {hint}" if hint else "")
        raise DiscordRefused(status, code, detail, message)

    # ------------------------------------------------------------------ calls

    async def gateway_bot(self) -> dict[str, Any]:
        data = await self.request("GET", "/gateway/bot")
        if not isinstance(data, dict) or not isinstance(data.get("url"), str):
            raise ChannelTransientError("Discord GET /gateway/bot answered without a url")
        return data

    async def create_message(
        self, channel_id: str, payload: dict[str, Any], files: list[tuple[str, bytes, str]] = ()
    ) -> dict[str, Any]:
        data = await self.request(
            "POST", f"/channels/{channel_id}/messages", json_body=payload, files=list(files)
        )
        if not isinstance(data, dict) or not isinstance(data.get("id"), str):
            raise ChannelTransientError("Discord answered a message send without its id")
        return data

    async def edit_message(self, channel_id: str, message_id: str, payload: dict) -> None:
        await self.request(
            "PATCH", f"/channels/{channel_id}/messages/{message_id}", json_body=payload
        )

    async def delete_message(self, channel_id: str, message_id: str) -> None:
        await self.request("DELETE", f"/channels/{channel_id}/messages/{message_id}")

    async def add_reaction(self, channel_id: str, message_id: str, emoji: str) -> None:
        encoded = urllib.parse.quote(emoji, safe=":")
        await self.request(
            "PUT", f"/channels/{channel_id}/messages/{message_id}/reactions/{encoded}/@me"
        )

    async def typing(self, channel_id: str) -> None:
        await self.request("POST", f"/channels/{channel_id}/typing")

    async def interaction_callback(self, interaction_id: str, token: str, body: dict) -> None:
        """Answer an interaction. Authorized by its own token, not the bot's."""
        await self.request(
            "POST", f"/interactions/{interaction_id}/{token}/callback", json_body=body, auth=False
        )


_NOT_JSON: Any = object()


def _json(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return _NOT_JSON
