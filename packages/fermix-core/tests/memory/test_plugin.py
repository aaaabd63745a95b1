"""Backend registration through ``fermix_memory_backends`` and building the configured one."""

from __future__ import annotations

from pathlib import Path

import pytest
import tomlkit
from fermix_core.config import load_config
from fermix_core.home import FermixHome
from fermix_core.memory import InMemoryBackend
from fermix_core.memory import plugin as memory_plugin
from fermix_core.memory.plugin import MemoryBackendUnavailable, open_backend
from fermix_core.memory.sqlite import SqliteMemoryBackend
from fermix_core.plugins.host import PluginHost
from fermix_core.specs import MemoryBackendSpec

pytestmark = pytest.mark.anyio


def registry_with(*plugins):
    host = PluginHost()
    for name, plugin in plugins:
        host.register(plugin, name)
    return host.collect()


def test_the_hook_registers_sound_specs() -> None:
    registry = registry_with(("core.memory", memory_plugin))
    specs = registry.typed(MemoryBackendSpec)
    assert set(specs) == {"sqlite", "inmemory"}
    assert all(spec.problems() == [] for spec in specs.values())
    assert registry.errors == []


async def test_default_is_sqlite_on_memory_db(tmp_path: Path) -> None:
    home = FermixHome(tmp_path / "home")
    backend = await open_backend(home)
    try:
        assert isinstance(backend, SqliteMemoryBackend)
        assert backend.path == home.memory_db
        assert home.memory_db.exists()
    finally:
        await backend.aclose()


async def test_config_selects_the_backend(tmp_path: Path) -> None:
    home = FermixHome(tmp_path / "home")
    registry = registry_with(("core.memory", memory_plugin))
    document = tomlkit.parse('[fermix_core.memory]\nbackend = "inmemory"\n')
    config = load_config(home, registry, document=document, environ={})
    backend = await open_backend(home, config, registry)
    assert isinstance(backend, InMemoryBackend)
    assert not home.memory_db.exists()


class Broken:
    from fermix_core.hookspecs import hookimpl

    @staticmethod
    @hookimpl
    def fermix_memory_backends():
        yield MemoryBackendSpec(name="vanished", factory="no_such_module_xyz:Backend")


async def test_unknown_or_unimportable_backends_say_what_to_do(tmp_path: Path) -> None:
    home = FermixHome(tmp_path / "home")
    registry = registry_with(("core.memory", memory_plugin), ("broken", Broken()))

    class Config:
        class core:
            class fermix_core:
                class memory:
                    backend = "qdrant"

    with pytest.raises(MemoryBackendUnavailable, match=r"not registered.*install the plugin"):
        await open_backend(home, Config(), registry)
    Config.core.fermix_core.memory.backend = "vanished"
    with pytest.raises(MemoryBackendUnavailable, match="cannot be imported"):
        await open_backend(home, Config(), registry)
