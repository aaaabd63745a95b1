"""The assembled, validated runtime that the daemon and embedding apps run on.

:meth:`Runtime.boot` is strict where :func:`fermix_core.boot.assemble` is forgiving: the
CLI must be able to show a broken install, but a daemon must not start on one. Boot
therefore raises on an invalid config and on an ``auth.json`` that other users can read,
and leaves plugin failures to the report (one broken plugin never stops the rest).
"""

from __future__ import annotations

import gc
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio

from fermix_core.boot import RUNTIME_KINDS, Assembly, assemble
from fermix_core.config import LoadedConfig
from fermix_core.facade import PluginTasks, ServiceHost
from fermix_core.home import FermixHome


@dataclass
class Runtime:
    """A booted runtime: the assembly, the validated config and the plugins' start-up state."""

    assembly: Assembly
    config: LoadedConfig
    #: Free space for plugins' start-up state (see ``fermix_startup``).
    state: dict[str, Any] = field(default_factory=dict)
    started: bool = False
    _service_host: ServiceHost | None = field(default=None, repr=False, compare=False)

    @property
    def home(self) -> FermixHome:
        return self.assembly.home

    @property
    def host(self) -> Any:
        return self.assembly.host

    @property
    def registry(self) -> Any:
        return self.assembly.registry

    @property
    def environ(self) -> Mapping[str, str]:
        return self.assembly.environ

    @classmethod
    def boot(
        cls,
        home: FermixHome | None = None,
        *,
        environ: Mapping[str, str] | None = None,
        plugins: Iterable[tuple[str, Any]] = (),
        entry_points: bool = True,
        config: Mapping[str, Any] | None = None,
    ) -> Runtime:
        """Assemble plugins and validate everything; raises ``ConfigError``/``AuthFileError``."""
        from fermix_core.authfile import AuthStore

        assembly = assemble(
            home,
            environ=environ,
            plugins=plugins,
            entry_points=entry_points,
            config=config,
            kinds=RUNTIME_KINDS,
        )
        config = assembly.load_config()
        assembly.home.ensure()
        AuthStore(assembly.home.auth_file).check_mode()
        return cls(assembly=assembly, config=config)

    def emit(self, name: str, **data: Any) -> Any:
        return self.host.emit(name, **data)

    @property
    def emitter(self) -> Callable[..., Any]:
        """The shortest callable that emits as :meth:`emit` does, for per-turn emitters.

        With the plugin host (as booted) that is its telemetry fan-out itself: two calls
        and two copies of the event's data less per event than through ``emit`` and the
        host. A host of another kind, or one whose ``emit`` was replaced, gets ``emit``.
        """
        from fermix_core.plugins.host import PluginHost
        from fermix_core.telemetry import Telemetry

        host = self.host
        telemetry = getattr(host, "telemetry", None)
        if (
            type(host).emit is PluginHost.emit
            and "emit" not in getattr(host, "__dict__", {})
            and type(telemetry) is Telemetry
        ):
            return telemetry.emit
        return self.emit

    @property
    def service_host(self) -> ServiceHost:
        """The facade lifecycle hooks receive (see :mod:`fermix_core.facade`)."""
        if self._service_host is None:
            self._service_host = ServiceHost(self)
        return self._service_host

    @asynccontextmanager
    async def serving(self, service: Any) -> AsyncIterator[list[tuple[str, str]]]:
        """Start plugins against the running *service*; stop them on exit.

        Yields the ``(plugin, error)`` failures of ``fermix_startup``. The hooks receive a
        :class:`~fermix_core.facade.ServiceHost` with the gateway, reply ports and a
        supervised task group; on exit every ``fermix_shutdown`` runs, then the plugins'
        background tasks are cancelled.
        """
        async with anyio.create_task_group() as group:
            self._service_host = ServiceHost(self, service, PluginTasks(group, self.emit))
            try:
                yield await self.start()
            finally:
                with anyio.CancelScope(shield=True):
                    await self.stop()
                group.cancel_scope.cancel()

    async def start(self) -> list[tuple[str, str]]:
        """Run every plugin's ``fermix_startup``; returns ``(plugin, error)`` for failures."""
        failures = await self.host.startup(self.service_host)
        self.started = True
        return failures

    async def stop(self) -> list[tuple[str, str]]:
        if not self.started:
            return []
        self.started = False
        return await self.host.shutdown(self.service_host)


#: Net new container objects between two young collections once the daemon is ready
#: (CPython's default is 700). See :func:`settle_after_boot`.
YOUNG_GC_THRESHOLD = 20_000


def settle_after_boot() -> None:
    """Move everything built so far out of the cyclic collector's sight (the daemon, once ready).

    Boot builds tens of thousands of long-lived objects (modules, config and plugin
    records, pydantic schemas). Full collections re-walked all of them and caused 30–50 ms
    pauses in turns; frozen, a collection walks only what turns created since.

    Young collections then wait for :data:`YOUNG_GC_THRESHOLD` new objects instead of 700:
    a turn's garbage is freed by reference counting (young collections found no cycles to
    free), so a young collection only walks, and promotes into older generations to be
    walked again there, the objects of turns still in flight. With 100 conversations at
    once those alone are about 5,000 objects: at a threshold of 5,000 the collector ran
    three to ten times per thousand turns (3-6 ms each, 5-8% of the CPU) and freed nothing;
    at 20,000 it runs about once while the caches fill, then not at all. One turn at a
    time, a collection comes every ~1,000 turns instead of every ~250 (the same total
    time, in fewer pauses). A higher threshold set beforehand is kept; the older
    generations' thresholds are not changed.
    """
    gc.collect()
    gc.freeze()
    young, middle, old = gc.get_threshold()
    gc.set_threshold(max(young, YOUNG_GC_THRESHOLD), middle, old)
