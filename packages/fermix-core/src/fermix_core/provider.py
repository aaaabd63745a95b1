"""The provider contract: one request in, one normalized :class:`~fermix_core.messages.Turn` out.

An adapter hides its wire completely. What it must surface instead is *how* a call failed,
in a form the routing layer can act on without parsing text: an :class:`ErrorKind`, whether
the failure happened before any response byte arrived (``pre_response``) and whether the
user already saw streamed output (``visible_output``). Retry and failover decisions are
made from exactly those facts, elsewhere; this module only defines them.
"""

from __future__ import annotations

import inspect
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, field_validator

from fermix_core.messages import Message, ToolDefinition, Turn
from fermix_core.specs import REASONING_EFFORTS

if TYPE_CHECKING:  # pragma: no cover - typing only
    from fermix_core.media.limits import ImageLimits

__all__ = [
    "ChatRequest",
    "ErrorKind",
    "EventCallback",
    "Provider",
    "ProviderError",
    "ProviderSettings",
    "StreamEvent",
    "StreamEventKind",
]


class StreamEventKind(StrEnum):
    """What a streamed event carries.

    ``item_done`` marks a completed output item — the semantic boundary "block" streaming
    sends as its own message; ``text_delta`` feeds "draft" streaming's edited message.
    """

    TEXT_DELTA = "text_delta"
    REASONING_SUMMARY = "reasoning_summary"
    ITEM_DONE = "item_done"


class StreamEvent(BaseModel):
    """One increment of a streamed model call."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    kind: StreamEventKind
    #: The delta for ``text_delta``, the summary line for ``reasoning_summary``, the full
    #: text of the finished item for ``item_done`` (empty for a tool-call item).
    text: str = ""
    #: For ``item_done``: ``"message"``, ``"reasoning"`` or ``"tool_call"``.
    item_type: str | None = None


#: Receives streamed events; may be sync or async. It must be quick: it runs inline with
#: the stream, so a slow observer slows the model call down.
EventCallback = Callable[[StreamEvent], Awaitable[None] | None]


class ChatRequest(BaseModel):
    """Everything one model call needs, and nothing about where the turn came from.

    ``initial`` is true for the first call of a turn and false for continuations inside
    the tool loop (failover is only allowed on the former). ``inner_retry`` is false for
    scheduled jobs, which keep their own deadline-bounded retry and must not stack two.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    messages: list[Message] = Field(min_length=1)
    tools: list[ToolDefinition] = Field(default_factory=list)
    #: ``None`` lets the provider use its configured default model.
    model: str | None = None
    reasoning_effort: str | None = None
    stream: bool = False
    initial: bool = True
    inner_retry: bool = True
    on_event: EventCallback | None = Field(default=None, exclude=True, repr=False)

    @field_validator("reasoning_effort")
    @classmethod
    def _known_effort(cls, value: str | None) -> str | None:
        if value is not None and value not in REASONING_EFFORTS:
            raise ValueError(
                f"reasoning_effort {value!r} is not one of {', '.join(REASONING_EFFORTS)}"
            )
        return value

    @property
    def has_images(self) -> bool:
        """Whether any message (tool results included) carries an image."""
        return any(m.has_images for m in self.messages)

    async def emit(self, event: StreamEvent) -> None:
        """Hand *event* to ``on_event`` if there is one, awaiting it when it is async."""
        if self.on_event is None:
            return
        result = self.on_event(event)
        if inspect.isawaitable(result):
            await result


class ErrorKind(StrEnum):
    """Why a model call failed, in the vocabulary retry and failover decide on."""

    TIMEOUT = "timeout"
    TRANSPORT = "transport"
    #: No connection could be checked out at all (pool race, host just woke from sleep).
    CONNECTION_UNAVAILABLE = "connection_unavailable"
    SERVER_ERROR = "server_error"
    OVERLOADED = "overloaded"
    RATE_LIMIT = "rate_limit"
    QUOTA = "quota"
    AUTH = "auth"
    #: An OAuth credential that still failed after the adapter's own refresh and retry.
    OAUTH = "oauth"
    CONTEXT_LENGTH = "context_length"
    INVALID_REQUEST = "invalid_request"
    CONTENT_FILTER = "content_filter"
    #: The request carries input the route cannot take, e.g. an image to a text-only model.
    UNSUPPORTED_INPUT = "unsupported_input"
    UNKNOWN = "unknown"


class ProviderError(Exception):
    """A failed model call, classified.

    ``message`` is shown to people (and logged), so adapters must never put a credential,
    an Authorization header or a raw request body in it.
    """

    def __init__(
        self,
        kind: ErrorKind | str,
        message: str,
        *,
        provider: str | None = None,
        status: int | None = None,
        retry_after_seconds: float | None = None,
        pre_response: bool = False,
        visible_output: bool = False,
        url: str | None = None,
    ) -> None:
        self.kind = ErrorKind(kind)
        self.message = message
        self.provider = provider
        self.status = status
        self.retry_after_seconds = retry_after_seconds
        #: The adapter counted zero response chunks before failing (only chunk-counting
        #: adapters can claim this; a buffered adapter's timeout never does).
        self.pre_response = pre_response
        #: Something user-visible had already streamed, so a retry would duplicate it.
        self.visible_output = visible_output
        #: The URL the call went to (no query string, never credentials), for messages such
        #: as "could not reach … at <url>" that point at a wrong base_url.
        self.url = url
        super().__init__(message)

    def __str__(self) -> str:
        where = f"{self.provider}: " if self.provider else ""
        detail = [self.kind.value]
        if self.status is not None:
            detail.append(f"HTTP {self.status}")
        if self.retry_after_seconds is not None:
            detail.append(f"retry after {self.retry_after_seconds:g}s")
        return f"{where}{self.message} ({', '.join(detail)})"

    def __repr__(self) -> str:
        return (
            f"ProviderError(kind={self.kind.value!r}, message={self.message!r}, "
            f"provider={self.provider!r}, status={self.status!r})"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        # Keyword-only fields do not survive the default Exception pickling, and errors do
        # cross process boundaries (subagents, the daemon socket).
        return (_rebuild_provider_error, (self.kind.value, self.message, self._fields()))

    def _fields(self) -> dict[str, Any]:
        return {
            "provider": self.provider,
            "status": self.status,
            "retry_after_seconds": self.retry_after_seconds,
            "pre_response": self.pre_response,
            "visible_output": self.visible_output,
            "url": self.url,
        }


def _rebuild_provider_error(kind: str, message: str, fields: dict[str, Any]) -> ProviderError:
    return ProviderError(kind, message, **fields)


@dataclass(frozen=True)
class ProviderSettings:
    """What a provider factory receives besides its spec: resolved config for one route.

    Factories are called as ``factory(spec, settings)``. ``api_key`` is the resolved secret
    (environment, keyring, command …), never a reference. ``http`` is the runtime's shared
    client when there is one: a service's is a
    :class:`~fermix_core.directclient.DirectClient`, which has ``httpx.AsyncClient``'s
    interface (a plain ``build_request``/``send`` goes straight onto the HTTP/1.1 pool,
    every other method and option is a real ``httpx.AsyncClient``'s) and raises httpx's
    exceptions, but is not an instance of it; an adapter given ``None`` creates and owns
    its own. ``auth_store`` is the :class:`~fermix_core.authfile.AuthStore` OAuth modes read
    tokens from. ``options`` is the provider's own settings: its spec's ``config_model``
    validated against the keys of ``[fermix_core.providers.<name>]`` that core does not own
    (the model's defaults when the block sets none; ``None`` when the spec has no model).
    """

    name: str
    base_url: str | None = None
    api_key: str | None = field(default=None, repr=False)
    default_model: str | None = None
    reasoning_effort: str | None = None
    auth_mode: str = "api_key"
    fast: bool = False
    wire: str | None = None
    http: Any = field(default=None, repr=False, compare=False)
    auth_store: Any = field(default=None, repr=False, compare=False)
    options: Any = field(default=None, compare=False)
    extra: Mapping[str, Any] = field(default_factory=dict)
    #: Models the operator declared vision-capable (``vision_models``), beyond the catalog.
    vision_models: tuple[str, ...] = ()


class Provider(ABC):
    """A model backend built from a :class:`~fermix_core.specs.ProviderSpec`'s factory.

    Subclasses set ``name`` (the spec's name) and the capability flags, and implement
    :meth:`chat`. A provider owns its HTTP resources and releases them in :meth:`aclose`,
    which must be safe to call more than once.
    """

    name: str = ""
    #: ``chat`` honours ``request.stream`` and reports deltas through ``request.on_event``.
    supports_streaming: bool = False
    #: The adapter counts response chunks, so it can prove a failure was pre-response.
    counts_chunks: bool = False
    #: The largest image the wire takes, as plain numbers so declaring them imports
    #: nothing (adapters load on the cold ``fermix ask`` path): the long edge in pixels, the
    #: raw bytes per image (three quarters of a cap that is on the base64 text) and the
    #: formats sent. :meth:`prepare_images` downscales and re-encodes to them.
    image_max_edge: ClassVar[int] = 2048
    image_max_bytes: ClassVar[int] = 20 * 1024 * 1024
    image_types: ClassVar[frozenset[str]] = frozenset(
        {"image/png", "image/jpeg", "image/gif", "image/webp"}
    )

    @abstractmethod
    async def chat(self, request: ChatRequest) -> Turn:
        """Run one model call; raise :class:`ProviderError` on any failure."""

    async def aclose(self) -> None:  # noqa: B027 - an optional hook, not an abstract one
        """Release connections and other resources; the default holds none."""

    def vision(self, model: str | None = None) -> bool:
        """Whether *model* (``None``: the default model) accepts image input."""
        return False

    def unsupported_images(self, request: ChatRequest) -> ProviderError | None:
        """The error to raise when *request* carries images this route cannot see.

        Dropping an image silently would let the model answer about a picture it never
        saw, so adapters call this first and fail loud instead.
        """
        if request.has_images and not self.vision(request.model):
            from fermix_core.media.images import model_label

            return ProviderError(
                ErrorKind.UNSUPPORTED_INPUT,
                f"{model_label(self, request.model)} cannot read images; choose a "
                "vision-capable model or provider",
                provider=self.name or None,
            )
        return None

    @property
    def image_limits(self) -> ImageLimits:
        """:attr:`image_max_edge`, :attr:`image_max_bytes` and :attr:`image_types` as one
        :class:`~fermix_core.media.limits.ImageLimits`."""
        from fermix_core.media.limits import ImageLimits

        return ImageLimits(
            max_long_edge=self.image_max_edge,
            max_bytes=self.image_max_bytes,
            media_types=frozenset(self.image_types),
        )

    async def prepare_images(self, request: ChatRequest) -> ChatRequest:
        """*request* with its images ready for this wire; call it before encoding.

        Path images (history) are read, every image is downscaled and re-encoded to
        :attr:`image_limits` when it is larger, and a model without vision raises
        ``unsupported_input`` naming the model for the newest message's images, while
        older turns' images become a short note. A request without images is returned
        as it is, at no cost. See :mod:`fermix_core.media.images`.
        """
        if not request.has_images:
            return request
        from fermix_core.media.images import prepare_request

        return await prepare_request(self, request)

    async def __aenter__(self) -> Provider:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()
