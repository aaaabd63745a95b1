"""Fermix's pytest fixtures, loaded through the ``pytest11`` entry point of fermix-core.

Pytest imports this module in *every* test session of every project that has fermix-core
installed, so it imports nothing but pytest at module level and cannot fail on import; each
fixture imports what it needs when a test asks for it. A project's own fixture of the same
name takes precedence, as with any pytest plugin.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:  # pragma: no cover - typing only
    from fermix_core.home import FermixHome
    from fermix_core.plugins.host import PluginHost
    from fermix_core.testing.fakedist import FakeDistribution
    from fermix_core.testing.providers import ScriptedProvider, ScriptItem

#: Keyring backend subprocesses get, so a test never reads or writes the real OS keyring.
_MEMORY_KEYRING = "fermix_core.keyring_backend.MemoryKeyring"


@pytest.fixture
def fermix_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FermixHome]:
    """A fresh, existing (0700) ``FERMIX_HOME`` with an empty in-memory keyring, both undone
    after the test.

    ``FERMIX_LOAD_PLUGINS`` is left as it is. Child processes inherit ``FERMIX_HOME`` and a
    ``PYTHON_KEYRING_BACKEND`` that points at an (empty) in-memory keyring as well.
    """
    import keyring

    from fermix_core.home import FermixHome
    from fermix_core.keyring_backend import MemoryKeyring

    # Read the current backend first: keyring initialises lazily from the environment, and
    # it must not see the variable set below and "restore" a memory keyring afterwards.
    previous = keyring.get_keyring()
    home = FermixHome(tmp_path / "fermix-home")
    home.ensure()
    monkeypatch.setenv("FERMIX_HOME", str(home.path))
    monkeypatch.setenv("PYTHON_KEYRING_BACKEND", _MEMORY_KEYRING)
    keyring.set_keyring(MemoryKeyring())
    try:
        yield home
    finally:
        keyring.set_keyring(previous)


@pytest.fixture
def plugin_host() -> PluginHost:
    """A fresh plugin host with no entry points loaded; register test plugins on it."""
    from fermix_core.plugins.host import PluginHost

    return PluginHost()


@pytest.fixture
def fake_distribution(tmp_path: Path) -> Callable[..., FakeDistribution]:
    """``fake_distribution(name, version, entry_points, modules)`` written under tmp_path.

    Activate the result with ``with dist.activate(): ...`` to make it importable.
    """
    from fermix_core.testing.fakedist import fake_distribution as write

    def factory(
        name: str,
        version: str = "1.0.0",
        entry_points: dict[str, str] | None = None,
        modules: dict[str, str] | None = None,
        **options: Any,
    ) -> FakeDistribution:
        return write(tmp_path, name, version, entry_points, modules, **options)

    return factory


@pytest.fixture
def scripted_provider() -> Callable[..., ScriptedProvider]:
    """``scripted_provider("hi", tool_call("x"), name=..., vision=...)`` builds a fake model."""
    from fermix_core.testing.providers import ScriptedProvider

    def factory(*turns: ScriptItem, **options: Any) -> ScriptedProvider:
        return ScriptedProvider(turns, **options)

    return factory
