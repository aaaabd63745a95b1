"""The channel runtime: builds every enabled adapter from its spec, supervises it, keeps health.

Every channel — first-party or third-party — arrives the same way, as a
:class:`~fermix_core.specs.ChannelSpec` in the registry; the runtime decides for each:

* **disabled** (``enabled = false``, or unset on a channel that is not on by default) —
  not built; health ``stopped``;
* **refused** — a remote channel whose section authorizes nobody (no ``owner_user_id``, no
  allowlist): the refusal is logged and the adapter is not started. Its webhook routes stay
  up and deny every sender (the body is acknowledged and dropped unread);
* **unbuildable** — the factory cannot be imported (a missing extra, a missing adapter
  module) or does not produce a :class:`~fermix_core.channel.Channel`: reported by name
  with the fix, health ``refused``;
* otherwise **supervised**: started in its own task group with a
  :class:`RuntimeHost`; a crash (``start`` raising or timing out, a receive loop raising) is
  logged, the adapter is stopped and started again after a capped, jittered exponential
  backoff. Nothing an adapter does reaches the daemon or another channel.

Channels are started in registry order and stopped in reverse order. Health per channel —
``starting | ready | degraded | stopped | refused``, the last error, the last inbound and
outbound times — is what ``fermix status``, ``fermix doctor`` and ``/health/ready`` show.
"""

from __future__ import annotations

import heapq
import logging
import random
import re
import time
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import anyio.abc

from fermix_core.channel import (
    HEALTH_STATES,
    Attachment,
    AttachmentKind,
    Channel,
    ConversationKey,
    DeliveryResult,
    DeliveryUnavailable,
    InboundMessage,
    WebhookRequest,
    WebhookResponse,
    WebhookRoute,
)
from fermix_core.specs import ChannelSpec, resolve_ref

__all__ = [
    "Backoff",
    "ChannelHealth",
    "ChannelRuntime",
    "RuntimeHost",
    "build_problem",
    "channel_enabled",
    "channel_section",
]

log = logging.getLogger("fermix.channels")

_SOURCE_DIST = re.compile(r"\(([A-Za-z0-9_.\-]+) [^)]*\)$")


# --------------------------------------------------------------------------- backoff


@dataclass(frozen=True)
class Backoff:
    """Capped exponential backoff with jitter: ``min(cap, base·2^attempt)``, less up to
    ``jitter`` of it at random, so adapters that crashed together do not restart together."""

    base: float = 1.0
    cap: float = 60.0
    jitter: float = 0.5

    def delay(self, attempt: int, rand: Callable[[], float] = random.random) -> float:
        raw = min(self.cap, self.base * (2 ** min(attempt, 32)))
        return raw * (1.0 - self.jitter * rand())


# --------------------------------------------------------------------------- health


def _iso(stamp: float | None) -> str | None:
    return None if stamp is None else datetime.fromtimestamp(stamp, UTC).isoformat()


@dataclass
class ChannelHealth:
    """One channel's health as the runtime knows it."""

    name: str
    label: str = ""
    enabled: bool = False
    remote: bool = True
    state: str = "stopped"
    error: str | None = None
    since: float = field(default_factory=time.time)
    last_inbound: float | None = None
    last_outbound: float | None = None
    restarts: int = 0
    source: str | None = None
    #: The last reply that could not be delivered (a closed 24-hour window, a bad chat …).
    last_delivery_error: str | None = None
    last_delivery_error_at: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "label": self.label or self.name,
            "enabled": self.enabled,
            "remote": self.remote,
            "state": self.state,
            "error": self.error,
            "since": _iso(self.since),
            "last_inbound": _iso(self.last_inbound),
            "last_outbound": _iso(self.last_outbound),
            "restarts": self.restarts,
            "source": self.source,
            "last_delivery_error": self.last_delivery_error,
            "last_delivery_error_at": _iso(self.last_delivery_error_at),
        }


# --------------------------------------------------------------------------- config


def channel_section(spec: ChannelSpec, config: Any) -> Any:
    """The channel's validated section, or its model's defaults when the file has none."""
    section = config.section(f"fermix_channels.{spec.name}") if config is not None else None
    if section is not None or spec.config_model is None:
        return section
    try:
        return resolve_ref(spec.config_model).model_validate({})
    except Exception:  # a model without full defaults (or a broken one) has no default section
        return None


def channel_enabled(spec: ChannelSpec, section: Any) -> bool:
    """``enabled`` from the section, else the spec's default (Telegram and ACP are on)."""
    if isinstance(section, Mapping):
        value = section.get("enabled", spec.enabled_by_default)
    else:
        value = getattr(section, "enabled", spec.enabled_by_default)
    return bool(value)


def trust_refusal(spec: ChannelSpec, section: Any) -> str | None:
    """Why a remote channel would serve nobody (the sentence logged and shown), or ``None``."""
    if not spec.remote:
        return None
    gap = getattr(section, "trust_gap", None)
    if callable(gap):
        return gap()
    from fermix_core.gateway.trust import TrustPolicy

    return TrustPolicy.from_section(section, channel=spec.name).startup_problem()


def _distribution(source: str | None) -> str | None:
    match = _SOURCE_DIST.search(source or "")
    return match.group(1) if match else None


def build_problem(spec: ChannelSpec, source: str | None, exc: BaseException) -> str:
    """What went wrong building *spec*'s adapter, and the fix, in one sentence."""
    dist = _distribution(source)
    factory = spec.factory if isinstance(spec.factory, str) else None
    module = factory.partition(":")[0] if factory else ""
    missing = None
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, ModuleNotFoundError) and cause.name:
            missing = cause.name
            break
        cause = cause.__cause__
    disable = f"or set enabled = false in [fermix_channels.{spec.name}]"
    if missing is not None and module and (module == missing or module.startswith(missing + ".")):
        owner = dist or "the plugin that registers it"
        return (
            f"channel {spec.name!r} cannot be built: the installed {owner} has no adapter "
            f"module {module!r}; upgrade {owner}, {disable}"
        )
    if missing is not None:
        install = (
            f'pip install "{dist}[{spec.name}]"'
            if dist
            else f"install the package that provides {missing!r}"
        )
        return (
            f"channel {spec.name!r} cannot be built: its dependency {missing!r} is not "
            f"installed; run `{install}`, {disable}"
        )
    where = f"report it to {source}" if source else "report it to the plugin's author"
    return (
        f"channel {spec.name!r} cannot be built: its adapter factory failed "
        f"({type(exc).__name__}: {exc}); {where}, {disable}"
    )


def _describe(exc: BaseException) -> str:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc) or "no detail"
    return f"{type(exc).__name__}: {text}"


# --------------------------------------------------------------------------- ports and hosts


PortFactory = Callable[[Channel, ChannelSpec, "_Slot", "ChannelRuntime"], Any]

#: How often the typing indicator is renewed while a turn runs (platforms show it ~5 s).
TYPING_EVERY = 4.0
#: A turn answered sooner than this (once it runs) shows no typing indicator at all: the
#: reply itself arrives first, and the platform call (WhatsApp marks the message read with
#: it) is saved. A turn still queued behind its conversation's others shows none either.
TYPING_AFTER = 0.5
#: A turn longer than this stops renewing the indicator.
TYPING_MAX = 600.0
#: Typing indicators per second per channel, at most (bursts of as many). Each is a platform
#: call; under a flood (many turns slow only because they share the loop) they would cost
#: as much as the replies and slow every turn further. An indicator over the rate is
#: skipped; the turn's next renewal tries again.
TYPING_RATE = 10.0


def default_port(channel: Channel, spec: ChannelSpec, slot: _Slot, runtime: ChannelRuntime) -> Any:
    """The reply port of a channel's turns: an :class:`~.outbound.OutboundPort`."""
    from fermix_core.channels.outbound import OutboundPort
    from fermix_core.gateway.reply import features_of

    streaming = getattr(slot.section, "streaming", None)
    features = features_of(
        channel,
        local=not spec.remote,
        reactions=getattr(channel, "reactions_allowed", None),
        # Draft streaming needs a draft-capable spec, not only an adapter that can edit.
        draft=spec.supports_draft,
        streaming=streaming if isinstance(streaming, str) else None,
        # A surface where "/" is ordinary text (ACP) declares slash_commands = False.
        slash_commands=bool(getattr(channel, "slash_commands", True)),
    )
    health = slot.health

    def sent() -> None:
        health.last_outbound = time.time()

    def failed(reason: str) -> None:
        health.last_delivery_error = reason
        health.last_delivery_error_at = time.time()

    return OutboundPort(channel, features, on_sent=sent, on_failed=failed, emit=runtime.emit)


class _Typist:
    """Every turn's typing indicator, from one task.

    A turn shows the indicator once it has been *running* for :data:`TYPING_AFTER` (a
    message waiting in its conversation's queue shows none, and an instant reply none
    either), renewed every *every* seconds until it is done, for at most
    :data:`TYPING_MAX`. Watching a turn is a heap push, not a task and a timer of its own:
    under a webhook flood thousands of turns are queued at once, and a task per delivery
    (each with its cancel scope) cost more than the deliveries themselves — and its
    indicator calls went out for turns that had not even started.
    """

    def __init__(self, task_group: anyio.abc.TaskGroup, rate: float | None = None) -> None:
        self._tg = task_group
        self._due: list[tuple[float, int, _Typing]] = []
        self._order = 0
        self._wake = anyio.Event()
        self._running = False
        self.rate = TYPING_RATE if rate is None else rate
        #: Per channel: (tokens, when they were counted).
        self._buckets: dict[str, tuple[float, float]] = {}
        #: Indicators skipped over the rate (the benchmark reports it).
        self.skipped = 0

    def _allow(self, channel: str, now: float) -> bool:
        tokens, then = self._buckets.get(channel, (self.rate, now))
        tokens = min(self.rate, tokens + (now - then) * self.rate)
        allowed = tokens >= 1.0
        self._buckets[channel] = (tokens - 1.0 if allowed else tokens, now)
        return allowed

    def watch(
        self, typing: Callable[..., Any], message: InboundMessage, job: Any, every: float
    ) -> None:
        self._push(time.monotonic() + TYPING_AFTER, _Typing(typing, message, job, every))
        if not self._running:
            self._running = True
            self._tg.start_soon(self._serve, name="channel typing indicators")

    def _push(self, when: float, entry: _Typing) -> None:
        self._order += 1
        first = not self._due or when < self._due[0][0]
        heapq.heappush(self._due, (when, self._order, entry))
        if first:
            self._wake.set()

    async def _serve(self) -> None:
        due = self._due
        while True:
            self._wake = anyio.Event()
            if not due:
                await self._wake.wait()
                continue
            wait = due[0][0] - time.monotonic()
            if wait > 0:
                with anyio.move_on_after(wait):
                    await self._wake.wait()
                continue
            _, _, entry = heapq.heappop(due)
            job = entry.job
            if job.done.is_set():
                continue
            now = time.monotonic()
            if not job.started:  # still queued behind its conversation's other turns
                self._push(now + TYPING_AFTER, entry)
                continue
            if entry.since is None:
                entry.since = now
            elif now - entry.since >= TYPING_MAX:
                continue
            if self._allow(entry.message.channel, now):
                self._tg.start_soon(self._type, entry)
            else:
                self.skipped += 1
            self._push(now + entry.every, entry)

    async def _type(self, entry: _Typing) -> None:
        try:
            await entry.typing(entry.message.chat_id, entry.message.thread_id)
        except Exception as exc:  # best effort: never the runtime's (or a turn's) failure
            log.debug("typing indicator for %s failed: %s", entry.message.chat_id, exc)


@dataclass(eq=False)
class _Typing:
    typing: Callable[..., Any]
    message: InboundMessage
    job: Any
    every: float
    #: When the first indicator went out (the TYPING_MAX clock).
    since: float | None = None


class RuntimeHost:
    """The :class:`~fermix_core.channel.ChannelHost` the runtime gives one adapter."""

    def __init__(self, runtime: ChannelRuntime, slot: _Slot) -> None:
        self._runtime = runtime
        self._slot = slot
        self.name = slot.spec.name
        self.config = slot.section
        self.http = runtime.http
        self.home = runtime.home
        #: The runtime facade lifecycle hooks get (``None`` outside a running service).
        self.service = runtime.service
        self._task_group: anyio.abc.TaskGroup | None = None
        self._secrets: Any = None

    @property
    def secrets(self) -> Any:
        """A :class:`~fermix_core.secrets.SecretResolver` that consults plugins'
        ``fermix_resolve_secret`` hooks; a fresh cache on every start of the adapter."""
        if self._secrets is None:
            if self.service is not None:
                self._secrets = self.service.new_secret_resolver()
            else:
                from fermix_core.secrets import SecretResolver

                self._secrets = SecretResolver()
        return self._secrets

    @property
    def task_group(self) -> anyio.abc.TaskGroup:
        if self._task_group is None:
            raise RuntimeError(
                f"channel {self.name!r} is not running; its task group exists between start() "
                "and stop()"
            )
        return self._task_group

    async def deliver(self, message: InboundMessage) -> DeliveryResult:
        return await self._runtime.deliver(self._slot, message)

    async def submit(
        self, message: InboundMessage, *, cwd: Path | None = None
    ) -> tuple[DeliveryResult, Any]:
        """:meth:`deliver` for a local surface that waits on its turn (ACP's prompt).

        Returns the result and the queued :class:`~fermix_core.gateway.types.TurnJob`
        (``None`` unless a turn was queued); ``cwd`` is the request directory, which the
        gateway honours for local operator callers only.
        """
        return await self._runtime.submit(self._slot, message, cwd=cwd)

    async def stop_conversation(self, key: ConversationKey) -> Any:
        """End the running turn and clear the queue of *key*, as ``/stop`` does."""
        return await self._runtime.gateway.services.stop_conversation(key)

    async def history(self, key: ConversationKey) -> list[tuple[str, str]]:
        """``(role, text)`` of *key*'s replayed history, oldest first: the user and
        assistant messages with text (what a local surface shows when it reopens a
        conversation, ACP's ``session/load``). Empty when there is none."""
        store = getattr(self._runtime.gateway.services, "store", None)
        if store is None:
            return []
        rows = await store.load_window(await store.conversation_id(key))
        shown: list[tuple[str, str]] = []
        for row in rows:
            message = row.message
            if message.role in ("user", "assistant") and message.text.strip():
                shown.append((message.role, message.text))
        return shown

    def inbound_cap(self, kind: AttachmentKind, mime_type: str | None = None) -> int | None:
        """The gateway's own size cap in bytes for an inbound file of *kind* and
        *mime_type* (audio: ``[fermix_core.transcription] max_file_mb``), or ``None`` when
        it sets none. An adapter skips the download of a file declared larger and hands
        over :func:`fermix_core.transcription.inbound.withheld` instead."""
        from fermix_core.transcription.inbound import needs_transcription

        transcriber = getattr(self._runtime.gateway, "transcriber", None)
        if transcriber is None:
            return None
        probe = Attachment(kind=kind, data=b"", mime_type=mime_type)
        return transcriber.cap_bytes if needs_transcription(probe) else None

    async def seen(self, platform_id: str) -> bool:
        seen = self._runtime.seen_ids
        return seen is not None and await seen.seen(self.name, platform_id)

    async def remember(self, platform_id: str) -> None:
        seen = self._runtime.seen_ids
        if seen is not None:
            await seen.claim(self.name, platform_id)

    def report(self, state: str, error: str | None = None) -> None:
        self._runtime.set_state(self._slot, state, error)

    def emit(self, name: str, **data: Any) -> None:
        if name == "channel.delivery_failed":
            # A platform's asynchronous "not delivered" (a failed WhatsApp status callback).
            self._slot.health.last_delivery_error = str(data.get("error") or "not delivered")
            self._slot.health.last_delivery_error_at = time.time()
        data.pop("channel", None)
        self._runtime.emit(name, channel=self.name, **data)


class StartTimeout(RuntimeError):
    """An adapter's ``start`` did not return in time: handled like a crash."""


@dataclass(eq=False)
class _Slot:
    spec: ChannelSpec
    section: Any
    health: ChannelHealth
    channel: Channel | None = None
    host: RuntimeHost | None = None
    port: Any = None
    refused: bool = False
    supervised: bool = False
    stop_requested: anyio.Event = field(default_factory=anyio.Event)
    done: anyio.Event = field(default_factory=anyio.Event)


# --------------------------------------------------------------------------- runtime


class ChannelRuntime:
    """Builds, supervises and reports on every registered channel.

    Use :meth:`running` (an async context manager) from the daemon once the gateway is
    ready; the block's end stops every adapter in reverse order.
    """

    def __init__(
        self,
        specs: Iterable[ChannelSpec],
        *,
        config: Any,
        gateway: Any,
        home: Any,
        http: Any = None,
        seen_ids: Any = None,
        sources: Mapping[str, str | None] | None = None,
        emit: Callable[..., object] | None = None,
        available: Callable[[], bool] = lambda: True,
        backoff: Backoff | None = None,
        start_timeout: float = 30.0,
        stop_timeout: float = 10.0,
        port_factory: PortFactory = default_port,
        service: Any = None,
    ) -> None:
        self.specs = list(specs)
        #: The :class:`~fermix_core.facade.ServiceHost` every adapter's host carries.
        self.service = service
        self.config = config
        self.gateway = gateway
        self.home = home
        self.http = http
        self.seen_ids = seen_ids
        self.sources = dict(sources or {})
        self._emit = emit
        self._available = available
        self.backoff = backoff or Backoff()
        self.start_timeout = start_timeout
        self.stop_timeout = stop_timeout
        self.port_factory = port_factory
        self.slots: dict[str, _Slot] = {}
        self._changed = anyio.Event()
        self._task_group: anyio.abc.TaskGroup | None = None
        self._typist: _Typist | None = None
        self._started: list[_Slot] = []

    @classmethod
    def from_runtime(cls, runtime: Any, gateway: Any, **kwargs: Any) -> ChannelRuntime:
        """The runtime for a booted :class:`~fermix_core.runtime.Runtime`'s registry and config."""
        registry = runtime.registry
        specs = list(registry.typed(ChannelSpec).values())
        return cls(
            specs,
            config=runtime.config,
            gateway=gateway,
            home=runtime.home,
            sources={spec.name: registry.source_of(spec) for spec in specs},
            emit=runtime.emit,
            service=getattr(runtime, "service_host", None),
            **kwargs,
        )

    # ------------------------------------------------------------------ telemetry, health

    def emit(self, name: str, **data: Any) -> None:
        if self._emit is None:
            return
        try:
            self._emit(name, **data)
        except Exception:
            log.exception("telemetry emit of %s failed", name)

    def set_state(self, slot: _Slot, state: str, error: str | None = None) -> None:
        if state not in HEALTH_STATES:
            raise ValueError(
                f"channel {slot.spec.name!r} reported unknown state {state!r}; "
                f"use one of {', '.join(HEALTH_STATES)}"
            )
        health = slot.health
        if health.state == state and health.error == error:
            return
        health.state = state
        health.error = error
        health.since = time.time()
        self.emit("channel.health", channel=slot.spec.name, state=state, error=error)
        self._changed.set()
        self._changed = anyio.Event()

    def health(self) -> list[dict[str, Any]]:
        """Every channel's health, in registry order."""
        return [slot.health.as_dict() for slot in self.slots.values()]

    def ready(self) -> bool:
        """True when every enabled channel that is supervised is ``ready``."""
        return all(slot.health.state == "ready" for slot in self.slots.values() if slot.supervised)

    async def wait_for(
        self, name: str, *states: str, timeout: float = 10.0, restarts: int = 0
    ) -> ChannelHealth:
        """Wait until channel *name* is in one of *states* (after at least *restarts*
        restarts); a failure bound for tests and start-up, never a pacing wait."""
        with anyio.fail_after(timeout):
            while True:
                slot = self.slots.get(name)
                if (
                    slot is not None
                    and slot.health.state in states
                    and slot.health.restarts >= restarts
                ):
                    return slot.health
                await self._changed.wait()

    # ------------------------------------------------------------------ building

    def plan(self) -> None:
        """Decide every channel's fate and build the adapters that will run (or be refused)."""
        for spec in self.specs:
            if spec.name in self.slots:
                continue
            source = self.sources.get(spec.name)
            section = channel_section(spec, self.config)
            enabled = channel_enabled(spec, section)
            configured = (
                self.config is None
                or self.config.section(f"fermix_channels.{spec.name}") is not None
            )
            health = ChannelHealth(
                spec.name, spec.label, enabled=enabled, remote=spec.remote, source=source
            )
            slot = _Slot(spec, section, health)
            self.slots[spec.name] = slot
            if not enabled:
                continue
            refusal = trust_refusal(spec, section)
            try:
                slot.channel = self._build(spec, section)
            except Exception as exc:
                problem = build_problem(spec, source, exc)
                if not configured:
                    # On by default, never configured, and this install lacks its adapter
                    # (a missing extra): not an error the user asked for.
                    log.info("%s", problem)
                    slot.health.enabled = False
                    continue
                log.error("%s", problem)
                self.set_state(slot, "refused", problem)
                continue
            slot.host = RuntimeHost(self, slot)
            slot.port = self.port_factory(slot.channel, spec, slot, self)
            if refusal is not None:
                slot.refused = True
                log.warning("channel %s refused to start: %s", spec.name, refusal)
                self.set_state(slot, "refused", refusal)
            else:
                slot.supervised = True

    def _build(self, spec: ChannelSpec, section: Any) -> Channel:
        if spec.factory is None:
            raise TypeError("the spec names no factory")
        factory = resolve_ref(spec.factory)
        channel = factory(config=section, http=self.http, home=self.home)
        if not isinstance(channel, Channel):
            raise TypeError(
                f"the factory returned {type(channel).__name__}, not a fermix_core.channel.Channel"
            )
        if channel.name != spec.name:
            raise TypeError(
                f"the adapter calls itself {channel.name!r} but is registered as {spec.name!r}"
            )
        return channel

    def webhook_routes(self) -> list[tuple[str, WebhookRoute]]:
        """``(channel, route)`` for every built adapter's webhook routes.

        A refused channel's routes answer without its handler: the request is acknowledged
        and dropped unread, so nobody is served and the platform stops retrying.
        """
        routes: list[tuple[str, WebhookRoute]] = []
        for slot in self.slots.values():
            if slot.channel is None:
                continue
            try:
                declared = list(slot.channel.webhook_routes())
            except Exception as exc:
                log.error("channel %s: webhook_routes() failed: %s", slot.spec.name, _describe(exc))
                continue
            for route in declared:
                if slot.refused:
                    route = _refusing(slot.spec.name, route)
                routes.append((slot.spec.name, route))
        return routes

    # ------------------------------------------------------------------ delivery

    async def deliver(self, slot: _Slot, message: InboundMessage) -> DeliveryResult:
        result, _job = await self.submit(slot, message)
        return result

    async def submit(
        self, slot: _Slot, message: InboundMessage, *, cwd: Path | None = None
    ) -> tuple[DeliveryResult, Any]:
        """Deliver *message*; the result and the queued turn job (``None`` if none)."""
        name = slot.spec.name
        if not isinstance(message, InboundMessage):
            raise TypeError(f"deliver() takes an InboundMessage, not {type(message).__name__}")
        if message.channel != name:
            raise ValueError(
                f"channel {name!r} delivered a message labelled {message.channel!r}; set "
                f"InboundMessage.channel to the adapter's own name"
            )
        if slot.refused or slot.port is None:
            return DeliveryResult.DROPPED, None
        platform_id = message.message_id
        seen = self.seen_ids
        claimed = False
        if platform_id is not None and seen is not None:
            try:
                if not await seen.claim(name, platform_id):
                    self.emit("channel.duplicate", channel=name)
                    return DeliveryResult.DUPLICATE, None
            except Exception as exc:
                raise DeliveryUnavailable(
                    f"channel {name!r}: the seen-ids record failed ({_describe(exc)})"
                ) from exc
            claimed = True
        try:
            if not self._available():
                raise DeliveryUnavailable("the daemon is stopping; the platform should retry")
            if cwd is None:
                outcome = await self.gateway.ingest(message, slot.port)
            else:
                outcome = await self.gateway.ingest(message, slot.port, cwd=cwd)
            status = str(getattr(outcome, "status", ""))
            if status == "unavailable":
                raise DeliveryUnavailable("the agent is restarting; the platform should retry")
        except BaseException as exc:
            if claimed:
                with anyio.CancelScope(shield=True):
                    try:
                        await seen.release(name, platform_id)
                    except Exception:
                        log.exception("channel %s: releasing message id failed", name)
            if isinstance(exc, DeliveryUnavailable | anyio.get_cancelled_exc_class()):
                raise
            if not isinstance(exc, Exception):
                raise
            log.error("channel %s: hand-off to the gateway failed: %s", name, _describe(exc))
            raise DeliveryUnavailable(
                f"channel {name!r}: the hand-off failed ({_describe(exc)})"
            ) from exc
        if status == "dropped":
            return DeliveryResult.DROPPED, None
        slot.health.last_inbound = time.time()
        job = getattr(outcome, "job", None)
        typing = getattr(slot.port, "typing", None)
        if (
            job is not None
            and callable(typing)
            and getattr(slot.channel, "supports_typing", False)
            and self._typist is not None
        ):
            every = float(getattr(slot.channel, "typing_interval", TYPING_EVERY) or TYPING_EVERY)
            self._typist.watch(typing, message, job, every)
        return DeliveryResult.ACCEPTED, job

    # ------------------------------------------------------------------ supervision

    @asynccontextmanager
    async def running(self) -> AsyncIterator[ChannelRuntime]:
        """Plan, start every supervised channel, and stop them all (reverse order) on exit."""
        self.plan()
        async with anyio.create_task_group() as tg:
            self._task_group = tg
            self._typist = _Typist(tg)
            for slot in self.slots.values():
                if slot.supervised:
                    self._started.append(slot)
                    tg.start_soon(self._supervise, slot, name=f"channel {slot.spec.name}")
            try:
                yield self
            finally:
                with anyio.CancelScope(shield=True):
                    await self._stop_all()
                tg.cancel_scope.cancel()
        self._task_group = None
        self._typist = None

    async def _stop_all(self) -> None:
        for slot in reversed(self._started):
            slot.stop_requested.set()
            with anyio.move_on_after(self.stop_timeout + 1.0) as scope:
                await slot.done.wait()
            if scope.cancelled_caught:
                log.error("channel %s did not stop within %.0fs", slot.spec.name, self.stop_timeout)

    async def _supervise(self, slot: _Slot) -> None:
        attempt = 0
        try:
            while not slot.stop_requested.is_set():
                began = time.monotonic()
                crash = await self._run_once(slot)
                if crash is None:
                    break
                if time.monotonic() - began >= self.backoff.cap:
                    attempt = 0  # it ran stably for a while: start over from a short wait
                delay = self.backoff.delay(attempt)
                attempt += 1
                slot.health.restarts += 1
                reason = _describe(crash)
                log.error(
                    "channel %s crashed (%s); restarting in %.1fs",
                    slot.spec.name,
                    reason,
                    delay,
                    exc_info=crash,
                )
                self.emit("channel.restart", channel=slot.spec.name, delay=delay, error=reason)
                self.set_state(slot, "degraded", f"crashed: {reason}; restarting")
                with anyio.move_on_after(delay):
                    await slot.stop_requested.wait()
        finally:
            self.set_state(slot, "stopped", slot.health.error if slot.health.restarts else None)
            slot.done.set()

    async def _run_once(self, slot: _Slot) -> BaseException | None:
        """Start the adapter and run it until stop is requested; the crash, if it crashed."""
        assert slot.channel is not None
        assert slot.host is not None
        channel, host = slot.channel, slot.host
        self.set_state(slot, "starting", slot.health.error)
        crash: BaseException | None = None
        try:
            async with anyio.create_task_group() as tg:
                host._task_group = tg
                host._secrets = None  # every start resolves its credentials afresh
                with anyio.move_on_after(self.start_timeout) as deadline:
                    await channel.start(host)
                if deadline.cancelled_caught:
                    raise StartTimeout(f"start() did not return within {self.start_timeout:g}s")
                if slot.health.state == "starting":
                    self.set_state(slot, "ready")
                await slot.stop_requested.wait()
                tg.cancel_scope.cancel()
        except Exception as exc:
            crash = exc
        finally:
            host._task_group = None
            with anyio.CancelScope(shield=True):
                await self._stop_adapter(slot)
        return crash

    async def _stop_adapter(self, slot: _Slot) -> None:
        assert slot.channel is not None
        try:
            with anyio.fail_after(self.stop_timeout):
                await slot.channel.stop()
        except TimeoutError:
            log.error(
                "channel %s: stop() did not return within %gs", slot.spec.name, self.stop_timeout
            )
        except Exception as exc:
            log.error("channel %s: stop() failed: %s", slot.spec.name, _describe(exc))


def _refusing(name: str, route: WebhookRoute) -> WebhookRoute:
    async def refuse(request: WebhookRequest) -> WebhookResponse:
        log.debug("channel %s is refused; dropped a %s to %s", name, request.method, request.path)
        if request.method == "GET":
            return WebhookResponse(403, b"this channel is not configured to serve anyone\n")
        return WebhookResponse(200)

    return WebhookRoute(route.path, route.methods, refuse, route.max_body_bytes)


def summarize(health: Sequence[Mapping[str, Any]]) -> str:
    """One line: ``telegram ready, slack refused`` (enabled channels only)."""
    parts = [f"{h['name']} {h['state']}" for h in health if h.get("enabled")]
    return ", ".join(parts) or "none enabled"


def _ingress(runtime: Any, service: Any, channels: ChannelRuntime) -> Any:
    from fermix_core import __version__
    from fermix_core.channels.ingress import HttpIngress, app_factory, resolve_bind

    web = runtime.config.core.fermix_web

    def live() -> dict[str, Any]:
        return {
            "ok": bool(service.available),
            "version": __version__,
            "channels": summarize(channels.health()),
        }

    def ready() -> tuple[bool, dict[str, Any]]:
        available = bool(service.available)
        ok = available and channels.ready()
        payload = {"ready": ok, "available": available, "channels": channels.health()}
        if service.mcp is not None:
            # Listed, never awaited: a slow or failed MCP server does not hold readiness.
            payload["mcp"] = service.mcp.status()
        return ok, payload

    make_app, served = app_factory(
        live=live, ready=ready, routes=channels.webhook_routes(), max_body_bytes=web.max_body_bytes
    )
    bind = resolve_bind(runtime.environ)
    return HttpIngress(make_app=make_app, bind=bind, port=web.port, routes=served)


@asynccontextmanager
async def daemon_channels(runtime: Any, service: Any) -> AsyncIterator[ChannelRuntime]:
    """The daemon's channels: the seen-ids record, one shared HTTP client, the runtime.

    Entered once the service's gateway is ready; on exit every adapter is stopped (in
    reverse order) before the client and the record close.
    """
    import httpx

    from fermix_core.channels.idempotency import SeenIds
    from fermix_core.httpclient import runtime_client

    seen = await SeenIds.open(runtime.home.memory_db)
    try:
        # The runtime client's settings (keep-alive expiry, no redirects) and its deferred
        # trust store: the CA bundle loads on the first TLS connection, not at boot.
        async with runtime_client(lean=True, timeout=httpx.Timeout(30.0, connect=10.0)) as http:
            channels = ChannelRuntime.from_runtime(
                runtime,
                service.gateway,
                http=http,
                seen_ids=seen,
                available=lambda: bool(service.available),
            )
            async with channels.running(), _ingress(runtime, service, channels).serving() as info:
                service.channels = channels
                service.ingress = info
                try:
                    yield channels
                finally:
                    service.channels = None
    finally:
        with anyio.CancelScope(shield=True):
            await seen.aclose()
