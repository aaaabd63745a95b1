"""The ACP protocol side of the ``acp`` channel: one client connection's agent.

Imported on the first client connection to ``acp.sock`` (by ``AcpChannel._serve``), so an
idle daemon does not hold the ``agent-client-protocol`` SDK and its schema models. The
channel itself (the socket, the sessions index, replies) is ``fermix_channels.acp.adapter``.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import logging
import math
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc
from acp import (
    PROTOCOL_VERSION,
    InitializeResponse,
    LoadSessionResponse,
    NewSessionResponse,
    PromptResponse,
    RequestError,
    run_agent,
    start_tool_call,
    update_agent_message_text,
    update_agent_thought_text,
    update_tool_call,
    update_user_message_text,
)
from acp.schema import AgentCapabilities, Implementation, PromptCapabilities
from fermix_core import __version__
from fermix_core.channel import (
    Attachment,
    AttachmentKind,
    ConversationKey,
    DeliveryResult,
    DeliveryUnavailable,
    InboundMessage,
)
from fermix_core.provider import StreamEvent, StreamEventKind

from fermix_channels.acp.adapter import OPERATOR

if TYPE_CHECKING:
    from fermix_channels.acp.adapter import AcpChannel

__all__ = ["file_line", "run_agent", "update_agent_message_text"]

log = logging.getLogger("fermix.channels.acp")


class _Flush:
    """A marker in a session's outbox: set once everything before it was written."""

    def __init__(self) -> None:
        self.done = anyio.Event()


class _Session:
    """One ACP session on one client connection."""

    def __init__(self, session_id: str, cwd: Path, client: Any) -> None:
        self.id = session_id
        self.cwd = cwd
        self.client = client
        self.cancelled = False
        self.prompting = False
        self._send, self._receive = anyio.create_memory_object_stream[Any](math.inf)

    def push(self, update: Any) -> None:
        """Queue a ``session/update`` (sync: stream events arrive inline with the model)."""
        with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._send.send_nowait(update)

    async def flush(self) -> None:
        """Return once every update queued so far reached the client (or it is gone)."""
        marker = _Flush()
        try:
            self._send.send_nowait(marker)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            return
        await marker.done.wait()

    async def write_loop(self) -> None:
        """Write queued updates in order; runs for the connection's lifetime."""
        async with self._receive:
            async for item in self._receive:
                if isinstance(item, _Flush):
                    item.done.set()
                    continue
                try:
                    await self.client.session_update(self.id, item)
                except Exception as exc:
                    log.debug("acp session %s: update not written: %s", self.id, exc)

    def close(self) -> None:
        self._send.close()


class _TurnStream:
    """The turn's live stream into one session (``Channel.turn_stream``).

    Shaped like :class:`~fermix_core.channels.streaming.StreamController` as the turn
    runner uses it: events are queued by :meth:`on_event` (sync, inline with the model),
    :meth:`finish` hands back whatever the stream did not already show.
    """

    def __init__(self, session: _Session) -> None:
        self.session = session
        #: Text streamed since the last finished output item.
        self._segment = ""
        #: The last finished message item's text, as streamed.
        self._last = ""
        self._tools = 0
        self._turn = uuid.uuid4().hex[:12]

    @asynccontextmanager
    async def running(self) -> AsyncIterator[_TurnStream]:
        yield self

    def on_event(self, event: StreamEvent) -> None:
        if event.kind is StreamEventKind.TEXT_DELTA:
            if event.text:
                self._segment += event.text
                self.session.push(update_agent_message_text(event.text))
        elif event.kind is StreamEventKind.REASONING_SUMMARY:
            if event.text.strip():
                self.session.push(update_agent_thought_text(event.text))
        elif event.kind is StreamEventKind.ITEM_DONE:
            if event.item_type == "message":
                self._last = self._segment or event.text
            if event.item_type in ("message", "tool_call"):
                self._segment = ""

    def tool_started(self, call_id: str, name: str, arguments: dict[str, Any]) -> None:
        """The agent loop runs a tool: a ``tool_call`` update, in progress."""
        self._segment = ""  # text after a tool call is a new message item
        self._tools += 1
        self.session.push(
            start_tool_call(
                self._tool_id(call_id),
                name,
                kind=_tool_kind(name),
                status="in_progress",
                raw_input=arguments,
            )
        )

    def tool_finished(self, call_id: str, name: str, ok: bool) -> None:
        status = "completed" if ok else "failed"
        self.session.push(update_tool_call(self._tool_id(call_id), status=status))

    def _tool_id(self, call_id: str) -> str:
        # The model's call ids repeat across turns on some wires; the session's do not.
        return f"{self._turn}:{call_id or self._tools}"

    async def finish(self, final: str) -> str | None:
        """The part of *final* the client has not seen yet (``None`` when it saw it all)."""
        shown = self._segment or self._last
        if not shown:
            return final
        if shown.endswith(final) or shown == final:
            return None
        if final.startswith(shown):
            return final[len(shown) :]
        return final

    async def abort(self) -> None:
        """A stopped or failed turn: what the editor already shows stays there."""


class _Connection:
    """The ACP agent of one client connection (the SDK calls these methods)."""

    def __init__(self, channel: AcpChannel, task_group: anyio.abc.TaskGroup) -> None:
        self.channel = channel
        self.task_group = task_group
        self.client: Any = None
        self.sessions: dict[str, _Session] = {}

    def on_connect(self, conn: Any) -> None:
        self.client = conn

    # ------------------------------------------------------------------ lifecycle

    async def initialize(self, protocol_version: int, **_: Any) -> InitializeResponse:
        return InitializeResponse(
            protocol_version=min(int(protocol_version), PROTOCOL_VERSION),
            agent_capabilities=AgentCapabilities(
                load_session=True,
                prompt_capabilities=PromptCapabilities(image=True, embedded_context=True),
            ),
            agent_info=Implementation(name="fermix", title="Fermix", version=__version__),
        )

    async def authenticate(self, method_id: str, **_: Any) -> None:
        return None  # nothing to authenticate: the socket's permissions authorize

    def _open(self, session_id: str, cwd: str) -> _Session:
        session = _Session(session_id, _directory(cwd), self.client)
        self.sessions[session_id] = session
        self.channel.sessions[session_id] = session
        self.task_group.start_soon(session.write_loop)
        return session

    async def new_session(self, cwd: str, **_: Any) -> NewSessionResponse:
        session_id = f"acp-{uuid.uuid4().hex}"
        session = self._open(session_id, cwd)
        await anyio.to_thread.run_sync(self.channel.remember, session_id, session.cwd)
        return NewSessionResponse(session_id=session_id)

    async def load_session(self, cwd: str, session_id: str, **_: Any) -> LoadSessionResponse:
        known = await anyio.to_thread.run_sync(self.channel.remembered)
        if session_id not in known:
            raise RequestError.resource_not_found(session_id)
        if session_id in self.channel.sessions:
            raise RequestError.invalid_params(
                {"sessionId": session_id, "reason": "the session is open in another client"}
            )
        session = self._open(session_id, cwd)
        history = await self.channel.host_history(ConversationKey("acp", session_id))
        for role, text in history:
            if role == "user":
                session.push(update_user_message_text(text))
            else:
                session.push(update_agent_message_text(text))
        await session.flush()
        return LoadSessionResponse()

    async def close(self) -> None:
        """The client went away: stop what it left running and forget its sessions."""
        for session in self.sessions.values():
            if self.channel.sessions.get(session.id) is session:
                del self.channel.sessions[session.id]
            if session.prompting:
                with anyio.CancelScope(shield=True):
                    await self.channel.stop_session(session.id)
            session.close()
        self.sessions.clear()

    # ------------------------------------------------------------------ turns

    def _session(self, session_id: str) -> _Session:
        session = self.sessions.get(session_id)
        if session is None:
            raise RequestError.invalid_params(
                {"sessionId": session_id, "reason": "unknown session; call session/new first"}
            )
        return session

    async def prompt(self, session_id: str, prompt: list[Any], **_: Any) -> PromptResponse:
        session = self._session(session_id)
        if session.prompting:
            raise RequestError.invalid_request(
                {"reason": "a prompt is already running in this session; cancel it first"}
            )
        text, attachments = _prompt_content(prompt)
        message = InboundMessage(
            channel="acp",
            chat_id=session_id,
            sender_id=OPERATOR,
            sender_name=OPERATOR,
            text=text,
            attachments=attachments,
            message_id=f"{session_id}:{uuid.uuid4().hex}",
            local=True,
        )
        session.cancelled = False
        session.prompting = True
        try:
            try:
                result, job = await self.channel.submit(message, cwd=session.cwd)
            except DeliveryUnavailable as exc:
                raise RequestError.internal_error({"reason": str(exc)}) from exc
            if result is not DeliveryResult.ACCEPTED:
                raise RequestError.internal_error({"reason": f"the prompt was {result.value}"})
            try:
                if job is not None:
                    await job.done.wait()
            except anyio.get_cancelled_exc_class():
                with anyio.CancelScope(shield=True):
                    await self.channel.stop_session(session_id)
                raise
            await session.flush()
        finally:
            session.prompting = False
        stopped = session.cancelled or (job is not None and job.stopped)
        return PromptResponse(stop_reason="cancelled" if stopped else "end_turn")

    async def cancel(self, session_id: str, **_: Any) -> None:
        session = self.sessions.get(session_id)
        if session is None or not session.prompting:
            return
        session.cancelled = True
        await self.channel.stop_session(session_id)


_KINDS = (
    ("read", "read"),
    ("list", "read"),
    ("write", "edit"),
    ("edit", "edit"),
    ("delete", "delete"),
    ("search", "search"),
    ("fetch", "fetch"),
    ("shell", "execute"),
    ("exec", "execute"),
    ("run", "execute"),
)


def _tool_kind(name: str) -> str:
    """ACP's tool kind for a Fermix tool name (the editor picks an icon by it)."""
    for word, kind in _KINDS:
        if word in name:
            return kind
    return "other"


def _directory(cwd: str) -> Path:
    path = Path(cwd)
    if not path.is_absolute():
        raise RequestError.invalid_params({"cwd": cwd, "reason": "cwd must be an absolute path"})
    if not path.is_dir():
        raise RequestError.invalid_params({"cwd": cwd, "reason": "cwd is not a directory"})
    return path


def _prompt_content(blocks: list[Any]) -> tuple[str, list[Attachment]]:
    """The prompt's text (resources inlined with their URI) and its images."""
    parts: list[str] = []
    images: list[Attachment] = []
    for block in blocks:
        kind = getattr(block, "type", None)
        if kind == "text":
            parts.append(block.text)
        elif kind == "image":
            try:
                data = base64.b64decode(block.data, validate=True)
            except (binascii.Error, ValueError) as exc:
                raise RequestError.invalid_params({"reason": "an image is not base64"}) from exc
            images.append(
                Attachment(kind=AttachmentKind.IMAGE, data=data, mime_type=block.mime_type)
            )
        elif kind == "resource_link":
            parts.append(f"[{block.name}]({block.uri})")
        elif kind == "resource":
            resource = block.resource
            body = getattr(resource, "text", None)
            if body is None:
                parts.append(f"(attached binary resource {resource.uri})")
            else:
                parts.append(f"{resource.uri}:\n```\n{body}\n```")
        elif kind == "audio":
            raise RequestError.invalid_params(
                {"reason": "audio prompts are not supported; send the message as text"}
            )
    return "\n\n".join(p for p in parts if p), images


def file_line(attachment: Attachment) -> str:
    name = attachment.filename or (attachment.path.name if attachment.path else "a file")
    where = f" at {attachment.path}" if attachment.path is not None else ""
    return f"\n📎 Sent {attachment.kind.value} {name}{where} (ACP cannot transfer files)\n"
