"""Long-term memory: the backend contract and the in-memory reference backend.

Backends that need a database (the default SQLite one, :mod:`fermix_core.memory.sqlite`)
live in their own modules and are built from a ``MemoryBackendSpec`` only when configured,
so importing this package stays cheap. The rest of the feature lives beside it:
:mod:`~fermix_core.memory.scope` (who may read and write what),
:mod:`~fermix_core.memory.fence` (``<memory-context>`` fencing),
:mod:`~fermix_core.memory.review` (background consolidation) and
:mod:`~fermix_core.memory.profiles` (USER.md / MEMORY.md).
"""

from __future__ import annotations

from fermix_core.memory.backend import (
    USER_CATEGORIES,
    WORK_CATEGORIES,
    AddOp,
    ArchiveOp,
    HistoryMessage,
    MemoryBackend,
    MemoryCategory,
    MemoryFact,
    MemoryFilter,
    MemoryOp,
    MemoryStoreError,
    MemoryUnavailableError,
    Provenance,
    ReplaceOp,
    Speaker,
    StoreAction,
    StoreResult,
)
from fermix_core.memory.inmemory import InMemoryBackend

__all__ = [
    "USER_CATEGORIES",
    "WORK_CATEGORIES",
    "AddOp",
    "ArchiveOp",
    "HistoryMessage",
    "InMemoryBackend",
    "MemoryBackend",
    "MemoryCategory",
    "MemoryFact",
    "MemoryFilter",
    "MemoryOp",
    "MemoryStoreError",
    "MemoryUnavailableError",
    "Provenance",
    "ReplaceOp",
    "Speaker",
    "StoreAction",
    "StoreResult",
]
