"""Long-term memory: the backend contract and the in-memory reference backend.

Backends that need a database (the default SQLite one) live in their own modules and are
built from a ``MemoryBackendSpec`` only when configured, so importing this package stays
cheap.
"""

from __future__ import annotations

from fermix_core.memory.backend import (
    USER_CATEGORIES,
    WORK_CATEGORIES,
    MemoryBackend,
    MemoryCategory,
    MemoryFact,
    MemoryStoreError,
    Provenance,
    Speaker,
    StoreAction,
    StoreResult,
)
from fermix_core.memory.inmemory import InMemoryBackend

__all__ = [
    "USER_CATEGORIES",
    "WORK_CATEGORIES",
    "InMemoryBackend",
    "MemoryBackend",
    "MemoryCategory",
    "MemoryFact",
    "MemoryStoreError",
    "Provenance",
    "Speaker",
    "StoreAction",
    "StoreResult",
]
