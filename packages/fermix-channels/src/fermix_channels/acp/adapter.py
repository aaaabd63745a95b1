"""The ``acp`` channel: Agent Client Protocol clients on ``$FERMIX_HOME/acp.sock``.

An editor launches ``fermix acp``, which bridges its standard input and output to this
socket; every connection is one ACP client speaking JSON-RPC through the official
``agent-client-protocol`` SDK (the framing is the SDK's, not ours). An ACP session is one
conversation: its id is the chat id, so history, ``/stop`` semantics and the FIFO queue are
the gateway's as for any channel.

* ``initialize`` answers with ``loadSession`` and text, image and embedded-context prompts;
* ``session/new`` takes the client's ``cwd`` as the turn's request directory (the gateway
  admits one for local operator callers only — whoever reaches the 0600 socket is one);
* ``session/load`` reopens a session this daemon created and replays its history as
  ``user_message_chunk`` / ``agent_message_chunk`` updates;
* ``session/prompt`` queues a turn and answers when it is done, ``stopReason``
  ``end_turn`` or ``cancelled``; while it runs, the model's text deltas go out as
  ``agent_message_chunk`` updates, reasoning summaries as ``agent_thought_chunk`` and each
  tool call the model makes as a ``tool_call`` update;
* ``session/cancel`` stops the turn exactly like ``/stop``.

There are no slash commands: a message starting with ``/`` reaches the model as text. A
media reply cannot cross ACP as a file, so it arrives as one text line naming the file.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import importlib.util
import json
import logging
import os
import socket
import sys
import time
import uuid
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc
from fermix_core.channel import (
    Channel,
    ChannelError,
    ConversationKey,
    DeliveryResult,
    InboundMessage,
    OutboundMessage,
    SentMessage,
)
from fermix_core.channels.presentation import DialectProfile, code_points
from fermix_core.channels.presentation.render import DiscordRenderer
from fermix_core.fsutil import atomic_write

if TYPE_CHECKING:
    from fermix_channels.acp import protocol

__all__ = ["SESSIONS_FILE", "AcpChannel"]

# The SDK itself loads with the first client connection (see _protocol), but a missing
# `acp` extra still fails here, when the channel is built, exactly as importing it would.
if importlib.util.find_spec("acp") is None:
    raise ModuleNotFoundError("No module named 'acp'", name="acp")

log = logging.getLogger("fermix.channels.acp")

#: The index of sessions this daemon created (id → cwd), so ``session/load`` knows them.
SESSIONS_FILE = "acp-sessions.json"
#: Sessions remembered for ``session/load``; the oldest are forgotten past this.
MAX_REMEMBERED = 500
#: One JSON-RPC line may carry an embedded image: the SDK's own default buffer.
STREAM_LIMIT = 50 * 1024 * 1024
#: Who an ACP caller is: the socket authorizes, there is no sender id to check.
OPERATOR = "operator"

#: ACP clients render Markdown themselves: replies pass through the Markdown renderer and
#: are never split (a streamed reply is one growing message in the editor).
_PROFILE = DialectProfile("acp", DiscordRenderer(), 10_000_000, code_points, "characters")


async def _protocol() -> ModuleType:
    """The protocol module (and the SDK), imported on the first client connection.

    An idle daemon never holds the ``agent-client-protocol`` SDK (about 8 MiB resident).
    The first import runs on a worker thread, so the loop keeps serving other channels
    while the SDK's schema models are built; later connections find it in ``sys.modules``.
    """
    name = "fermix_channels.acp.protocol"
    module = sys.modules.get(name)
    if module is None:
        module = await anyio.to_thread.run_sync(importlib.import_module, name)
    return module


class AcpChannel(Channel):
    """Serves ACP clients on the local socket; one connection per editor session."""

    name = "acp"
    dialect = "acp"
    max_text = 10_000_000
    #: A leading "/" is ordinary text here (runtime passes this to the reply features).
    slash_commands = False

    def __init__(self, *, config: Any = None, home: Any = None, **_: Any) -> None:
        self.config = config
        self.home = home
        self.sessions: dict[str, protocol._Session] = {}
        self._host: Any = None
        self._listener: socket.socket | None = None
        self._path: Path | None = None
        self._scope: anyio.CancelScope | None = None
        self._accepting: anyio.Event | None = None

    def channel_profile(self) -> DialectProfile:
        return _PROFILE

    # ------------------------------------------------------------------ lifecycle

    @property
    def socket_path(self) -> Path:
        home = self.home if self.home is not None else self._host.home
        return Path(home.acp_sock)

    async def start(self, host: Any) -> None:
        self._host = host
        path = self.socket_path
        if os.path.lexists(path):
            # The daemon holds the pidfile lock, so a socket here is one a crashed daemon
            # (or this adapter before a restart) left behind.
            path.unlink()
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            listener.bind(str(path))
            os.chmod(path, 0o600)
            listener.listen(16)
            listener.setblocking(False)
        except OSError:
            listener.close()
            raise
        self._listener, self._path = listener, path
        self._scope, self._accepting = anyio.CancelScope(), anyio.Event()
        host.task_group.start_soon(self._accept, listener, self._scope, self._accepting)

    async def stop(self) -> None:
        scope, self._scope = self._scope, None
        if scope is not None:
            scope.cancel()  # the accept loop and every client connection end here
            if self._accepting is not None:
                with anyio.move_on_after(5):
                    await self._accepting.wait()  # nothing waits on the listener any more
        listener, self._listener = self._listener, None
        if listener is not None:
            listener.close()
        if self._path is not None:
            with contextlib.suppress(FileNotFoundError):
                self._path.unlink()
            self._path = None
        self.sessions.clear()

    async def _accept(
        self, listener: socket.socket, scope: anyio.CancelScope, done: anyio.Event
    ) -> None:
        try:
            with scope:
                async with anyio.create_task_group() as connections:
                    while True:
                        await anyio.wait_readable(listener)
                        try:
                            conn, _ = listener.accept()
                        except (BlockingIOError, InterruptedError):
                            continue
                        connections.start_soon(self._serve, conn)
        finally:
            done.set()

    async def _serve(self, conn: socket.socket) -> None:
        protocol = await _protocol()
        reader, writer = await asyncio.open_unix_connection(sock=conn, limit=STREAM_LIMIT)
        self._host.emit("channel.acp_connected")
        try:
            async with anyio.create_task_group() as tg:
                agent = protocol._Connection(self, tg)
                try:
                    await protocol.run_agent(agent, writer, reader)
                finally:
                    await agent.close()
                    tg.cancel_scope.cancel()
        except Exception as exc:
            log.warning("acp client connection ended with an error: %s", exc)
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    # ------------------------------------------------------------------ host seams

    # The runtime's host has the local-surface seams; a plain ChannelHost (a test stub)
    # only delivers, so a prompt then answers once it is handed over.

    async def submit(self, message: InboundMessage, *, cwd: Path) -> tuple[DeliveryResult, Any]:
        submit = getattr(self._host, "submit", None)
        if submit is None:
            return await self._host.deliver(message), None
        return await submit(message, cwd=cwd)

    async def stop_session(self, session_id: str) -> None:
        stop = getattr(self._host, "stop_conversation", None)
        if stop is None:
            return
        try:
            await stop(ConversationKey("acp", session_id))
        except Exception:
            log.exception("acp session %s: stopping the turn failed", session_id)

    async def host_history(self, key: ConversationKey) -> list[tuple[str, str]]:
        history = getattr(self._host, "history", None)
        return [] if history is None else await history(key)

    # ------------------------------------------------------------------ sessions index

    def _index_path(self) -> Path:
        home = self.home if self.home is not None else self._host.home
        return Path(home.path) / SESSIONS_FILE

    def remembered(self) -> dict[str, dict[str, Any]]:
        path = self._index_path()
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            log.warning("%s is unreadable (%s); starting a fresh session index", path, exc)
            return {}
        return data if isinstance(data, dict) else {}

    def remember(self, session_id: str, cwd: Path) -> None:
        known = self.remembered()
        known[session_id] = {"cwd": str(cwd), "created": time.time()}
        if len(known) > MAX_REMEMBERED:
            newest = sorted(known.items(), key=lambda kv: kv[1].get("created", 0))
            known = dict(newest[-MAX_REMEMBERED:])
        atomic_write(self._index_path(), json.dumps(known) + "\n", mode=0o600)

    # ------------------------------------------------------------------ replies

    def turn_stream(self, message: InboundMessage, session_id: str) -> protocol._TurnStream | None:
        session = self.sessions.get(message.chat_id)
        if session is None:
            return None  # no client connected: the SDK may not even be imported
        from fermix_channels.acp import protocol

        return protocol._TurnStream(session)

    async def send(self, message: OutboundMessage) -> SentMessage:
        session = self.sessions.get(message.chat_id)
        if session is None:
            raise ChannelError(
                f"the ACP client of session {message.chat_id} is not connected; the reply is "
                "kept in history and shows when the session is loaded again"
            )
        from fermix_channels.acp import protocol  # a session exists: it is imported

        if message.text:
            session.push(protocol.update_agent_message_text(message.text))
        for attachment in message.attachments:
            session.push(protocol.update_agent_message_text(protocol.file_line(attachment)))
        return SentMessage(message_id=uuid.uuid4().hex)
