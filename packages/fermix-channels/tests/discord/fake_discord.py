"""A loopback Discord: the Gateway as a real websocket server and REST on a real HTTP socket.

Gateway (``ws://127.0.0.1:<port>/``, API v10 JSON):

* HELLO (op 10) with ``heartbeat_interval`` on connect; HEARTBEAT (op 1) answered with
  HEARTBEAT_ACK (op 11) unless :meth:`FakeDiscord.stop_acks` was called.
* IDENTIFY (op 2): a wrong token closes 4004; asking for the Message Content intent while
  the app does not have it enabled (:attr:`message_content_enabled`) closes 4014. Otherwise
  a new session: READY (``session_id``, ``resume_gateway_url`` on its own path ``/resume``,
  ``user``, ``application.flags``), then one GUILD_CREATE per guild (with its threads).
* RESUME (op 6): an unknown session answers INVALID_SESSION (op 9, ``d: false``); a known one
  replays every event after the given ``seq``, then RESUMED. Events dispatched while no
  connection is open are kept for the session, as Discord does within the resume window.
* Any other op before IDENTIFY closes 4003 (not authenticated); a frame that is not JSON
  closes 4002 (decode error).
* :meth:`drop` cuts the TCP connection without a close frame, :meth:`request_reconnect`
  sends op 7, :meth:`invalidate` sends op 9, :meth:`send_raw` sends any frame.

REST (``<url>/api/v10``), ``Authorization: Bot <token>`` (else 401):

* ``GET /gateway/bot``, ``GET /users/@me``, ``GET /oauth2/applications/@me``;
  ``POST /channels/{id}/messages`` (JSON, or multipart with ``payload_json`` and
  ``files[n]``; content over 2,000 characters is 400 code 50035, an empty message 400 code
  50006, a file over 10 MB 413 code 40005); ``PATCH`` / ``DELETE``
  ``/channels/{id}/messages/{id}`` (unknown: 404 code 10008); ``PUT
  …/reactions/{emoji}/@me``; ``POST /channels/{id}/typing``; ``POST
  /interactions/{id}/{token}/callback`` (the interaction's own token, no bot auth needed;
  204, or the callback response object with ``?with_response=true``).
* Rate limits as Discord sends them: every answer carries ``X-RateLimit-Bucket``,
  ``-Limit``, ``-Remaining``, ``-Reset-After``. :meth:`exhaust` makes a route's next answer
  say ``Remaining: 0`` for a while; :meth:`rate_limit` answers the next request 429 with
  ``retry_after`` (``global: true`` for the global limit). A request that arrives while its
  bucket (or the global limit) is still stopped gets 429 again and is counted in
  :attr:`violations` — a client that honours the limits never earns one.
* ``GET /attachments/<name>`` serves files added with :meth:`add_file`.

Waiting is on events, never on sleeps.
"""

from __future__ import annotations

import contextlib
import email.parser
import email.policy
import itertools
import json
import time
import urllib.parse
from collections import defaultdict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
from fermix_core.testing.loopback import LoopbackServer, RecordedRequest, Reply
from websockets.asyncio.server import ServerConnection, serve
from websockets.exceptions import ConnectionClosed

TOKEN = "MTEwMDAwMDAwMDAwMDAwMDAwMQ.GfakeX.loopback-only-discord-bot-token-000"
APP_ID = "1100000000000000001"
BOT_ID = "1100000000000000001"
OWNER_ID = "2200000000000000001"
GUEST_ID = "2200000000000000002"
STRANGER_ID = "6600000000000000001"
OTHER_BOT_ID = "7700000000000000001"
DM_CHANNEL = "3300000000000000001"
STRANGER_DM = "3300000000000000009"
GUILD_ID = "4400000000000000001"
GUILD_CHANNEL = "5500000000000000001"
THREAD_ID = "5500000000000000002"
MESSAGE_CONTENT_FLAG = 1 << 18
_MB = 1024 * 1024
UPLOAD_CAP = 10 * _MB


@dataclass
class Session:
    session_id: str
    seq: int = 0
    events: list[dict[str, Any]] = field(default_factory=list)
    connection: ServerConnection | None = None


@dataclass
class _Limit:
    until: float = 0.0


def _error(status: int, code: int, message: str, **extra: Any) -> Reply:
    return Reply(status=status, body={"code": code, "message": message, **extra})


class FakeDiscord:
    """``async with FakeDiscord() as fake:`` — gateway + REST on loopback."""

    def __init__(
        self,
        *,
        token: str = TOKEN,
        heartbeat_interval: float = 5.0,
        fallback: Callable[[RecordedRequest], Awaitable[Reply]] | None = None,
    ) -> None:
        self.token = token
        self.heartbeat_interval = heartbeat_interval
        self.fallback = fallback
        self.rest = LoopbackServer(self._handle)
        self.message_content_enabled = True
        #: Close every IDENTIFY with 4004 (a token the gateway refuses).
        self.reject_identify = False
        self.acks = True
        self.bot = {
            "id": BOT_ID,
            "username": "fermix-test",
            "global_name": None,
            "discriminator": "0",
            "avatar": None,
            "bot": True,
        }
        self.guilds: list[dict[str, Any]] = [self._guild()]
        self.sessions: dict[str, Session] = {}
        self.current: Session | None = None
        self.identifies = 0
        self.resumes: list[dict[str, Any]] = []
        self.heartbeats: list[Any] = []
        self.frames: list[dict[str, Any]] = []
        self.connects: list[str] = []
        self.closes: list[int | None] = []
        self.identify_payloads: list[dict[str, Any]] = []
        #: channel id -> message id -> message as Discord holds it
        self.messages: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
        self.edits: list[tuple[str, str, dict[str, Any]]] = []
        self.deletes: list[tuple[str, str]] = []
        self.reactions: list[tuple[str, str, str]] = []
        self.typing: list[str] = []
        self.callbacks: list[dict[str, Any]] = []
        self.requests: list[tuple[str, str]] = []
        self.files: dict[str, tuple[bytes, str]] = {}
        self.downloads: list[str] = []
        self.interactions: dict[str, str] = {}
        self.violations = 0
        self.rate_limited = 0
        self._buckets: dict[tuple[str, str], _Limit] = defaultdict(_Limit)
        self._global = _Limit()
        self._exhaust: dict[str, float] = {}
        self._limit_next: list[tuple[str, float, bool]] = []
        self._ids = itertools.count(1_200_000_000_000_000_000)
        self._session_ids = itertools.count(1)
        self._changed = anyio.Event()
        self._server: Any = None
        self.ws_port = 0

    def _guild(self) -> dict[str, Any]:
        """A GUILD_CREATE payload with the fields Discord sends (bar the many optional ones)."""
        overwrites: list[dict[str, Any]] = []
        return {
            "id": GUILD_ID,
            "name": "Test server",
            "icon": None,
            "splash": None,
            "discovery_splash": None,
            "owner_id": OWNER_ID,
            "afk_channel_id": None,
            "afk_timeout": 300,
            "verification_level": 0,
            "default_message_notifications": 0,
            "explicit_content_filter": 0,
            "roles": [
                {
                    "id": GUILD_ID,  # @everyone has the guild's id
                    "name": "@everyone",
                    "color": 0,
                    "hoist": False,
                    "icon": None,
                    "unicode_emoji": None,
                    "position": 0,
                    "permissions": "1071698660929",
                    "managed": False,
                    "mentionable": False,
                    "flags": 0,
                }
            ],
            "emojis": [],
            "stickers": [],
            "features": [],
            "mfa_level": 0,
            "application_id": None,
            "system_channel_id": GUILD_CHANNEL,
            "system_channel_flags": 0,
            "rules_channel_id": None,
            "vanity_url_code": None,
            "description": None,
            "banner": None,
            "premium_tier": 0,
            "premium_subscription_count": 0,
            "preferred_locale": "en-US",
            "public_updates_channel_id": None,
            "nsfw_level": 0,
            "premium_progress_bar_enabled": False,
            "joined_at": "2026-01-01T00:00:00.000000+00:00",
            "large": False,
            "unavailable": False,
            "member_count": 2,
            "members": [],
            "voice_states": [],
            "presences": [],
            "stage_instances": [],
            "guild_scheduled_events": [],
            "channels": [
                {
                    "id": GUILD_CHANNEL,
                    "type": 0,
                    "guild_id": GUILD_ID,
                    "name": "general",
                    "position": 0,
                    "permission_overwrites": overwrites,
                    "parent_id": None,
                    "topic": None,
                    "nsfw": False,
                    "last_message_id": None,
                    "rate_limit_per_user": 0,
                    "flags": 0,
                }
            ],
            "threads": [
                {
                    "id": THREAD_ID,
                    "type": 11,
                    "guild_id": GUILD_ID,
                    "parent_id": GUILD_CHANNEL,
                    "owner_id": OWNER_ID,
                    "name": "a thread",
                    "last_message_id": None,
                    "rate_limit_per_user": 0,
                    "message_count": 0,
                    "member_count": 1,
                    "total_message_sent": 0,
                    "flags": 0,
                    "thread_metadata": {
                        "archived": False,
                        "auto_archive_duration": 1440,
                        "archive_timestamp": "2026-12-01T00:00:00.000000+00:00",
                        "locked": False,
                        "create_timestamp": "2026-12-01T00:00:00.000000+00:00",
                    },
                }
            ],
        }

    # ------------------------------------------------------------------ lifecycle

    @property
    def url(self) -> str:
        return self.rest.url

    @property
    def api_base_url(self) -> str:
        return f"{self.rest.url}/api/v10"

    @property
    def gateway_url(self) -> str:
        return f"ws://127.0.0.1:{self.ws_port}/"

    async def __aenter__(self) -> FakeDiscord:
        await self.rest.__aenter__()
        self._server = await serve(self._connection, "127.0.0.1", 0, max_size=2**22)
        self.ws_port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._server.close()
        await self._server.wait_closed()
        await self.rest.__aexit__(*exc)

    def _notify(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()

    async def until(self, condition: Callable[[], Any], timeout: float = 15) -> None:
        """Wait (on events) until *condition()* holds; *timeout* is a failure bound."""
        with anyio.fail_after(timeout):
            while True:
                changed = self._changed
                if condition():
                    return
                await changed.wait()

    # ------------------------------------------------------------------ gateway

    async def _send(self, connection: ServerConnection, payload: dict[str, Any]) -> None:
        await connection.send(json.dumps(payload))

    async def _connection(self, connection: ServerConnection) -> None:
        self.connects.append(connection.request.path if connection.request else "")
        self._notify()
        session: Session | None = None
        try:
            await self._send(
                connection,
                {"op": 10, "d": {"heartbeat_interval": int(self.heartbeat_interval * 1000)}},
            )
            async for frame in connection:
                try:
                    message = json.loads(frame)
                except ValueError:
                    await connection.close(4002, "Error while decoding payload.")
                    return
                if not isinstance(message, dict):
                    await connection.close(4002, "Error while decoding payload.")
                    return
                self.frames.append(message)
                op, data = message.get("op"), message.get("d")
                if op == 1:
                    self.heartbeats.append(data)
                    if self.acks:
                        await self._send(connection, {"op": 11})
                elif op == 2:
                    session = await self._identify(connection, data)
                    if session is None:
                        return
                elif op == 6:
                    session = await self._resume(connection, data)
                elif session is None:
                    await connection.close(4003, "Not authenticated.")
                    return
                self._notify()
        except ConnectionClosed:
            pass
        finally:
            self.closes.append(connection.close_code)
            if session is not None and session.connection is connection:
                session.connection = None
            self._notify()

    async def _identify(self, connection: ServerConnection, data: Any) -> Session | None:
        self.identifies += 1
        self.identify_payloads.append(data if isinstance(data, dict) else {})
        if self.reject_identify or not isinstance(data, dict) or data.get("token") != self.token:
            await connection.close(4004, "Authentication failed.")
            return None
        intents = data.get("intents")
        if not isinstance(intents, int):
            await connection.close(4013, "Invalid intent(s).")
            return None
        if intents & (1 << 15) and not self.message_content_enabled:
            await connection.close(4014, "Disallowed intent(s).")
            return None
        session = Session(f"fake-session-{next(self._session_ids)}")
        self.sessions[session.session_id] = session
        self.current = session
        session.connection = connection
        flags = MESSAGE_CONTENT_FLAG if self.message_content_enabled else 0
        await self._dispatch(
            session,
            "READY",
            {
                "v": 10,
                "user": self.bot,
                "guilds": [{"id": g["id"], "unavailable": True} for g in self.guilds],
                "session_id": session.session_id,
                "resume_gateway_url": f"ws://127.0.0.1:{self.ws_port}/resume",
                "shard": [0, 1],
                "application": {"id": APP_ID, "flags": flags},
            },
        )
        for guild in self.guilds:
            await self._dispatch(session, "GUILD_CREATE", guild)
        return session

    async def _resume(self, connection: ServerConnection, data: Any) -> Session | None:
        self.resumes.append(data if isinstance(data, dict) else {})
        session = self.sessions.get(data.get("session_id")) if isinstance(data, dict) else None
        if session is None or data.get("token") != self.token:
            await self._send(connection, {"op": 9, "d": False})
            return None
        seq = data.get("seq") or 0
        session.connection = connection
        self.current = session
        for event in session.events:
            if event["s"] > seq:
                await self._send(connection, event)
        await self._dispatch(session, "RESUMED", {"_trace": ["fake-gateway"]})
        return session

    async def _dispatch(self, session: Session, name: str, data: Any) -> dict[str, Any]:
        session.seq += 1
        event = {"op": 0, "t": name, "s": session.seq, "d": data}
        session.events.append(event)
        if session.connection is not None:
            with contextlib.suppress(ConnectionClosed):  # kept for the resume
                await self._send(session.connection, event)
        self._notify()
        return event

    async def dispatch(self, name: str, data: Any) -> dict[str, Any]:
        """Send an event on the current session (kept for a resume when no socket is open)."""
        assert self.current is not None, "no session: the client never identified"
        return await self._dispatch(self.current, name, data)

    async def wait_ready(self, identifies: int = 1, timeout: float = 15) -> None:
        await self.until(lambda: self.identifies >= identifies and self.connected, timeout)

    @property
    def connected(self) -> bool:
        return self.current is not None and self.current.connection is not None

    def _live(self) -> ServerConnection:
        assert self.current is not None and self.current.connection is not None
        return self.current.connection

    async def drop(self) -> None:
        """Cut the socket with no close frame (a network drop)."""
        connection = self._live()
        self.current.connection = None  # type: ignore[union-attr]
        connection.transport.abort()
        self._notify()

    async def request_reconnect(self) -> None:
        await self._send(self._live(), {"op": 7, "d": None})

    async def invalidate(self, resumable: bool) -> None:
        connection = self._live()
        if not resumable:
            self.sessions.pop(self.current.session_id, None)  # type: ignore[union-attr]
        await self._send(connection, {"op": 9, "d": resumable})

    async def close_with(self, code: int, reason: str = "") -> None:
        await self._live().close(code, reason)

    async def send_raw(self, frame: str | bytes) -> None:
        await self._live().send(frame)

    def stop_acks(self) -> None:
        self.acks = False

    # ------------------------------------------------------------------ driving

    def user(self, user_id: str = OWNER_ID, **extra: Any) -> dict[str, Any]:
        return {
            "id": user_id,
            "username": extra.pop("username", "ada"),
            "global_name": extra.pop("global_name", "Ada Lovelace"),
            "discriminator": "0",
            "avatar": None,
            **extra,
        }

    @staticmethod
    def _member(user: dict[str, Any]) -> dict[str, Any]:
        return {
            "user": user,
            "nick": None,
            "avatar": None,
            "roles": [],
            "joined_at": "2026-01-01T00:00:00.000000+00:00",
            "premium_since": None,
            "deaf": False,
            "mute": False,
            "flags": 0,
            "pending": False,
            "permissions": "562949953421311",
            "communication_disabled_until": None,
        }

    def message_payload(
        self,
        text: str = "hello",
        *,
        sender: str = OWNER_ID,
        channel: str = DM_CHANNEL,
        guild: str | None = None,
        bot: bool = False,
        mentions: list[str] | None = None,
        reply_to: dict[str, Any] | None = None,
        attachments: list[dict[str, Any]] | None = None,
        **extra: Any,
    ) -> dict[str, Any]:
        author = self.user(sender)
        if bot:
            author["bot"] = True
        message_id = str(next(self._ids))
        message: dict[str, Any] = {
            "id": message_id,
            "channel_id": channel,
            "author": author,
            "content": text,
            "timestamp": "2026-12-01T12:00:00.000000+00:00",
            "edited_timestamp": None,
            "tts": False,
            "mention_everyone": False,
            "mentions": [self.bot if m == BOT_ID else self.user(m) for m in mentions or []],
            "mention_roles": [],
            "attachments": attachments or [],
            "embeds": [],
            "pinned": False,
            "type": 19 if reply_to else 0,
            **extra,
        }
        if guild is not None:
            message["guild_id"] = guild
            member = self._member(author)
            del member["user"]  # a message's member object leaves the user out
            message["member"] = member
        if reply_to is not None:
            message["message_reference"] = {"message_id": reply_to["id"], "channel_id": channel}
            message["referenced_message"] = reply_to
        return message

    async def message(self, text: str = "hello", **kwargs: Any) -> dict[str, Any]:
        payload = self.message_payload(text, **kwargs)
        await self.dispatch("MESSAGE_CREATE", payload)
        return payload

    async def tap(
        self,
        custom_id: str,
        *,
        sender: str = OWNER_ID,
        channel: str = DM_CHANNEL,
        guild: str | None = None,
        bot: bool = False,
    ) -> dict[str, Any]:
        interaction_id = str(next(self._ids))
        token = f"interaction-token-{interaction_id}"
        self.interactions[interaction_id] = token
        user = self.user(sender)
        if bot:
            user["bot"] = True
        data: dict[str, Any] = {
            "id": interaction_id,
            "application_id": APP_ID,
            "type": 3,
            "token": token,
            "version": 1,
            "channel_id": channel,
            "channel": {"id": channel, "type": 1 if guild is None else 0},
            "data": {"custom_id": custom_id, "component_type": 2},
            "app_permissions": "562949953421311",
            "locale": "en-US",
            "entitlements": [],
            "authorizing_integration_owners": {"0": guild} if guild else {"1": sender},
            "context": 0 if guild else 1,
            "attachment_size_limit": UPLOAD_CAP,
        }
        if guild is not None:
            data["guild_locale"] = "en-US"
            data["guild"] = {"id": guild, "locale": "en-US", "features": []}
        if guild is not None:
            data["guild_id"] = guild
            data["member"] = self._member(user)
        else:
            data["user"] = user
        await self.dispatch("INTERACTION_CREATE", data)
        return data

    def add_file(self, name: str, data: bytes, mime: str) -> dict[str, Any]:
        """An attachment object for a message, served from this fake."""
        self.files[name] = (data, mime)
        return {
            "id": str(next(self._ids)),
            "filename": name,
            "size": len(data),
            "url": f"{self.url}/attachments/{name}",
            "proxy_url": f"{self.url}/attachments/{name}",
            "content_type": mime,
        }

    def exhaust(self, route_prefix: str, reset_after: float) -> None:
        """The next answer on a route starting with *route_prefix* says Remaining: 0."""
        self._exhaust[route_prefix] = reset_after

    def rate_limit(self, route_prefix: str, retry_after: float, *, global_: bool = False) -> None:
        """Answer the next request on *route_prefix* with a 429."""
        self._limit_next.append((route_prefix, retry_after, global_))

    def sent(self, channel_id: str) -> list[dict[str, Any]]:
        return list(self.messages.get(str(channel_id), {}).values())

    def texts(self, channel_id: str) -> list[str]:
        return [m["content"] for m in self.sent(channel_id)]

    # ------------------------------------------------------------------ REST

    async def _handle(self, request: RecordedRequest) -> Reply:
        path = urllib.parse.urlsplit(request.path).path
        if path.startswith("/attachments/"):
            return self._attachment(path)
        if not path.startswith("/api/v10/"):
            if self.fallback is not None:
                return await self.fallback(request)
            return _error(404, 0, "404: Not Found")
        route = path[len("/api/v10") :]
        self.requests.append((request.method, route))
        try:
            reply = self._limited(request.method, route)
            if reply is None:
                reply = self._route(request, route)
        finally:
            self._notify()
        return reply

    def _attachment(self, path: str) -> Reply:
        name = urllib.parse.unquote(path.rsplit("/", 1)[-1])
        self.downloads.append(name)
        if name not in self.files:
            return Reply(status=404, body=b"not found")
        data, mime = self.files[name]
        return Reply(body=data, headers={"content-type": mime})

    @staticmethod
    def _bucket_of(method: str, route: str) -> tuple[str, str]:
        parts = route.strip("/").split("/")
        major = parts[1] if len(parts) > 1 and parts[0] in ("channels", "guilds") else ""
        shape = "/".join(
            "{id}" if p.isdigit() and i != 1 else p for i, p in enumerate(parts) if i != 1
        )
        return f"{method} {parts[0]}/{shape}", major

    def _limited(self, method: str, route: str) -> Reply | None:
        now = time.monotonic()
        bucket = self._buckets[self._bucket_of(method, route)]
        if self._global.until > now or bucket.until > now:
            self.violations += 1
            wait = max(self._global.until, bucket.until) - now
            return self._429(wait, self._global.until > now)
        for index, (prefix, retry_after, global_) in enumerate(self._limit_next):
            if f"{method} {route}".startswith(prefix) or route.startswith(prefix):
                del self._limit_next[index]
                if global_:
                    self._global.until = now + retry_after
                else:
                    bucket.until = now + retry_after
                return self._429(retry_after, global_)
        return None

    def _429(self, retry_after: float, global_: bool) -> Reply:
        self.rate_limited += 1
        headers = {"retry-after": str(max(1, round(retry_after)))}
        if global_:
            headers["x-ratelimit-global"] = "true"
            headers["x-ratelimit-scope"] = "global"
        else:
            headers.update(
                {
                    "x-ratelimit-limit": "5",
                    "x-ratelimit-remaining": "0",
                    "x-ratelimit-reset-after": f"{retry_after:.3f}",
                    "x-ratelimit-scope": "user",
                }
            )
        return Reply(
            status=429,
            headers=headers,
            body={"message": "You are being rate limited.", "retry_after": retry_after,
                  "global": global_, "code": 0},
        )  # fmt: skip

    def _ok(self, method: str, route: str, body: Any = None, status: int = 200) -> Reply:
        name, major = self._bucket_of(method, route)
        remaining, reset_after = "4", "5.000"
        for prefix, wait in list(self._exhaust.items()):
            if f"{method} {route}".startswith(prefix) or route.startswith(prefix):
                del self._exhaust[prefix]
                remaining, reset_after = "0", f"{wait:.3f}"
                self._buckets[(name, major)].until = time.monotonic() + wait
        headers = {
            "x-ratelimit-bucket": f"fake{abs(hash(name)) % 10**8:08d}",
            "x-ratelimit-limit": "5",
            "x-ratelimit-remaining": remaining,
            "x-ratelimit-reset-after": reset_after,
        }
        if status == 204:
            return Reply(status=204, headers=headers)
        return Reply(status=status, headers=headers, body=body)

    def _route(self, request: RecordedRequest, route: str) -> Reply:
        method = request.method
        parts = route.strip("/").split("/")
        if parts[0] == "interactions" and len(parts) == 4 and parts[3] == "callback":
            return self._callback(request, parts[1], parts[2], route)
        if request.header("authorization") != f"Bot {self.token}":
            return _error(401, 0, "401: Unauthorized")
        if method == "GET" and route == "/gateway/bot":
            return self._ok(
                method,
                route,
                {
                    "url": self.gateway_url.rstrip("/"),
                    "shards": 1,
                    "session_start_limit": {
                        "total": 1000,
                        "remaining": 999,
                        "reset_after": 14400000,
                        "max_concurrency": 1,
                    },
                },
            )
        if method == "GET" and route == "/users/@me":
            return self._ok(method, route, {**self.bot, "flags": 0, "verified": True})
        if method == "GET" and route == "/oauth2/applications/@me":
            flags = MESSAGE_CONTENT_FLAG if self.message_content_enabled else 0
            return self._ok(
                method,
                route,
                {
                    "id": APP_ID,
                    "name": "Fermix test",
                    "icon": None,
                    "description": "",
                    "bot_public": False,
                    "bot_require_code_grant": False,
                    "owner": self.user(OWNER_ID),
                    "team": None,
                    "verify_key": "0" * 64,
                    "flags": flags,
                    "bot": self.bot,
                },
            )
        if parts[0] != "channels" or len(parts) < 3:
            return _error(404, 0, "404: Not Found")
        channel = parts[1]
        if method == "POST" and parts[2:] == ["typing"]:
            self.typing.append(channel)
            return self._ok(method, route, status=204)
        if parts[2] != "messages":
            return _error(404, 0, "404: Not Found")
        if method == "POST" and len(parts) == 3:
            return self._create(request, channel, route)
        if len(parts) < 4:
            return _error(405, 0, "405: Method Not Allowed")
        message_id = parts[3]
        known = self.messages.get(channel, {})
        if message_id not in known and not (len(parts) > 4 and parts[4] == "reactions"):
            return _error(404, 10008, "Unknown Message")
        if method == "PATCH" and len(parts) == 4:
            body = request.json()
            content = body.get("content")
            if isinstance(content, str) and len(content) > 2000:
                return self._too_long()
            known[message_id] = {**known[message_id], **body}
            self.edits.append((channel, message_id, body))
            return self._ok(method, route, known[message_id])
        if method == "DELETE" and len(parts) == 4:
            del known[message_id]
            self.deletes.append((channel, message_id))
            return self._ok(method, route, status=204)
        if method == "PUT" and len(parts) == 7 and parts[4] == "reactions" and parts[6] == "@me":
            emoji = urllib.parse.unquote(parts[5])
            self.reactions.append((channel, message_id, emoji))
            return self._ok(method, route, status=204)
        return _error(404, 0, "404: Not Found")

    @staticmethod
    def _too_long() -> Reply:
        return _error(
            400,
            50035,
            "Invalid Form Body",
            errors={
                "content": {
                    "_errors": [
                        {
                            "code": "BASE_TYPE_MAX_LENGTH",
                            "message": "Must be 2000 or fewer in length.",
                        }
                    ]
                }
            },
        )

    def _create(self, request: RecordedRequest, channel: str, route: str) -> Reply:
        ctype = request.header("content-type") or ""
        files: list[tuple[str, bytes]] = []
        if ctype.startswith("multipart/form-data"):
            raw = b"Content-Type: " + ctype.encode() + b"\r\n\r\n" + request.body
            parsed = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(raw)
            body: dict[str, Any] = {}
            for part in parsed.iter_parts():
                name = part.get_param("name", header="content-disposition")
                payload = part.get_payload(decode=True) or b""
                if name == "payload_json":
                    body = json.loads(payload)
                elif isinstance(name, str) and name.startswith("files["):
                    files.append((part.get_filename() or name, payload))
        elif ctype.startswith("application/json"):
            body = request.json()
        else:
            return _error(400, 50109, "The request body contains invalid JSON.")
        content = body.get("content") or ""
        if len(content) > 2000:
            return self._too_long()
        if not content.strip() and not files and not body.get("components"):
            return _error(400, 50006, "Cannot send an empty message")
        for _, data in files:
            if len(data) > UPLOAD_CAP:
                return _error(413, 40005, "Request entity too large")
        message_id = str(next(self._ids))
        message = {
            "id": message_id,
            "channel_id": channel,
            "author": self.bot,
            "content": content,
            "timestamp": "2026-12-01T12:00:01.000000+00:00",
            "attachments": [
                {"id": str(i), "filename": name, "size": len(data)}
                for i, (name, data) in enumerate(files)
            ],
            "components": body.get("components") or [],
            "flags": body.get("flags") or 0,
            "type": 19 if body.get("message_reference") else 0,
            "mentions": [],
            "mention_roles": [],
            "mention_everyone": False,
            "embeds": [],
            "pinned": False,
            "tts": False,
            "edited_timestamp": None,
            "_files": files,
            "_allowed_mentions": body.get("allowed_mentions"),
        }
        if body.get("message_reference"):
            # What was sent, plus the channel Discord fills in.
            message["message_reference"] = {"channel_id": channel, **body["message_reference"]}
        self.messages[channel][message_id] = message
        public = {k: v for k, v in message.items() if not k.startswith("_")}
        return self._ok("POST", route, public)

    def _callback(self, request: RecordedRequest, interaction_id: str, token: str, route: str):
        if self.interactions.get(interaction_id) != token:
            return _error(404, 10062, "Unknown interaction")
        if any(c["interaction_id"] == interaction_id for c in self.callbacks):
            return _error(400, 40060, "Interaction has already been acknowledged.")
        body = request.json()
        self.callbacks.append({"interaction_id": interaction_id, **body})
        query = urllib.parse.parse_qs(urllib.parse.urlsplit(request.path).query)
        if query.get("with_response") != ["true"]:
            return self._ok("POST", route, status=204)
        data = body.get("data") or {}
        ephemeral = bool((data.get("flags") or 0) & 64)
        message_id = str(next(self._ids))
        return self._ok(
            "POST",
            route,
            {
                "interaction": {
                    "id": interaction_id,
                    "type": 3,
                    "response_message_id": message_id,
                    "response_message_loading": False,
                    "response_message_ephemeral": ephemeral,
                },
                "resource": {
                    "type": body.get("type"),
                    "message": {
                        "id": message_id,
                        "channel_id": "0",
                        "author": self.bot,
                        "content": data.get("content") or "",
                        "timestamp": "2026-12-01T12:00:02.000000+00:00",
                        "edited_timestamp": None,
                        "tts": False,
                        "mention_everyone": False,
                        "mentions": [],
                        "mention_roles": [],
                        "attachments": [],
                        "embeds": [],
                        "pinned": False,
                        "type": 19,
                        "flags": data.get("flags") or 0,
                    },
                },
            },
        )
