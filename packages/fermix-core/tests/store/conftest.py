"""A real ConversationStore on a real file, plus helpers to read the database directly."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from fermix_core.store import ConversationStore


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "home" / "memory.db"


@pytest.fixture
async def store(db_path: Path) -> AsyncIterator[ConversationStore]:
    opened = await ConversationStore.open(db_path)
    try:
        yield opened
    finally:
        await opened.close()


@pytest.fixture
def raw(db_path: Path, store: ConversationStore) -> Iterator[sqlite3.Connection]:
    """A second, independent connection to the same file (what another process would see)."""
    conn = sqlite3.connect(db_path, isolation_level=None)
    try:
        yield conn
    finally:
        conn.close()
