"""Registers the built-in memory backends, and builds the configured one.

Registration yields spec records only; nothing here imports SQLite code until a backend is
actually opened. A backend factory is called as ``factory(home, config)`` — *home* is the
:class:`~fermix_core.home.FermixHome`, *config* the loaded config or ``None`` — and may
return the backend or an awaitable of it (opening a database is blocking work that
belongs on a worker thread).
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable
from typing import Any

from fermix_core.hookspecs import hookimpl
from fermix_core.specs import MemoryBackendSpec, resolve_ref

__all__ = [
    "INMEMORY",
    "SQLITE",
    "MemoryBackendUnavailable",
    "fermix_memory_backends",
    "open_backend",
]

SQLITE = MemoryBackendSpec(
    name="sqlite",
    factory="fermix_core.memory.sqlite:open_sqlite_backend",
    description="Facts and history search in FERMIX_HOME/memory.db (SQLite FTS5). The default.",
)
INMEMORY = MemoryBackendSpec(
    name="inmemory",
    factory="fermix_core.memory.inmemory:InMemoryBackend.from_home",
    description="Facts in process memory, lost on restart; for tests and throwaway embedding.",
)


class MemoryBackendUnavailable(RuntimeError):
    """The configured memory backend is not registered or could not be built."""


@hookimpl
def fermix_memory_backends() -> Iterable[MemoryBackendSpec]:
    return (SQLITE, INMEMORY)


async def open_backend(home: Any, config: Any = None, registry: Any = None) -> Any:
    """Build the backend ``[fermix_core.memory] backend`` names (``sqlite`` by default).

    *registry* is the plugin host's spec registry; without one only the built-in backends
    are known.
    """
    name = "sqlite"
    if config is not None:
        name = config.core.fermix_core.memory.backend
    specs: dict[str, MemoryBackendSpec] = {SQLITE.name: SQLITE, INMEMORY.name: INMEMORY}
    if registry is not None:
        specs.update(registry.typed(MemoryBackendSpec))
    spec = specs.get(name)
    if spec is None or spec.factory is None:
        known = ", ".join(sorted(specs))
        raise MemoryBackendUnavailable(
            f"memory backend {name!r} is not registered (known: {known}); fix "
            "[fermix_core.memory] backend or install the plugin that provides it"
        )
    try:
        factory = resolve_ref(spec.factory)
    except ImportError as exc:
        raise MemoryBackendUnavailable(
            f"memory backend {name!r} cannot be imported ({exc}); reinstall its plugin"
        ) from exc
    backend = factory(home, config)
    if inspect.isawaitable(backend):
        backend = await backend
    return backend
