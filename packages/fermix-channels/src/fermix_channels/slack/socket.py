"""Socket Mode: Slack events over a websocket the daemon opens, so no public URL is needed.

The protocol: ``apps.connections.open`` with the app-level ``xapp-`` token returns a
short-lived ``wss://`` URL; Slack greets the connection with ``{"type": "hello"}`` and then
sends envelopes — ``{"envelope_id", "type": "events_api", "payload": <Events API body>}`` —
each of which must be acknowledged by sending ``{"envelope_id": ...}`` back within a few
seconds, or Slack redelivers it. ``{"type": "disconnect", "reason": ...}`` announces that
the connection is about to be closed (``warning``, ``refresh_requested``: open a new one at
once; ``link_disabled``: Socket Mode was turned off for the app, which is a configuration
fault; ``too_many_websockets``: back off).

This is a small client over ``websockets`` rather than slack_sdk's Socket Mode clients: the
SDK's asyncio clients run their receive, monitor and dispatch loops as free-floating
``asyncio`` tasks and swallow their errors into log lines, so a dead connection or a revoked
token would never reach the channel runtime's supervision (health, restart with backoff).
Here one loop runs in the adapter's task group, an envelope is acknowledged only after the
message was handed off (an unacknowledged one is redelivered by Slack — the Socket Mode
equivalent of the webhook's 503), and a permanent refusal raises so the runtime sees it.
"""

from __future__ import annotations

import json
import logging
import random
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
from fermix_core.channel import ChannelError, ChannelRateLimited, ChannelTransientError
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import WebSocketException

from fermix_channels.slack.client import SlackApi

__all__ = ["EnvelopeHandler", "SocketModeClient"]

log = logging.getLogger("fermix_channels.slack.socket")

#: Handles one ``events_api`` payload; returns False when the hand-off failed (no ack, so
#: Slack redelivers).
EnvelopeHandler = Callable[[dict[str, Any]], Awaitable[bool]]


class SocketModeClient:
    """Keeps one Socket Mode connection open, reconnecting with capped, jittered backoff."""

    def __init__(
        self,
        api: SlackApi,
        app_token: str,
        handle: EnvelopeHandler,
        *,
        on_state: Callable[[str, str | None], None] = lambda state, error: None,
        backoff_initial: float = 1.0,
        backoff_max: float = 30.0,
        open_timeout: float = 15.0,
        ping_interval: float = 20.0,
    ) -> None:
        self.api = api
        self._app_token = app_token
        self.handle = handle
        self.on_state = on_state
        self.backoff_initial = backoff_initial
        self.backoff_max = backoff_max
        self.open_timeout = open_timeout
        self.ping_interval = ping_interval
        #: Connections that reached ``hello``, for tests and status.
        self.sessions = 0
        #: Set on the first hello.
        self.greeted = anyio.Event()
        self._connection: ClientConnection | None = None

    async def run(self) -> None:
        """Connect, serve, reconnect; returns only by cancellation, raises on a refusal."""
        failures = 0
        while True:
            reason: str | None = None
            greeted = self.sessions
            try:
                url = await self.api.connections_open(self._app_token)
                reason = await self._serve(url)
            except ChannelRateLimited as exc:
                self.on_state("degraded", str(exc))
                log.warning("slack socket mode: %s", exc)
                if exc.retry_after:
                    await anyio.sleep(min(exc.retry_after, self.backoff_max * 10))
            except ChannelTransientError as exc:
                self.on_state("degraded", str(exc))
                log.warning("slack socket mode: %s", exc)
            except (OSError, TimeoutError, WebSocketException) as exc:
                self.on_state("degraded", f"Socket Mode connection lost ({type(exc).__name__})")
                log.warning("slack socket mode: connection lost (%s)", type(exc).__name__)
            if reason == "link_disabled":
                raise ChannelError(
                    "Slack disabled Socket Mode for this app; turn it on under Socket Mode in "
                    'the app settings, or set mode = "events" in [fermix_channels.slack]'
                )
            if self.sessions > greeted:
                failures = 0  # that connection worked; start the backoff over
            if reason in ("warning", "refresh_requested"):
                continue
            failures += 3 if reason == "too_many_websockets" else 1
            delay = min(self.backoff_max, self.backoff_initial * 2 ** (failures - 1))
            # Jitter in [delay/2, delay]: many daemons restarting together do not stampede.
            await anyio.sleep(delay * (0.5 + random.random() / 2))  # noqa: S311

    async def close(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            await connection.close()

    async def _serve(self, url: str) -> str | None:
        """One connection; the ``disconnect`` reason Slack gave, or None when it just closed."""
        async with connect(
            url,
            open_timeout=self.open_timeout,
            ping_interval=self.ping_interval,
            close_timeout=2,
        ) as connection:
            self._connection = connection
            try:
                async for frame in connection:
                    reason = await self._frame(connection, frame)
                    if reason is not None:
                        return reason
            finally:
                self._connection = None
        return None

    async def _frame(self, connection: ClientConnection, frame: str | bytes) -> str | None:
        try:
            message = json.loads(frame)
        except ValueError:
            log.warning("slack socket mode: ignored a frame that is not JSON")
            return None
        if not isinstance(message, dict):
            return None
        kind = message.get("type")
        if kind == "hello":
            self.sessions += 1
            self.greeted.set()
            self.on_state("ready", None)
            return None
        if kind == "disconnect":
            reason = message.get("reason")
            log.info("slack socket mode: Slack asked to reconnect (%s)", reason)
            return reason if isinstance(reason, str) else "unknown"
        envelope_id = message.get("envelope_id")
        if not isinstance(envelope_id, str) or not envelope_id:
            return None
        if kind == "events_api":
            payload = message.get("payload")
            if isinstance(payload, dict) and not await self.handle(payload):
                return None  # not acknowledged: Slack redelivers it
        # slash_commands, interactive and anything newer: acknowledged, not acted on.
        await connection.send(json.dumps({"envelope_id": envelope_id}))
        return None
