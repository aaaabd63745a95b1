"""Package exports that import their submodule on first access.

Several packages re-export names from their submodules for callers' convenience, yet a
process that touches only one of them (a one-off ``fermix ask`` needs the gateway's
types, not its queue) should not pay for the rest. A package lists its exports in a
table and takes its module ``__getattr__`` from :func:`lazy_exports`; an exported name
is imported once, then kept in the package's namespace, so later accesses are plain
attribute reads.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(
    package: str, table: Mapping[str, str], namespace: dict[str, Any]
) -> Callable[[str], Any]:
    """A module ``__getattr__`` for *package*: ``table`` maps each exported name to the
    submodule (relative to *package*) that defines it; *namespace* is the package's
    ``globals()``."""

    def __getattr__(name: str) -> Any:
        module = table.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        from importlib import import_module

        value = getattr(import_module(f"{package}.{module}"), name)
        namespace[name] = value
        return value

    return __getattr__
