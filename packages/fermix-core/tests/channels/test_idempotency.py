"""The durable seen-ids record: real SQLite files, shared with the other memory.db tables."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from fermix_core.channels.idempotency import (
    COMPONENT,
    RETENTION_S,
    SCHEMA_VERSION,
    IdempotencyError,
    SeenIds,
)
from fermix_core.store import ConversationStore

pytestmark = pytest.mark.anyio


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


async def test_a_claim_is_new_once_and_survives_a_restart(tmp_path: Path) -> None:
    db = tmp_path / "memory.db"
    async with await SeenIds.open(db) as seen:
        assert await seen.claim("whatsapp", "wamid.1")
        assert not await seen.claim("whatsapp", "wamid.1")
        # Same id on another channel is another message.
        assert await seen.claim("slack", "wamid.1")
        assert await seen.seen("whatsapp", "wamid.1")
        assert not await seen.seen("whatsapp", "wamid.2")
    async with await SeenIds.open(db) as reopened:
        assert not await reopened.claim("whatsapp", "wamid.1")
        assert await reopened.count() == 2
        assert await reopened.count("slack") == 1
    assert db.stat().st_mode & 0o777 == 0o600


async def test_release_lets_the_platform_retry(tmp_path: Path) -> None:
    async with await SeenIds.open(tmp_path / "memory.db") as seen:
        assert await seen.claim("slack", "Ev1")
        await seen.release("slack", "Ev1")
        assert not await seen.seen("slack", "Ev1")
        assert await seen.claim("slack", "Ev1")


async def test_ids_are_bounded_by_age(tmp_path: Path) -> None:
    clock = Clock()
    db = tmp_path / "memory.db"
    async with await SeenIds.open(db, clock=clock) as seen:
        assert await seen.claim("tg", "1")
        clock.now += RETENTION_S - 1
        assert not await seen.claim("tg", "1")  # still inside the window (and not refreshed)
        clock.now += 2
        assert not await seen.seen("tg", "1")
        # An expired id is claimable again; the claim refreshes it.
        assert await seen.claim("tg", "1")
        assert await seen.claim("tg", "2")
        clock.now += RETENTION_S + 1
        assert await seen.prune() == 2
        assert await seen.count() == 0


async def test_claims_prune_expired_rows_hourly(tmp_path: Path) -> None:
    clock = Clock()
    async with await SeenIds.open(tmp_path / "memory.db", clock=clock, retention_s=10) as seen:
        for i in range(5):
            assert await seen.claim("tg", str(i))
        clock.now += 3600
        assert await seen.claim("tg", "fresh")
        assert await seen.count() == 1


async def test_shares_memory_db_with_the_conversation_store(tmp_path: Path) -> None:
    db = tmp_path / "memory.db"
    async with await SeenIds.open(db) as seen:
        await seen.claim("tg", "1")
    store = await ConversationStore.open(db)
    await store.close()
    async with await SeenIds.open(db) as seen:
        assert await seen.seen("tg", "1")
    conn = sqlite3.connect(db)
    versions = dict(conn.execute("SELECT component, version FROM schema_version").fetchall())
    conn.close()
    assert versions[COMPONENT] == SCHEMA_VERSION
    assert "conversations" in versions


async def test_a_newer_schema_is_left_untouched(tmp_path: Path) -> None:
    db = tmp_path / "memory.db"
    async with await SeenIds.open(db):
        pass
    conn = sqlite3.connect(db)
    conn.execute("UPDATE schema_version SET version = 99 WHERE component = ?", (COMPONENT,))
    conn.commit()
    conn.close()
    with pytest.raises(IdempotencyError, match="upgrade fermix"):
        await SeenIds.open(db)


async def test_a_damaged_file_names_the_fix(tmp_path: Path) -> None:
    db = tmp_path / "memory.db"
    db.write_bytes(b"not a database at all" * 100)
    with pytest.raises(IdempotencyError, match="move it aside"):
        await SeenIds.open(db)


async def test_closed_record_raises_clearly(tmp_path: Path) -> None:
    seen = await SeenIds.open(tmp_path / "memory.db")
    await seen.aclose()
    await seen.aclose()
    with pytest.raises(IdempotencyError, match="closed"):
        await seen.claim("tg", "1")
