"""Discord's Gateway: one websocket, kept open, resumed after a drop.

The protocol (API v10, JSON encoding):

* ``GET /gateway/bot`` names the websocket URL; the client connects with ``?v=10&encoding=json``.
* The server greets with HELLO (op 10, ``heartbeat_interval`` in ms). The client heartbeats
  (op 1, the last sequence number) every interval, the first one after ``interval × jitter``
  so that many clients reconnecting together do not heartbeat together; the server answers
  each with HEARTBEAT_ACK (op 11), and may ask for one at once with an op 1 of its own.
* A new session IDENTIFYs (op 2: token, intents, connection properties) and receives READY
  (``session_id``, ``resume_gateway_url``, the bot's ``user``, the ``application`` flags).
  After a drop the client reconnects to ``resume_gateway_url`` and RESUMEs (op 6: token,
  session id, sequence); the server replays every event after that sequence, then RESUMED.
* Dispatches (op 0) carry ``t`` (the event name), ``s`` (the sequence number) and ``d``.
* RECONNECT (op 7): close and resume. INVALID_SESSION (op 9): ``d`` says whether the
  session can be resumed; if not, wait 1–5 s and identify afresh.
* Zombie connections: a heartbeat sent while the previous one is still unacknowledged means
  the link is dead even though the socket looks open; the client closes it (code 4000, so
  the session stays resumable) and resumes on a new one.
* Close codes: 4004 (authentication failed), 4010–4013 (shard, version, intents invalid)
  and 4014 (a privileged intent — Message Content — is not enabled for the app) are
  *fatal*: reconnecting cannot help, so they are reported with the fix and retried only
  slowly (``fatal_retry``). 4007 (bad sequence) and 4009 (session timed out) drop the
  session and identify afresh; every other close resumes.

No event is lost or run twice across a resume: the sequence the client resumes from is the
last one *handled* (handed to the adapter), not merely received, so whatever was received
but not handled when the socket dropped is replayed, and the adapter's idempotency record
(the message id) turns a replay of something already handed off into a duplicate. Events
are handled in order by one worker per connection while a separate reader keeps reading,
so a slow hand-off (a media download) never delays a heartbeat ACK into a false zombie.
On a drop the worker first finishes the events already received.

The client is written on ``websockets`` rather than discord.py (see
``docs/channels/discord.md`` for why and the numbers).
"""

from __future__ import annotations

import json
import logging
import random
import time
import urllib.parse
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import anyio
from anyio.abc import ObjectReceiveStream
from fermix_core.channel import ChannelRateLimited, ChannelTransientError
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, WebSocketException

from fermix_channels.discord.rest import DiscordRefused, DiscordRest

__all__ = [
    "FATAL_CLOSES",
    "INTENTS",
    "Dispatch",
    "GatewayClient",
    "GatewaySession",
    "Op",
]

log = logging.getLogger("fermix_channels.discord.gateway")


class Op:
    DISPATCH = 0
    HEARTBEAT = 1
    IDENTIFY = 2
    RESUME = 6
    RECONNECT = 7
    INVALID_SESSION = 9
    HELLO = 10
    HEARTBEAT_ACK = 11


#: GUILDS | GUILD_MESSAGES | DIRECT_MESSAGES | MESSAGE_CONTENT (privileged).
INTENT_GUILDS = 1 << 0
INTENT_GUILD_MESSAGES = 1 << 9
INTENT_DIRECT_MESSAGES = 1 << 12
INTENT_MESSAGE_CONTENT = 1 << 15
INTENTS = INTENT_GUILDS | INTENT_GUILD_MESSAGES | INTENT_DIRECT_MESSAGES | INTENT_MESSAGE_CONTENT
#: ``application.flags`` bits that say the Message Content intent is enabled for the app.
APP_FLAG_MESSAGE_CONTENT = (1 << 18) | (1 << 19)

MESSAGE_CONTENT_ADVICE = (
    "the Message Content intent is not enabled for this bot, so Discord withholds what "
    "people write. Turn it on in the Developer Portal: Applications → your app → Bot → "
    "Privileged Gateway Intents → Message Content Intent, save, and the channel reconnects "
    "by itself"
)
FATAL_CLOSES: dict[int, str] = {
    4004: (
        "Discord refused the bot token (gateway close 4004, authentication failed); copy it "
        "again from the Developer Portal (Bot → Reset Token) and run "
        "`fermix setup --reconfigure --step discord`"
    ),
    4010: "Discord refused the shard sent (gateway close 4010)",
    4011: (
        "Discord requires sharding for this bot (gateway close 4011: it is in too many "
        "servers for one connection); Fermix runs one shard"
    ),
    4012: "Discord refused the gateway API version (gateway close 4012); upgrade Fermix",
    4013: "Discord refused the intents sent (gateway close 4013, invalid intents)",
    4014: "gateway close 4014 (disallowed intents): " + MESSAGE_CONTENT_ADVICE,
}
#: Closes after which the session cannot be resumed.
_FRESH_CLOSES = frozenset({4007, 4009})
#: Closing with this (not 1000/1001) keeps the session resumable, as Discord documents.
_RESUMABLE_CLOSE = 4000


@dataclass
class GatewaySession:
    """What a RESUME needs; saved by the adapter so a restart can resume too."""

    session_id: str
    resume_url: str
    seq: int | None = None


@dataclass(frozen=True)
class Dispatch:
    """One op 0 event."""

    name: str
    seq: int | None
    data: Any


#: Handles one dispatch in order; raising ChannelTransientError keeps it unhandled (it is
#: replayed after the next resume).
DispatchHandler = Callable[[Dispatch], Awaitable[None]]


class _Reconnect(Exception):
    """End this connection and connect again (``resume`` says how)."""

    def __init__(self, reason: str, *, resume: bool = True, delay: float = 0.0) -> None:
        self.reason = reason
        self.resume = resume
        self.delay = delay
        super().__init__(reason)


class _Fatal(Exception):
    def __init__(self, advice: str) -> None:
        self.advice = advice
        super().__init__(advice)


class GatewayClient:
    """Keeps one gateway session alive; :meth:`run` returns only by cancellation."""

    def __init__(
        self,
        rest: DiscordRest,
        token: str,
        handle: DispatchHandler,
        *,
        intents: int = INTENTS,
        on_state: Callable[[str, str | None], None] = lambda state, error: None,
        on_session: Callable[[GatewaySession | None], Awaitable[None]] | None = None,
        session: GatewaySession | None = None,
        persist: frozenset[str] = frozenset(),
        jitter: Callable[[], float] = random.random,
        backoff_initial: float = 1.0,
        backoff_max: float = 60.0,
        fatal_retry: float = 300.0,
        open_timeout: float = 15.0,
        max_frame: int = 8 * 1024 * 1024,
    ) -> None:
        self.rest = rest
        self._token = token
        self.handle = handle
        self.intents = intents
        self.on_state = on_state
        self.on_session = on_session
        self.session = session
        #: Events after whose handling the session (with its sequence) is saved.
        self.persist = persist | {"READY"}
        self.jitter = jitter
        self.backoff_initial = backoff_initial
        self.backoff_max = backoff_max
        self.fatal_retry = fatal_retry
        self.open_timeout = open_timeout
        self.max_frame = max_frame
        #: The last sequence number received (heartbeats carry it).
        self.received_seq: int | None = session.seq if session else None
        self.user: dict[str, Any] | None = None
        self.application_flags: int | None = None
        #: Counters for status, tests and the benchmark.
        self.identifies = 0
        self.resumes = 0
        self.connections = 0
        self.zombies = 0
        #: Set whenever a session is live (READY or RESUMED); replaced on each drop.
        self.live = anyio.Event()
        self._connection: ClientConnection | None = None
        self._acked = True
        self._last_heartbeat = 0.0
        self._was_live = False
        self._stopping = False
        #: Gateway round trip of the last acknowledged heartbeat, seconds.
        self.latency: float | None = None

    # ------------------------------------------------------------------ loop

    async def run(self) -> None:
        failures = 0
        while True:
            delay = 0.0
            try:
                url = await self._url()
                await self._serve(url)
                reason = "the gateway closed the connection"
            except _Reconnect as exc:
                reason, delay = exc.reason, exc.delay
                if not exc.resume:
                    await self._forget_session()
            except _Fatal as exc:
                self.on_state("degraded", exc.advice)
                log.error("discord gateway: %s", exc.advice)
                failures = 0
                await anyio.sleep(self.fatal_retry)
                continue
            except ChannelRateLimited as exc:
                reason = str(exc)
                delay = exc.retry_after or 0.0
            except DiscordRefused as exc:
                if exc.status == 401:
                    self.on_state("degraded", str(exc))
                    log.error("discord gateway: %s", exc)
                    await anyio.sleep(self.fatal_retry)
                    continue
                reason = str(exc)
            except (ChannelTransientError, OSError, TimeoutError, WebSocketException) as exc:
                reason = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            if self._stopping:
                return
            self.live = anyio.Event() if self.live.is_set() else self.live
            if self._was_live:
                failures = 0
            self._was_live = False
            failures += 1
            self.on_state("degraded", f"gateway connection lost ({reason}); reconnecting")
            log.warning("discord gateway: %s; reconnecting", reason)
            wait = min(self.backoff_max, self.backoff_initial * 2 ** (failures - 1))
            # Jitter in [wait/2, wait]; the first retry after a working session is quick.
            wait = wait * (0.5 + self.jitter() / 2) if failures > 1 else 0.0
            await anyio.sleep(max(wait, delay))

    async def close(self) -> None:
        """Close for good (the channel stops), keeping the session resumable."""
        self._stopping = True
        connection, self._connection = self._connection, None
        if connection is not None:
            await connection.close(_RESUMABLE_CLOSE)

    async def drop(self) -> None:
        """Cut the socket without a close handshake (tests, the benchmark)."""
        connection = self._connection
        if connection is not None:
            connection.transport.abort()

    async def _forget_session(self) -> None:
        self.session = None
        self.received_seq = None
        if self.on_session is not None:
            await self.on_session(None)

    async def _url(self) -> str:
        if self.session is not None:
            base = self.session.resume_url
        else:
            base = (await self.rest.gateway_bot())["url"]
        parts = urllib.parse.urlsplit(base)
        query = urllib.parse.urlencode({"v": "10", "encoding": "json"})
        return urllib.parse.urlunsplit((parts.scheme, parts.netloc, parts.path or "/", query, ""))

    # ------------------------------------------------------------------ one connection

    async def _serve(self, url: str) -> None:
        async with connect(
            url,
            open_timeout=self.open_timeout,
            ping_interval=None,  # the gateway's own heartbeat does this job
            close_timeout=2,
            max_size=self.max_frame,
        ) as connection:
            self._connection = connection
            self.connections += 1
            ended: BaseException | None = None
            try:
                interval = await self._hello(connection)
                await self._greet(connection)
                send, receive = anyio.create_memory_object_stream[Dispatch](1000)
                beat = anyio.CancelScope()
                async with anyio.create_task_group() as tg:
                    tg.start_soon(self._worker, receive)
                    tg.start_soon(self._heartbeat, beat, connection, interval)
                    try:
                        async with send:
                            await self._read(connection, send)
                    except (_Reconnect, ConnectionClosed) as exc:
                        # Not raised here: that would cancel the worker, and the events
                        # already received are handled first.
                        ended = exc
                    finally:
                        beat.cancel()
            except ConnectionClosed as exc:
                ended = exc
            finally:
                self._connection = None
            if isinstance(ended, ConnectionClosed):
                self._closed(ended)
            if ended is not None:
                raise ended

    def _closed(self, exc: ConnectionClosed) -> None:
        code = exc.rcvd.code if exc.rcvd is not None else None
        if code in FATAL_CLOSES:
            raise _Fatal(FATAL_CLOSES[code]) from None
        if code in _FRESH_CLOSES:
            raise _Reconnect(f"gateway close {code}; identifying afresh", resume=False) from None
        if code is not None:
            raise _Reconnect(f"gateway close {code}") from None
        raise _Reconnect("the socket dropped") from None

    async def _hello(self, connection: ClientConnection) -> float:
        with anyio.fail_after(self.open_timeout):
            while True:
                message = _decode(await connection.recv())
                if message is not None and message.get("op") == Op.HELLO:
                    data = message.get("d")
                    interval = data.get("heartbeat_interval") if isinstance(data, dict) else None
                    if isinstance(interval, int | float) and interval > 0:
                        return float(interval) / 1000
                    raise _Reconnect("HELLO without a heartbeat_interval")

    async def _greet(self, connection: ClientConnection) -> None:
        session = self.session
        if session is not None:
            self.resumes += 1
            payload = {
                "op": Op.RESUME,
                "d": {"token": self._token, "session_id": session.session_id, "seq": session.seq},
            }
        else:
            self.identifies += 1
            payload = {
                "op": Op.IDENTIFY,
                "d": {
                    "token": self._token,
                    "intents": self.intents,
                    "properties": {"os": "linux", "browser": "fermix", "device": "fermix"},
                },
            }
        await connection.send(json.dumps(payload))

    async def _heartbeat(
        self, scope: anyio.CancelScope, connection: ClientConnection, interval: float
    ) -> None:
        self._acked = True
        with scope:
            try:
                await anyio.sleep(interval * self.jitter())
                while True:
                    if not self._acked:
                        # The last heartbeat was never acknowledged: the link is a zombie.
                        self.zombies += 1
                        log.warning("discord gateway: no heartbeat ACK; reconnecting (zombie)")
                        await connection.close(_RESUMABLE_CLOSE, "zombie")
                        return
                    await self._beat(connection)
                    await anyio.sleep(interval)
            except ConnectionClosed:
                return  # the reader sees the close and says why

    async def _beat(self, connection: ClientConnection) -> None:
        self._acked = False
        self._last_heartbeat = time.monotonic()
        await connection.send(json.dumps({"op": Op.HEARTBEAT, "d": self.received_seq}))

    async def _read(self, connection: ClientConnection, send: Any) -> None:
        async for frame in connection:
            message = _decode(frame)
            if message is None:
                log.warning("discord gateway: ignored a frame that is not a JSON object")
                continue
            op = message.get("op")
            if op == Op.DISPATCH:
                seq = message.get("s")
                seq = seq if isinstance(seq, int) and not isinstance(seq, bool) else None
                name = message.get("t")
                if seq is not None:
                    self.received_seq = seq
                if isinstance(name, str):
                    self._session_event(name, message.get("d"))
                    await send.send(Dispatch(name, seq, message.get("d")))
            elif op == Op.HEARTBEAT:
                await self._beat(connection)
            elif op == Op.HEARTBEAT_ACK:
                self._acked = True
                self.latency = time.monotonic() - self._last_heartbeat
            elif op == Op.RECONNECT:
                await connection.close(_RESUMABLE_CLOSE, "reconnect requested")
                raise _Reconnect("Discord asked to reconnect (op 7)")
            elif op == Op.INVALID_SESSION:
                resumable = message.get("d") is True
                await connection.close(_RESUMABLE_CLOSE, "invalid session")
                # Discord asks for a wait of 1–5 s before identifying again.
                raise _Reconnect(
                    "Discord invalidated the session (op 9)",
                    resume=resumable and self.session is not None,
                    delay=0.0 if resumable else 1 + 4 * self.jitter(),
                )
            else:
                log.debug("discord gateway: ignored op %r", op)

    def _session_event(self, name: str, data: Any) -> None:
        """READY / RESUMED bookkeeping, done as the frame arrives."""
        if name == "READY" and isinstance(data, dict):
            session_id = data.get("session_id")
            resume = data.get("resume_gateway_url")
            if isinstance(session_id, str) and isinstance(resume, str):
                self.session = GatewaySession(session_id, resume, None)
            user = data.get("user")
            self.user = user if isinstance(user, dict) else None
            application = data.get("application")
            flags = application.get("flags") if isinstance(application, dict) else None
            self.application_flags = flags if isinstance(flags, int) else None
            self._went_live()
        elif name == "RESUMED":
            self._went_live()

    def _went_live(self) -> None:
        self._was_live = True
        advice = None
        if self.application_flags is not None and not (
            self.application_flags & APP_FLAG_MESSAGE_CONTENT
        ):
            advice = MESSAGE_CONTENT_ADVICE
        self.on_state("degraded" if advice else "ready", advice)
        self.live.set()

    async def _worker(self, receive: ObjectReceiveStream[Dispatch]) -> None:
        async with receive:
            async for event in receive:
                await self.handle(event)
                if event.seq is not None and self.session is not None:
                    self.session.seq = event.seq
                    if self.on_session is not None and event.name in self.persist:
                        await self.on_session(self.session)


def _decode(frame: str | bytes) -> dict[str, Any] | None:
    try:
        message = json.loads(frame)
    except (ValueError, UnicodeDecodeError):
        return None
    return message if isinstance(message, dict) else None
