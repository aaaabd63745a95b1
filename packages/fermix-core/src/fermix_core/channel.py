"""The channel contract: platform input in as :class:`InboundMessage`, replies out by ``send``.

Every adapter converts its platform's updates into one common inbound record and hands it
to :meth:`ChannelHost.deliver`; the agent never learns which platform a message came from.
Optional abilities (editing, deleting, reactions, typing) are declared as flags so the
gateway and streaming code can choose a strategy up front instead of discovering a missing
ability halfway through a reply. Replies reach ``send`` already rendered in the adapter's
``dialect`` (or as plain text when ``OutboundMessage.plain`` is set).

Webhook channels describe their HTTP endpoints as framework-free :class:`WebhookRoute`
values; the daemon's ingress serves them, so no adapter imports a web framework.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, model_validator

if TYPE_CHECKING:  # pragma: no cover - typing only
    import anyio.abc
    import httpx

    from fermix_core.home import FermixHome

__all__ = [
    "HEALTH_STATES",
    "Attachment",
    "AttachmentKind",
    "Channel",
    "ChannelCapabilityError",
    "ChannelError",
    "ChannelFormatError",
    "ChannelHost",
    "ChannelRateLimited",
    "ChannelTransientError",
    "ConversationKey",
    "Deliver",
    "DeliveryResult",
    "DeliveryUnavailable",
    "InboundMessage",
    "OutboundMessage",
    "SentMessage",
    "WebhookRequest",
    "WebhookResponse",
    "WebhookRoute",
    "inbound_cap",
]


class ConversationKey(NamedTuple):
    """``(channel, chat_id, thread_id)`` — the unit the queue serializes turns on."""

    channel: str
    chat_id: str
    thread_id: str | None = None


class AttachmentKind(StrEnum):
    IMAGE = "image"
    AUDIO = "audio"
    VIDEO = "video"
    DOCUMENT = "document"


class Attachment(BaseModel):
    """A media item, inbound or outbound, held as a local file or as bytes.

    Exactly one of ``path`` and ``data`` is set, so a consumer never has to decide which
    of two disagreeing sources is the real file — except for a ``withheld`` inbound item:
    one the platform announced but the adapter did not download because its declared
    ``size`` is over the channel's inbound cap. It carries neither, and the gateway answers
    the sender naming the cap instead of running a turn without it.
    """

    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        ser_json_bytes="base64",
        val_json_bytes="base64",
        defer_build=True,
    )

    kind: AttachmentKind
    path: Path | None = None
    data: bytes | None = Field(default=None, repr=False)
    mime_type: str | None = None
    filename: str | None = None
    #: Size in bytes as declared by the platform (checked against caps before download)
    #: or measured from ``data``.
    size: int | None = Field(default=None, ge=0)
    #: A per-item caption for outbound media; platforms that take one caption use the first.
    caption: str | None = None
    #: Announced by the platform but not downloaded (over the inbound cap); no bytes.
    withheld: bool = False

    @model_validator(mode="before")
    @classmethod
    def _measure_data(cls, values: Any) -> Any:
        if isinstance(values, dict) and values.get("size") is None:
            data = values.get("data")
            if isinstance(data, bytes | bytearray):
                values = {**values, "size": len(data)}
        return values

    @model_validator(mode="after")
    def _one_source(self) -> Attachment:
        if self.withheld:
            if self.path is not None or self.data is not None:
                raise ValueError("a withheld Attachment carries no path or data")
            return self
        if (self.path is None) == (self.data is None):
            raise ValueError("an Attachment needs exactly one of path or data")
        return self

    def read_bytes(self) -> bytes:
        """The attachment's bytes. Reads the file for path attachments, so it blocks."""
        if self.withheld:
            raise ValueError("a withheld attachment was never downloaded; it has no bytes")
        if self.data is not None:
            return self.data
        assert self.path is not None
        return self.path.read_bytes()


def _utcnow() -> datetime:
    return datetime.now(UTC)


class InboundMessage(BaseModel):
    """One platform message, normalized.

    Platform ids are strings even where the platform uses integers (Telegram), so that a
    conversation key built from them compares equal however the adapter received them.
    ``local`` marks local surfaces (cli, acp) that authorize by where they run rather than
    by sender id. ``raw_ref`` is an opaque handle for the adapter's own later use (a reply
    target, a media file id); it is never serialized.
    """

    model_config = ConfigDict(
        frozen=True, extra="forbid", coerce_numbers_to_str=True, defer_build=True
    )

    channel: str = Field(min_length=1)
    chat_id: str = Field(min_length=1)
    thread_id: str | None = None
    sender_id: str = Field(min_length=1)
    #: The sender's display name as the platform shows it, when the adapter knows it. It
    #: is chosen by the sender, so it labels messages in group chats but never decides
    #: trust: that is ``sender_id``'s job.
    sender_name: str | None = None
    text: str = ""
    attachments: list[Attachment] = Field(default_factory=list)
    message_id: str | None = None
    is_group: bool = False
    local: bool = False
    received_at: datetime = Field(default_factory=_utcnow)
    raw_ref: Any = Field(default=None, exclude=True, repr=False)

    @property
    def conversation_key(self) -> ConversationKey:
        return ConversationKey(self.channel, self.chat_id, self.thread_id)

    @property
    def is_empty(self) -> bool:
        """No text and no media: the gateway answers "looks empty" and schedules no turn."""
        return not self.text.strip() and not self.attachments


class OutboundMessage(BaseModel):
    """A reply for one chat; ``silent`` asks the platform not to ring a notification.

    ``text`` is already rendered in the adapter's ``dialect`` unless ``plain`` is set: then
    it is plain text (the resend after a :class:`ChannelFormatError`) and the adapter sends
    it with no markup mode. Adapters always disable link previews.
    """

    model_config = ConfigDict(
        frozen=True, extra="forbid", coerce_numbers_to_str=True, defer_build=True
    )

    chat_id: str = Field(min_length=1)
    thread_id: str | None = None
    text: str = ""
    attachments: list[Attachment] = Field(default_factory=list)
    reply_to: str | None = None
    silent: bool = False
    plain: bool = False

    @model_validator(mode="after")
    def _not_empty(self) -> OutboundMessage:
        if not self.text.strip() and not self.attachments:
            raise ValueError(
                "an outbound message needs text or an attachment; platforms reject blank messages"
            )
        return self


class SentMessage(BaseModel):
    """What the platform assigned to a sent message, for later edits, deletes and reactions."""

    model_config = ConfigDict(
        frozen=True, extra="forbid", coerce_numbers_to_str=True, defer_build=True
    )

    message_id: str = Field(min_length=1)


class DeliveryResult(StrEnum):
    """What :meth:`ChannelHost.deliver` did with a message."""

    #: Handed to the gateway (the turn runs later; deliver never waits for it).
    ACCEPTED = "accepted"
    #: The platform id was seen before (a retry, a redelivery, a restart): nothing ran.
    DUPLICATE = "duplicate"
    #: Not authorized (a stranger, a refused channel): dropped with no reply.
    DROPPED = "dropped"


#: Any callable shaped like :meth:`ChannelHost.deliver`.
Deliver = Callable[[InboundMessage], Awaitable[DeliveryResult]]

#: The health states a channel reports through :meth:`ChannelHost.report`.
HEALTH_STATES: tuple[str, ...] = ("starting", "ready", "degraded", "stopped", "refused")


class ChannelError(Exception):
    """A channel operation failed; the message says what to check next.

    Raised as itself, it is a permanent refusal (bad chat, closed 24-hour window …) that
    the core does not retry.
    """


class ChannelCapabilityError(ChannelError):
    """An optional ability was used on a channel that does not declare it."""

    def __init__(self, channel: str, ability: str, flag: str) -> None:
        self.channel = channel
        self.ability = ability
        self.flag = flag
        super().__init__(f"channel {channel!r} cannot {ability}; check `{flag}` before calling it")


class ChannelRateLimited(ChannelError):
    """The platform asked us to slow down (HTTP 429, flood control); the core waits, retries.

    ``retry_after`` is the platform's wait in seconds, ``None`` when it named none.
    """

    def __init__(self, retry_after: float | None = None, message: str | None = None) -> None:
        self.retry_after = retry_after
        if message is None:
            wait = f"; retry after {retry_after:g}s" if retry_after is not None else ""
            message = f"the platform rate-limited this send{wait}"
        super().__init__(message)


class ChannelTransientError(ChannelError):
    """A failure worth retrying with backoff: a 5xx answer, a network error, a timeout."""


class ChannelFormatError(ChannelError):
    """The platform rejected the formatting; the core resends that message once as plain."""


class DeliveryUnavailable(Exception):
    """:meth:`ChannelHost.deliver` could not hand the message off (the gateway is down,
    the daemon is stopping). The idempotency record was rolled back, so the platform's
    retry is accepted; a webhook answers 503."""


# ----------------------------------------------------------------------------- webhooks


@dataclass(frozen=True)
class WebhookRequest:
    """One HTTP request to an adapter's webhook route, framework-free."""

    method: str
    path: str
    #: First value per query key.
    query: Mapping[str, str]
    #: Header names lower-cased.
    headers: Mapping[str, str]
    #: The raw body, already capped at the route's ``max_body_bytes`` by the ingress.
    body: bytes


@dataclass(frozen=True)
class WebhookResponse:
    """The adapter's answer to a :class:`WebhookRequest`."""

    status: int = 200
    body: bytes = b""
    content_type: str = "text/plain; charset=utf-8"
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class WebhookRoute:
    """An HTTP endpoint the daemon's ingress serves for an adapter."""

    path: str
    methods: tuple[str, ...]
    handler: Callable[[WebhookRequest], Awaitable[WebhookResponse]]
    max_body_bytes: int = 1_048_576


# ----------------------------------------------------------------------------- host


@runtime_checkable
class ChannelHost(Protocol):
    """What the runtime hands :meth:`Channel.start`: everything an adapter needs to run.

    ``task_group`` is the adapter's own supervised group: spawn receive loops there with
    ``host.task_group.start_soon(...)``, never with a bare ``asyncio.create_task``.
    """

    name: str
    #: The validated ``[fermix_channels.<name>]`` section model.
    config: Any
    task_group: anyio.abc.TaskGroup
    #: The runtime's shared HTTP client (an adapter may use its platform SDK instead).
    http: httpx.AsyncClient
    home: FermixHome
    #: Resolves secrets of the channel's section (``"@keyring"``, env/command references),
    #: consulting plugins' ``fermix_resolve_secret`` hooks: a
    #: :class:`~fermix_core.secrets.SecretResolver`. Blocking: call ``resolve`` on a worker
    #: thread (``anyio.to_thread.run_sync(host.secrets.resolve, field)``).
    secrets: Any
    #: The runtime facade lifecycle hooks get (:class:`~fermix_core.facade.ServiceHost`:
    #: gateway ingest, reply ports, config, telemetry, tasks); ``None`` without a service.
    service: Any

    async def deliver(self, message: InboundMessage) -> DeliveryResult:
        """Hand a normalized message to the gateway; returns once accepted.

        Checks ``(channel, message.message_id)`` against the durable seen-ids record first
        (:attr:`DeliveryResult.DUPLICATE`), then ingests it with this channel's reply port;
        never waits for the turn. Raises :class:`DeliveryUnavailable` (after rolling the
        seen record back) when the hand-off failed.
        """
        ...

    async def seen(self, platform_id: str) -> bool:
        """Whether a message with this platform id was already delivered (a pure query).

        For adapters that must drop a redelivery before doing costly work (a media
        download); :meth:`deliver` performs the recording check itself.
        """
        ...

    async def remember(self, platform_id: str) -> None:
        """Record *platform_id* as delivered without delivering anything.

        For platform messages merged into one delivered message (WhatsApp's per-image
        webhooks of one album): the merged message carries the first part's id, and each
        other part is remembered so its redelivery is a duplicate, never a turn.
        """
        ...

    def report(self, state: str, error: str | None = None) -> None:
        """Report this channel's health: one of :data:`HEALTH_STATES`."""
        ...

    def emit(self, name: str, **data: Any) -> None:
        """Telemetry, best effort."""
        ...


def inbound_cap(host: Any, kind: AttachmentKind, mime_type: str | None = None) -> int | None:
    """The gateway's own size cap in bytes for an inbound file of *kind* (audio: the
    transcription cap, ``[fermix_core.transcription] max_file_mb``), or ``None``.

    An adapter checks a file's declared size against it before downloading. The runtime's
    host answers through its optional ``inbound_cap`` method; a host without one (a test
    double) answers ``None``.
    """
    method = getattr(host, "inbound_cap", None)
    if method is None:
        return None
    cap = method(kind, mime_type)
    return cap if isinstance(cap, int) and not isinstance(cap, bool) else None


# ----------------------------------------------------------------------------- adapter


class Channel(ABC):
    """A platform adapter built from a :class:`~fermix_core.specs.ChannelSpec`'s factory.

    ``start(host)`` begins receiving and returns once the adapter is running; long-running
    receive loops run in ``host.task_group``. A loop that raises is a crash: the runtime
    cancels the adapter's task group, calls ``stop()`` and starts the same instance again
    after a capped, jittered backoff. Every inbound message goes to ``host.deliver``.
    ``stop`` must be safe to call twice and before ``start``.
    """

    name: str = ""
    supports_edit: bool = False
    supports_delete: bool = False
    supports_reactions: bool = False
    supports_typing: bool = False
    #: Presentation dialect replies arrive in: "telegram_html" | "discord" | "slack" |
    #: "whatsapp" | "signal" | "plain".
    dialect: str = "plain"
    #: Per-message text cap in the platform's own measure (``text_measure``).
    max_text: int = 4096
    #: "chars" (code points) or "utf16" (UTF-16 code units, Telegram).
    text_measure: str = "chars"
    #: Outbound media caps in bytes by AttachmentKind value ("image", "audio", "video",
    #: "document", "voice"); a kind absent here falls back to "document"'s cap.
    media_caps: Mapping[str, int] = MappingProxyType({})
    #: Largest inbound file in bytes the adapter downloads (the spec's "inbound media
    #: cap"); the gateway refuses a bigger image with a reply naming it. ``None``: the
    #: gateway's default (20 MB).
    max_inbound_media: int | None = None
    #: A fixed reaction set (Telegram emoji, Slack shortcodes), or None for any single emoji.
    reactions_allowed: tuple[str, ...] | None = None

    @abstractmethod
    async def start(self, host: ChannelHost) -> None:
        """Begin receiving; hand each inbound message to ``host.deliver``."""

    @abstractmethod
    async def stop(self) -> None:
        """Stop receiving and release the connection."""

    @abstractmethod
    async def send(self, message: OutboundMessage) -> SentMessage:
        """Send *message*; raise a :class:`ChannelError` (or a typed subclass) on refusal."""

    def webhook_routes(self) -> Sequence[WebhookRoute]:
        """HTTP endpoints this adapter needs (webhook channels: Slack, WhatsApp)."""
        return ()

    async def edit(self, chat_id: str, message_id: str, text: str, *, plain: bool = False) -> None:
        """Replace the text of a message this channel sent (draft streaming)."""
        raise ChannelCapabilityError(self.name, "edit messages", "supports_edit")

    async def delete(self, chat_id: str, message_id: str) -> None:
        """Delete a message this channel sent (/stop on a draft, reasoning status lines)."""
        raise ChannelCapabilityError(self.name, "delete messages", "supports_delete")

    async def react(self, chat_id: str, message_id: str, emoji: str) -> None:
        """Put an emoji reaction on a message (acknowledgements instead of filler replies)."""
        raise ChannelCapabilityError(self.name, "react to messages", "supports_reactions")

    async def typing(self, chat_id: str, thread_id: str | None = None) -> None:
        """Show a typing indicator while a turn runs."""
        raise ChannelCapabilityError(self.name, "show typing", "supports_typing")
