"""Conversation history in ``memory.db``: turns, windows, stop markers and summaries.

SQLite is the source of truth for what was said; everything the turn runner replays comes
from here. Importing this package is cheap (standard library ``sqlite3`` plus the message
models): SQLAlchemy/SQLModel are imported only when a database has to be created.
"""

from __future__ import annotations

from fermix_core.store.conversations import ConversationStore
from fermix_core.store.records import (
    EmptyMessageError,
    StoreClosedError,
    StoreCorruptError,
    StoredMessage,
    StoreError,
    StoreSchemaError,
    TurnHandle,
    TurnStateError,
)
from fermix_core.store.schema import SCHEMA_VERSION

__all__ = [
    "SCHEMA_VERSION",
    "ConversationStore",
    "EmptyMessageError",
    "StoreClosedError",
    "StoreCorruptError",
    "StoreError",
    "StoreSchemaError",
    "StoredMessage",
    "TurnHandle",
    "TurnStateError",
]
