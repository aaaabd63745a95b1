"""Plugin discovery, isolated loading and spec collection."""

from fermix_core.plugins.discovery import (
    ENTRY_POINT_GROUP,
    FIRST_PARTY,
    LOAD_PLUGINS_ENV,
    PluginRecord,
    discover,
)
from fermix_core.plugins.host import PluginHost
from fermix_core.plugins.registry import SpecError, SpecRegistry

__all__ = [
    "ENTRY_POINT_GROUP",
    "FIRST_PARTY",
    "LOAD_PLUGINS_ENV",
    "PluginHost",
    "PluginRecord",
    "SpecError",
    "SpecRegistry",
    "discover",
]
