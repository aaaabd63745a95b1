"""Fermix core: the hook specifications, plugin loader, configuration and runtime.

This module is imported by every ``fermix`` invocation, including ``fermix --version``
and ``fermix --help``, so it must stay free of heavy imports. Public names that need a
library (pluggy, pydantic) are resolved lazily on first attribute access.
"""

from __future__ import annotations

__version__ = "0.1.0"

#: Distribution name, used when reporting which distribution provides a plugin.
DISTRIBUTION = "fermix-core"

#: The distribution users install: it pins core, the built-in tools and the plugin families
#: (as extras) together. The command it installs is still ``fermix``.
META_DISTRIBUTION = "fermix-agent"


def install_hint(*extras: str) -> str:
    """The pip line that adds ``extras`` to an installation, e.g. for an error message."""
    suffix = f"[{','.join(extras)}]" if extras else ""
    return f'pip install "{META_DISTRIBUTION}{suffix}"'


TYPE_CHECKING = False  # typing costs an import this module cannot afford
if TYPE_CHECKING:  # pragma: no cover - typing only
    from fermix_core.hookspecs import hookimpl as hookimpl

_LAZY = {
    "hookimpl": ("fermix_core.hookspecs", "hookimpl"),
}

__all__ = ["DISTRIBUTION", "META_DISTRIBUTION", "__version__", "hookimpl", "install_hint"]


def __getattr__(name: str) -> object:
    target = _LAZY.get(name)
    if target is None:
        raise AttributeError(f"module 'fermix_core' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(target[0]), target[1])
    globals()[name] = value
    return value
