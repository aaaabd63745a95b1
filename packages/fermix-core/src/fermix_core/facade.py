"""The running service as plugins see it: one typed facade for lifecycle hooks and channels.

``fermix_startup(runtime)`` and ``fermix_shutdown(runtime)`` receive a :class:`ServiceHost`;
every channel adapter's :class:`~fermix_core.channel.ChannelHost` carries the same object
as ``host.service``. Through it a plugin reaches what a running Fermix offers, without
touching the service's internals:

* :meth:`ServiceHost.ingest` — hand a message to the gateway (authorization, slash
  commands, the per-conversation queue), the supported way to feed messages in;
* :meth:`ServiceHost.reply_port` — a reply port: a running channel's, one over an
  adapter object, or one over a plain ``send`` callable;
* ``config``, ``home``, ``registry``, ``environ`` and ``state`` — what the boot produced;
* :meth:`ServiceHost.emit` — telemetry;
* ``task_group`` — supervised background work (a task that raises is logged and reported,
  never takes the service down), cancelled after every ``fermix_shutdown`` ran;
* ``secrets`` — a :class:`~fermix_core.secrets.SecretResolver` that consults plugins'
  ``fermix_resolve_secret`` hooks like core's own lookups do.

``docs/plugins.md`` ("The runtime facade") documents each member.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc

if TYPE_CHECKING:  # pragma: no cover - typing only
    from fermix_core.channel import InboundMessage, OutboundMessage, SentMessage
    from fermix_core.config import LoadedConfig
    from fermix_core.gateway.types import ChannelFeatures, IngestOutcome, ReplyPort
    from fermix_core.home import FermixHome
    from fermix_core.plugins.registry import SpecRegistry
    from fermix_core.runtime import Runtime
    from fermix_core.secrets import SecretResolver

__all__ = ["CallbackReply", "PluginTasks", "ServiceHost", "ServiceUnavailable"]

log = logging.getLogger("fermix.plugins")


class ServiceUnavailable(RuntimeError):
    """The facade was asked for something the running service does not offer (yet/any more)."""


class PluginTasks:
    """Background work for plugins, supervised: a task that raises is logged, never fatal.

    Shaped like an anyio task group (``start_soon``, ``start``). Tasks are cancelled when
    the service stops, after every plugin's ``fermix_shutdown`` has run, so a shutdown hook
    may still signal its own loop to finish.
    """

    def __init__(self, group: anyio.abc.TaskGroup, emit: Callable[..., Any]) -> None:
        self._group = group
        self._emit = emit

    def start_soon(
        self, func: Callable[..., Awaitable[Any]], *args: Any, name: str | None = None
    ) -> None:
        """Run ``await func(*args)`` in the background."""
        label = name or getattr(func, "__qualname__", repr(func))
        self._group.start_soon(self._guarded, func, args, label, name=label)

    async def start(
        self, func: Callable[..., Awaitable[Any]], *args: Any, name: str | None = None
    ) -> Any:
        """Run *func* (which takes ``task_status``) and wait until it calls ``started()``."""
        label = name or getattr(func, "__qualname__", repr(func))

        async def run(*, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
            await self._guarded(func, args, label, task_status=task_status)

        return await self._group.start(run, name=label)

    async def _guarded(
        self, func: Callable[..., Awaitable[Any]], args: tuple[Any, ...], label: str, **kw: Any
    ) -> None:
        try:
            await func(*args, **kw)
        except Exception as exc:
            log.exception("plugin task %s failed", label)
            self._emit("plugin.task_failed", task=label, error=type(exc).__name__)


class CallbackReply:
    """A reply port over an async ``send(OutboundMessage)`` callable.

    For an app or plugin that delivers answers itself (a queue, a websocket, a list in a
    test). ``send`` may return a :class:`~fermix_core.channel.SentMessage` or ``None``.
    """

    def __init__(
        self,
        send: Callable[[OutboundMessage], Awaitable[SentMessage | None]],
        features: ChannelFeatures | None = None,
    ) -> None:
        from fermix_core.gateway.types import ChannelFeatures

        self._send = send
        self.features = features if features is not None else ChannelFeatures()
        self._count = 0

    async def send(self, message: OutboundMessage) -> SentMessage:
        from fermix_core.channel import SentMessage

        self._count += 1
        sent = await self._send(message)
        return sent if isinstance(sent, SentMessage) else SentMessage(message_id=str(self._count))


class ServiceHost:
    """What lifecycle hooks receive (and channel adapters reach as ``host.service``)."""

    def __init__(
        self,
        runtime: Runtime,
        service: Any = None,
        tasks: PluginTasks | None = None,
    ) -> None:
        self.runtime = runtime
        self._service = service
        self._tasks = tasks
        self._secrets: SecretResolver | None = None

    # ------------------------------------------------------------------ what boot produced

    @property
    def home(self) -> FermixHome:
        return self.runtime.home

    @property
    def config(self) -> LoadedConfig:
        """The validated configuration (``config.section("fermix_weather")`` …)."""
        return self.runtime.config

    @property
    def registry(self) -> SpecRegistry:
        return self.runtime.registry

    @property
    def environ(self) -> Mapping[str, str]:
        return self.runtime.environ

    @property
    def state(self) -> dict[str, Any]:
        """Free space for plugins' start-up state, kept from start-up to shutdown."""
        return self.runtime.state

    @property
    def secrets(self) -> SecretResolver:
        """The service's secret resolver: environment, plugins' hooks, then the stored form.

        It caches each answer for the life of the service; :meth:`new_secret_resolver`
        gives one with an empty cache (a channel gets a fresh one on every start, so an
        adapter restarted after the keyring was unlocked asks again).
        """
        if self._secrets is None:
            self._secrets = self.new_secret_resolver()
        return self._secrets

    def new_secret_resolver(self) -> SecretResolver:
        from fermix_core.secrets import SecretResolver

        return SecretResolver(
            environ=self.runtime.environ,
            profile=self.runtime.config.core.fermix_core.profile,
            host=self.runtime.host,
        )

    def emit(self, name: str, **data: Any) -> Any:
        """Emit a telemetry event (observed by every ``fermix_event`` hook)."""
        return self.runtime.emit(name, **data)

    # ------------------------------------------------------------------ the running service

    @property
    def task_group(self) -> PluginTasks:
        if self._tasks is None:
            raise ServiceUnavailable(
                "no task group: this runtime was started without a running service "
                "(use Runtime.serving(service), as the daemon and Fermix.open do)"
            )
        return self._tasks

    def _gateway(self) -> Any:
        gateway = getattr(self._service, "gateway", None)
        if gateway is None:
            raise ServiceUnavailable(
                "the gateway is not running: ingest is available between fermix_startup and "
                "fermix_shutdown of a running daemon or Fermix.open block"
            )
        return gateway

    async def ingest(
        self, message: InboundMessage, reply: ReplyPort, *, cwd: Path | None = None
    ) -> IngestOutcome:
        """Hand *message* to the gateway; returns once it is answered, dropped or queued.

        ``message.channel`` picks the trust policy: a registered channel's (its section's
        owner and allowlist), or ``"cli"`` with ``local=True`` for an operator turn. The
        outcome's ``job`` (when a turn was queued) has a ``done`` event to wait on; the turn's
        answer goes to *reply* (see :meth:`reply_port`).
        """
        return await self._gateway().ingest(message, reply, cwd=cwd)

    def reply_port(self, target: Any) -> ReplyPort:
        """A reply port for :meth:`ingest` or for sending on one's own.

        *target* is a channel name (the running channel's own port: rendering, splitting,
        retries; :class:`ServiceUnavailable` while that channel is not up — channels start
        after ``fermix_startup``), a :class:`~fermix_core.channel.Channel` adapter object
        (a port over it with the same rendering and retries), or an async
        ``send(OutboundMessage)`` callable (a plain :class:`CallbackReply`).
        """
        from fermix_core.channel import Channel

        if isinstance(target, str):
            from fermix_core.jobs.delivery import channel_port

            port = channel_port(self._service, target)
            if port is None:
                raise ServiceUnavailable(
                    f"channel {target!r} is not running (it is disabled, refused, not started "
                    "yet or stopped); `fermix status` shows its state"
                )
            return port  # type: ignore[no-any-return]
        if isinstance(target, Channel):
            from fermix_core.channels.outbound import OutboundPort
            from fermix_core.gateway.reply import features_of

            return OutboundPort(target, features_of(target), emit=self.emit)  # type: ignore[return-value]
        if callable(target):
            return CallbackReply(target)
        raise TypeError(
            "reply_port() takes a channel name, a Channel adapter or an async send callable, "
            f"not {type(target).__name__}"
        )

    def __repr__(self) -> str:
        running = "running" if getattr(self._service, "gateway", None) is not None else "idle"
        return f"ServiceHost({self.home.path}, {running})"
