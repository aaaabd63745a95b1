"""Test helpers for Fermix and for plugin authors.

Fakes (:class:`ScriptedProvider`, :class:`FunctionProvider`, :class:`MemoryChannel`,
:class:`StubChannelHost`), a fake
installed distribution for loader tests, and contract suites every implementation passes.
The pytest fixtures live in :mod:`fermix_core.testing.pytest_plugin`, which pytest loads
automatically wherever fermix-core is installed.

Names are resolved on first use: pytest imports this package for its plugin in every test
session, and a plugin author's unrelated test run must not pay for pydantic models it never
touches.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fermix_core.lazyexports import lazy_exports

if TYPE_CHECKING:  # pragma: no cover - typing only
    from fermix_core.testing.channels import MemoryChannel as MemoryChannel
    from fermix_core.testing.channels import StubChannelHost as StubChannelHost
    from fermix_core.testing.contracts import CONTRACT_TOOL as CONTRACT_TOOL
    from fermix_core.testing.contracts import ChannelContract as ChannelContract
    from fermix_core.testing.contracts import ContractViolation as ContractViolation
    from fermix_core.testing.contracts import MemoryBackendContract as MemoryBackendContract
    from fermix_core.testing.contracts import ProviderContract as ProviderContract
    from fermix_core.testing.contracts import Scenario as Scenario
    from fermix_core.testing.contracts import ToolContract as ToolContract
    from fermix_core.testing.fakedist import FakeDistribution as FakeDistribution
    from fermix_core.testing.fakedist import fake_distribution as fake_distribution
    from fermix_core.testing.imports import loaded_after as loaded_after
    from fermix_core.testing.providers import FunctionProvider as FunctionProvider
    from fermix_core.testing.providers import ScriptedProvider as ScriptedProvider
    from fermix_core.testing.providers import ScriptExhausted as ScriptExhausted
    from fermix_core.testing.providers import reply as reply
    from fermix_core.testing.providers import tool_call as tool_call
    from fermix_core.testing.providers import tool_calls as tool_calls

_LAZY = {
    "MemoryChannel": "channels",
    "StubChannelHost": "channels",
    "CONTRACT_TOOL": "contracts",
    "ChannelContract": "contracts",
    "ContractViolation": "contracts",
    "MemoryBackendContract": "contracts",
    "ProviderContract": "contracts",
    "Scenario": "contracts",
    "ToolContract": "contracts",
    "FakeDistribution": "fakedist",
    "fake_distribution": "fakedist",
    "loaded_after": "imports",
    "FunctionProvider": "providers",
    "ScriptExhausted": "providers",
    "ScriptedProvider": "providers",
    "reply": "providers",
    "tool_call": "providers",
    "tool_calls": "providers",
}

__all__ = sorted(_LAZY)


__getattr__ = lazy_exports(__name__, _LAZY, globals())


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
