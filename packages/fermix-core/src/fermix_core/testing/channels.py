"""An in-memory channel and a channel host for gateway, streaming, reply and adapter tests.

:class:`StubChannelHost` is a real :class:`~fermix_core.channel.ChannelHost` without a
daemon: a real task group and HTTP client (inside ``async with``), an in-memory seen-ids
set doing the same duplicate check the runtime does, and a record of every delivery,
health report and telemetry event.

:class:`MemoryChannel` behaves like a well-behaved platform: it assigns message ids,
remembers what each chat currently shows (so an edited draft or a deleted status line is
visible as such), and refuses operations a real platform would refuse — sending while
stopped, editing a message that does not exist. Abilities can be switched off per
instance to test the paths for channels that cannot edit, delete or react.
"""

from __future__ import annotations

import inspect
import itertools
import shutil
import tempfile
from collections.abc import Awaitable, Callable, Iterable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

import anyio

from fermix_core.channel import (
    HEALTH_STATES,
    Attachment,
    Channel,
    ChannelCapabilityError,
    ChannelError,
    ChannelHost,
    DeliveryResult,
    DeliveryUnavailable,
    InboundMessage,
    OutboundMessage,
    SentMessage,
)
from fermix_core.home import FermixHome

if TYPE_CHECKING:  # pragma: no cover - typing only
    import anyio.abc
    import httpx

__all__ = ["MemoryChannel", "PostedMessage", "StubChannelHost"]


class StubChannelHost:
    """A :class:`~fermix_core.channel.ChannelHost` for tests, with no daemon behind it.

    ``deliver`` records the platform id (``message.message_id``) and answers
    :attr:`DeliveryResult.DUPLICATE` for an id seen before; it then calls *on_deliver*
    (e.g. ``lambda m: gateway.ingest(m, port)``) when given. A callback that raises, or
    :attr:`unavailable` set to true, makes ``deliver`` roll the id back and raise
    :class:`DeliveryUnavailable`, as the runtime does. A callback answering
    :class:`DeliveryResult` (or the gateway's ``IngestOutcome`` with status ``dropped``)
    decides the result; senders in *drop_senders* are :attr:`DeliveryResult.DROPPED`.

    ``task_group``, ``http`` and (when not given) ``home`` exist inside ``async with``;
    leaving the block cancels the adapter's tasks, closes the client and removes the
    temporary home. A receive loop that crashes surfaces there, failing the test.
    """

    def __init__(
        self,
        name: str = "memory",
        *,
        config: Any = None,
        home: FermixHome | None = None,
        http: httpx.AsyncClient | None = None,
        on_deliver: Callable[[InboundMessage], Awaitable[Any]] | None = None,
        drop_senders: Iterable[str] = (),
        secrets: Any = None,
        service: Any = None,
    ) -> None:
        self.name = name
        self.config = config
        #: The secret resolver adapters use (default: environment, then the stored form,
        #: with no plugin hooks; pass one built with ``host=`` to test a resolver hook).
        self._secrets = secrets
        #: The runtime facade (``None``: this stub has no service behind it).
        self.service = service
        self._home = home
        self._http = http
        self._task_group: anyio.abc.TaskGroup | None = None
        self._stack: AsyncExitStack | None = None
        self.on_deliver = on_deliver
        self.drop_senders = set(drop_senders)
        #: When true, deliver raises DeliveryUnavailable (the gateway is down).
        self.unavailable = False
        #: Messages accepted (not duplicates, not dropped), in order.
        self.deliveries: list[InboundMessage] = []
        #: Every deliver call's result, in order.
        self.results: list[DeliveryResult] = []
        #: Every (state, error) report, in order.
        self.reports: list[tuple[str, str | None]] = []
        #: Every (name, data) telemetry event, in order.
        self.events: list[tuple[str, dict[str, Any]]] = []
        #: The gateway's size caps an adapter sees through ``inbound_cap``, by attachment
        #: kind (``{"audio": 1024}``: the transcription cap); empty means none.
        self.inbound_caps: dict[str, int] = {}
        self._seen: set[str] = set()
        self._changed = anyio.Event()

    def inbound_cap(self, kind: Any, mime_type: str | None = None) -> int | None:
        """The cap in :attr:`inbound_caps` for *kind* (an ``audio/*`` MIME type counts as
        audio, as the gateway's transcription step decides)."""
        value = getattr(kind, "value", kind)
        if (mime_type or "").lower().startswith("audio/"):
            value = "audio"
        return self.inbound_caps.get(str(value))

    # ------------------------------------------------------------------ context

    async def __aenter__(self) -> StubChannelHost:
        import httpx

        stack = AsyncExitStack()
        await stack.__aenter__()
        try:
            if self._home is None:
                path = Path(tempfile.mkdtemp(prefix="fermix-stub-home-"))
                stack.callback(shutil.rmtree, path, True)
                self._home = FermixHome(path)
                stack.callback(setattr, self, "_home", None)
            if self._http is None:
                self._http = await stack.enter_async_context(httpx.AsyncClient(timeout=10.0))
                stack.callback(setattr, self, "_http", None)
            self._task_group = await stack.enter_async_context(anyio.create_task_group())
        except BaseException:
            await stack.aclose()
            raise
        self._stack = stack
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        stack, self._stack = self._stack, None
        assert stack is not None
        if self._task_group is not None:
            self._task_group.cancel_scope.cancel()
        try:
            return await stack.__aexit__(exc_type, exc, tb)
        finally:
            self._task_group = None

    def _entered(self, what: str) -> None:
        raise _NotEntered(
            f"StubChannelHost.{what} exists inside `async with StubChannelHost(...) as host:`"
        )

    @property
    def task_group(self) -> anyio.abc.TaskGroup:
        if self._task_group is None:
            self._entered("task_group")
        assert self._task_group is not None
        return self._task_group

    @property
    def secrets(self) -> Any:
        if self._secrets is None:
            from fermix_core.secrets import SecretResolver

            self._secrets = SecretResolver()
        return self._secrets

    @property
    def http(self) -> httpx.AsyncClient:
        if self._http is None:
            self._entered("http")
        assert self._http is not None
        return self._http

    @property
    def home(self) -> FermixHome:
        if self._home is None:
            self._entered("home")
        assert self._home is not None
        return self._home

    # ------------------------------------------------------------------ host

    async def deliver(self, message: InboundMessage) -> DeliveryResult:
        if not isinstance(message, InboundMessage):
            raise TypeError(f"deliver() takes an InboundMessage, not {type(message).__name__}")
        platform_id = message.message_id
        if platform_id is not None:
            if platform_id in self._seen:
                return self._record(DeliveryResult.DUPLICATE)
            self._seen.add(platform_id)
        try:
            if self.unavailable:
                raise DeliveryUnavailable(f"channel {self.name!r}: the gateway is unavailable")
            if message.sender_id in self.drop_senders:
                return self._record(DeliveryResult.DROPPED)
            outcome = None
            if self.on_deliver is not None:
                outcome = self.on_deliver(message)
                if inspect.isawaitable(outcome):
                    outcome = await outcome
        except BaseException as exc:
            if platform_id is not None:
                self._seen.discard(platform_id)
            if isinstance(exc, DeliveryUnavailable | anyio.get_cancelled_exc_class()):
                raise
            raise DeliveryUnavailable(f"channel {self.name!r}: hand-off failed: {exc}") from exc
        result = _result_of(outcome)
        if result is DeliveryResult.ACCEPTED:
            self.deliveries.append(message)
        return self._record(result)

    def _record(self, result: DeliveryResult) -> DeliveryResult:
        self.results.append(result)
        self._changed.set()
        self._changed = anyio.Event()
        return result

    async def seen(self, platform_id: str) -> bool:
        return platform_id in self._seen

    async def remember(self, platform_id: str) -> None:
        self._seen.add(platform_id)

    def report(self, state: str, error: str | None = None) -> None:
        if state not in HEALTH_STATES:
            raise ValueError(f"unknown channel state {state!r}; one of {', '.join(HEALTH_STATES)}")
        self.reports.append((state, error))
        self._changed.set()
        self._changed = anyio.Event()

    def emit(self, name: str, **data: Any) -> None:
        self.events.append((name, data))

    # ------------------------------------------------------------------ reading

    @property
    def state(self) -> str | None:
        """The latest reported state, ``None`` before any report."""
        return self.reports[-1][0] if self.reports else None

    async def wait_for_deliveries(self, count: int, *, timeout: float = 10.0) -> None:
        """Wait until *count* deliver calls have returned (any result); fail after *timeout*.

        The timeout is a failure bound, never a pacing wait.
        """
        with anyio.fail_after(timeout):
            while len(self.results) < count:
                await self._changed.wait()

    async def wait_for_state(
        self, state: str, *, containing: str | None = None, timeout: float = 10.0
    ) -> None:
        """Wait until the latest report is *state* (with *containing* in its error, when
        given); fail after *timeout* (a failure bound, never a pacing wait)."""

        def reached() -> bool:
            if self.state != state:
                return False
            return containing is None or containing in (self.reports[-1][1] or "")

        with anyio.fail_after(timeout):
            while not reached():
                await self._changed.wait()


class _NotEntered(RuntimeError, AttributeError):
    """A context-bound member was read outside ``async with`` (also an AttributeError, so
    ``hasattr`` and runtime protocol checks answer False instead of raising)."""


def _result_of(outcome: Any) -> DeliveryResult:
    if isinstance(outcome, DeliveryResult):
        return outcome
    status = getattr(outcome, "status", None)
    if status is not None and str(status) == "dropped":
        return DeliveryResult.DROPPED
    return DeliveryResult.ACCEPTED


@dataclass
class PostedMessage:
    """A message as the chat currently shows it."""

    message_id: str
    chat_id: str
    thread_id: str | None
    text: str
    attachments: list[Attachment]
    silent: bool
    deleted: bool = False
    #: Every text the message has shown, first one first (draft streaming edits).
    history: list[str] = field(default_factory=list)


class MemoryChannel(Channel):
    """A :class:`~fermix_core.channel.Channel` whose platform is a few Python lists.

    ``sent`` holds every :class:`OutboundMessage` in order; ``edits``, ``deletes``,
    ``reactions`` and ``typing_calls`` record the optional abilities; :meth:`visible` shows a
    chat the way a user would see it now.
    """

    def __init__(
        self,
        name: str = "memory",
        *,
        supports_edit: bool = True,
        supports_delete: bool = True,
        supports_reactions: bool = True,
        supports_typing: bool = True,
        local: bool = False,
    ) -> None:
        self.name = name
        self.supports_edit = supports_edit
        self.supports_delete = supports_delete
        self.supports_reactions = supports_reactions
        self.supports_typing = supports_typing
        self.local = local
        self.sent: list[OutboundMessage] = []
        self.edits: list[tuple[str, str, str]] = []
        self.deletes: list[tuple[str, str]] = []
        self.reactions: list[tuple[str, str, str]] = []
        self.typing_calls: list[tuple[str, str | None]] = []
        self.inbound: list[InboundMessage] = []
        self.posted: dict[str, PostedMessage] = {}
        self.host: ChannelHost | None = None
        self._ids = itertools.count(1)
        self._inbound_ids = itertools.count(1)
        self._failures: list[BaseException] = []
        self.last_result: DeliveryResult | None = None

    # ------------------------------------------------------------------ lifecycle

    @property
    def running(self) -> bool:
        return self.host is not None

    async def start(self, host: ChannelHost) -> None:
        if not callable(getattr(host, "deliver", None)):
            raise TypeError("start() needs a ChannelHost, e.g. fermix_core.testing.StubChannelHost")
        self.host = host
        host.report("ready")

    async def stop(self) -> None:
        self.host = None

    # ------------------------------------------------------------------ inbound

    async def inject(
        self,
        message: InboundMessage | str,
        *,
        sender_id: str = "owner",
        chat_id: str = "chat",
        thread_id: str | None = None,
        is_group: bool = False,
        attachments: Iterable[Attachment] = (),
    ) -> InboundMessage:
        """Deliver a platform message as if a user sent it; returns what was delivered.

        Awaits ``host.deliver``, so when this returns the gateway has accepted (or dropped)
        the message; :attr:`last_result` says which.
        """
        if self.host is None:
            raise ChannelError(f"channel {self.name!r} is not running; call start() first")
        if isinstance(message, str):
            message = InboundMessage(
                channel=self.name,
                chat_id=chat_id,
                thread_id=thread_id,
                sender_id=sender_id,
                text=message,
                attachments=list(attachments),
                message_id=f"in{next(self._inbound_ids)}",
                is_group=is_group,
                local=self.local,
            )
        elif not isinstance(message, InboundMessage):
            raise TypeError(
                f"inject() takes an InboundMessage or a str, not {type(message).__name__}"
            )
        self.inbound.append(message)
        self.last_result = await self.host.deliver(message)
        return message

    # ------------------------------------------------------------------ outbound

    def fail_next(self, *errors: BaseException) -> None:
        """Make the next sends raise these errors, one per send (a platform refusing)."""
        self._failures.extend(errors)

    async def send(self, message: OutboundMessage) -> SentMessage:
        if self.host is None:
            raise ChannelError(f"channel {self.name!r} is not running; call start() first")
        if not isinstance(message, OutboundMessage):
            raise TypeError(f"send() takes an OutboundMessage, not {type(message).__name__}")
        if self._failures:
            raise self._failures.pop(0)
        self.sent.append(message)
        message_id = f"m{next(self._ids)}"
        self.posted[message_id] = PostedMessage(
            message_id=message_id,
            chat_id=message.chat_id,
            thread_id=message.thread_id,
            text=message.text,
            attachments=list(message.attachments),
            silent=message.silent,
            history=[message.text],
        )
        return SentMessage(message_id=message_id)

    def _posted(self, chat_id: str, message_id: str, verb: str) -> PostedMessage:
        posted = self.posted.get(message_id)
        if posted is None or posted.chat_id != chat_id:
            raise ChannelError(
                f"cannot {verb} message {message_id!r} in chat {chat_id!r}: not found"
            )
        if posted.deleted:
            raise ChannelError(f"cannot {verb} message {message_id!r}: it was deleted")
        return posted

    async def edit(self, chat_id: str, message_id: str, text: str, *, plain: bool = False) -> None:
        if not self.supports_edit:
            raise ChannelCapabilityError(self.name, "edit messages", "supports_edit")
        posted = self._posted(chat_id, message_id, "edit")
        if not text.strip():
            raise ChannelError("cannot edit a message to blank text; delete it instead")
        posted.text = text
        posted.history.append(text)
        self.edits.append((chat_id, message_id, text))

    async def delete(self, chat_id: str, message_id: str) -> None:
        if not self.supports_delete:
            raise ChannelCapabilityError(self.name, "delete messages", "supports_delete")
        posted = self._posted(chat_id, message_id, "delete")
        posted.deleted = True
        self.deletes.append((chat_id, message_id))

    async def react(self, chat_id: str, message_id: str, emoji: str) -> None:
        if not self.supports_reactions:
            raise ChannelCapabilityError(self.name, "react to messages", "supports_reactions")
        if not emoji.strip():
            raise ChannelError("a reaction needs an emoji")
        known = {m.message_id for m in self.inbound if m.chat_id == chat_id}
        if message_id not in known and message_id not in self.posted:
            raise ChannelError(
                f"cannot react to message {message_id!r} in chat {chat_id!r}: not found"
            )
        self.reactions.append((chat_id, message_id, emoji))

    async def typing(self, chat_id: str, thread_id: str | None = None) -> None:
        if not self.supports_typing:
            raise ChannelCapabilityError(self.name, "show typing", "supports_typing")
        self.typing_calls.append((chat_id, thread_id))

    # ------------------------------------------------------------------ reading

    @property
    def texts(self) -> list[str]:
        """The text of every send, in order (as sent, before any edit)."""
        return [m.text for m in self.sent]

    def visible(self, chat_id: str = "chat") -> list[str]:
        """What *chat_id* shows now: current texts of messages not deleted, oldest first."""
        return [p.text for p in self.posted.values() if p.chat_id == chat_id and not p.deleted]
