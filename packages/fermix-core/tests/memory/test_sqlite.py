"""The SQLite backend on real files: schema, sharing memory.db, FTS5 behaviour, failures."""

from __future__ import annotations

import os
import sqlite3
import stat
from pathlib import Path

import anyio
import pytest
from fermix_core.memory import MemoryUnavailableError, Provenance
from fermix_core.memory.sqlite import (
    SCHEMA_VERSION,
    MemoryDatabaseError,
    MemorySchemaError,
    SqliteMemoryBackend,
    match_expression,
)
from fermix_core.memory.sqlite_engine import HISTORY_BATCH
from fermix_core.messages import Message, Usage
from fermix_core.store import ConversationStore
from fermix_core.store.schema import SCHEMA_VERSION as STORE_SCHEMA_VERSION

pytestmark = pytest.mark.anyio

OWNER = Provenance(speaker="owner")


def raw(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(path, isolation_level=None)


def schema_of(path: Path, prefix: str = "") -> list[tuple]:
    with raw(path) as conn:
        return conn.execute(
            "SELECT type, name, tbl_name, sql FROM sqlite_master WHERE name NOT LIKE 'memory%' "
            "AND name NOT LIKE 'sqlite_%' ORDER BY name"
        ).fetchall()


async def test_fresh_file_is_private_wal_and_versioned(tmp_path: Path) -> None:
    path = tmp_path / "home" / "memory.db"
    backend = await SqliteMemoryBackend.open(path)
    await backend.store("goal", "Ship it", provenance=OWNER)
    await backend.aclose()
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    with raw(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        rows = conn.execute("SELECT component, version FROM schema_version").fetchall()
    assert rows == [("memory", SCHEMA_VERSION)]


@pytest.mark.parametrize("first", ["store", "memory"])
async def test_shares_memory_db_with_the_conversation_store(tmp_path: Path, first: str) -> None:
    """Either component may create the file; each keeps its own version row and tables."""
    path = tmp_path / "memory.db"
    if first == "store":
        store = await ConversationStore.open(path)
        backend = await SqliteMemoryBackend.open(path)
    else:
        backend = await SqliteMemoryBackend.open(path)
        store = await ConversationStore.open(path)
    before = schema_of(path)
    await backend.store("context", "Works on Fermix", provenance=OWNER)
    cid = await store.conversation_id(("cli", "s", None))
    handle = await store.begin_turn(
        cid, Message.user("hello history"), speaker="owner", sender_id="u", session_id="main-1"
    )
    await store.commit_turn(
        handle.turn_id, [Message.assistant("hi")], usage=Usage(), model="m", provider="p"
    )
    assert [m.text for m in await backend.search_history("history")] == ["hello history"]
    await backend.aclose()
    await store.close()
    with raw(path) as conn:
        versions = dict(conn.execute("SELECT component, version FROM schema_version").fetchall())
        triggers = conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name IN "
            "('messages', 'conversations', 'turns')"
        ).fetchall()
    assert versions == {"memory": SCHEMA_VERSION, "conversations": STORE_SCHEMA_VERSION}
    assert triggers == [], "memory never hooks into the store's tables"
    assert schema_of(path) == before, "the store's tables are untouched by memory"


async def test_a_newer_memory_schema_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    backend = await SqliteMemoryBackend.open(path)
    await backend.aclose()
    with raw(path) as conn:
        conn.execute("UPDATE schema_version SET version = 99 WHERE component = 'memory'")
        conn.execute("PRAGMA journal_mode = DELETE")
    before = path.read_bytes()
    with pytest.raises(MemorySchemaError, match="upgrade fermix"):
        await SqliteMemoryBackend.open(path)
    assert path.read_bytes() == before


async def test_a_file_that_is_not_a_database_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    path.write_bytes(b"this is not sqlite at all" * 100)
    with pytest.raises(MemoryDatabaseError, match="move it aside") as info:
        await SqliteMemoryBackend.open(path)
    assert isinstance(info.value, MemoryUnavailableError)


async def test_unwritable_directory_is_a_clear_error(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        if os.access(locked, os.W_OK):
            pytest.skip("running with permissions that ignore directory modes")
        with pytest.raises(MemoryDatabaseError, match="writable"):
            await SqliteMemoryBackend.open(locked / "memory.db")
    finally:
        locked.chmod(0o700)


async def test_facts_survive_reopening(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    backend = await SqliteMemoryBackend.open(path)
    fact = (
        await backend.store("identity", "Lives in Lisbon", key="user.city", provenance=OWNER)
    ).fact
    await backend.forget(fact.id)
    await backend.aclose()
    again = await SqliteMemoryBackend.open(path)
    try:
        kept = await again.get(fact.id)
        assert kept is not None and kept.archived and kept.key == "user.city"
        assert await again.restore(fact.id)
        assert (await again.get_by_key("user.city")).id == fact.id
    finally:
        await again.aclose()


async def test_closed_backend_refuses_calls(tmp_path: Path) -> None:
    backend = await SqliteMemoryBackend.open(tmp_path / "memory.db")
    await backend.aclose()
    await backend.aclose()
    with pytest.raises(MemoryDatabaseError, match="closed"):
        await backend.list()


async def test_index_follows_updates_and_keys(tmp_path: Path) -> None:
    backend = await SqliteMemoryBackend.open(tmp_path / "memory.db")
    try:
        first = await backend.store(
            "identity", "Lives in Lisbon", key="user.city", provenance=OWNER
        )
        await backend.store("identity", "Lives in Porto", key="user.city", provenance=OWNER)
        assert await backend.search("Lisbon") == []
        assert [f.id for f in await backend.search("porto")] == [first.fact.id]
        assert [f.id for f in await backend.search("city")] == [first.fact.id], "keys are indexed"
    finally:
        await backend.aclose()


async def test_prefix_ranking_and_stopwords(tmp_path: Path) -> None:
    backend = await SqliteMemoryBackend.open(tmp_path / "memory.db")
    try:
        deploy = await backend.store("context", "Deployment runs every Friday", provenance=OWNER)
        both = await backend.store(
            "context", "Deployment pipeline for the Friday release", provenance=OWNER
        )
        await backend.store("context", "The cat is on the mat", provenance=OWNER)
        hits = await backend.search("deploy pipeline")
        assert [f.id for f in hits] == [both.fact.id, deploy.fact.id]
        # "the" and "is" are dropped, so the cat fact does not match a query about deploys.
        assert {f.id for f in await backend.search("what is the deploy")} == {
            deploy.fact.id,
            both.fact.id,
        }
        assert len(await backend.search("the")) == 2, "a stop word alone still searches"
        assert await backend.search("de") == [], "two letters match whole words only"
    finally:
        await backend.aclose()


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("coffee", '"coffee"*'),
        ("Dark COFFEE coffee", '"dark"* OR "coffee"*'),
        ('" OR 1=1 --', '"1"'),
        ("NOT near(", '"not"* OR "near"*'),
        ("the", '"the"*'),
        ("🙂", None),
        ("", None),
        ("café", '"café"*'),
    ],
)
def test_match_expression_quotes_every_word(query: str, expected: str | None) -> None:
    assert match_expression(query) == expected


async def test_history_index_catches_up_incrementally_and_skips_tool_rows(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    store = await ConversationStore.open(path)
    backend = await SqliteMemoryBackend.open(path)
    try:
        cid = await store.conversation_id(("cli", "s", None))

        async def turn(text: str) -> None:
            handle = await store.begin_turn(
                cid, Message.user(text), speaker="owner", sender_id="u", session_id="main-1"
            )
            await store.commit_turn(
                handle.turn_id,
                [Message.assistant(f"answer about {text}")],
                usage=Usage(),
                model="m",
                provider="p",
            )

        await turn("walrus one")
        assert len(await backend.search_history("walrus")) == 2
        await turn("walrus two")
        assert len(await backend.search_history("walrus")) == 4, "new rows are picked up"
        assert await backend.catch_up_history() == 0
        with raw(path) as conn:
            indexed = conn.execute("SELECT COUNT(*) FROM memory_history_fts").fetchone()[0]
        assert indexed == 4
    finally:
        await backend.aclose()
        await store.close()


async def test_history_backlog_is_indexed_in_batches(tmp_path: Path) -> None:
    """A large backlog lands in several short transactions, and all of it is found."""
    path = tmp_path / "memory.db"
    store = await ConversationStore.open(path)
    await store.conversation_id(("cli", "bulk", None))
    await store.close()
    total = HISTORY_BATCH * 2 + 7
    with raw(path) as conn:
        conn.execute("BEGIN")
        conn.executemany(
            "INSERT INTO messages (conversation_id, turn_id, seq, anchor_seq, kind, role, speaker, "
            "sender_id, body, text, created_at) VALUES (1, NULL, ?, ?, 'message', 'user', "
            "'owner', NULL, '{}', ?, 0)",
            ((i, i, f"bulk message number {i} narwhal") for i in range(1, total + 1)),
        )
        conn.execute("COMMIT")
    backend = await SqliteMemoryBackend.open(path)
    try:
        assert await backend.catch_up_history() == total
        hits = await backend.search_history("narwhal", limit=3)
        assert len(hits) == 3
        assert hits[0].id == total, "ties break towards the newest message"
    finally:
        await backend.aclose()


async def test_memory_without_history_tables_finds_no_history(tmp_path: Path) -> None:
    backend = await SqliteMemoryBackend.open(tmp_path / "memory.db")
    try:
        assert await backend.search_history("anything") == []
        assert await backend.recent_messages() == []
        report = await backend.describe()
        assert report["history"]["available"] is False
    finally:
        await backend.aclose()


async def test_two_processes_worth_of_connections_write_safely(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    a = await SqliteMemoryBackend.open(path)
    b = await SqliteMemoryBackend.open(path)
    try:
        async with anyio.create_task_group() as tg:
            for i in range(15):
                tg.start_soon(lambda i=i: a.store("context", f"from a {i}", provenance=OWNER))
                tg.start_soon(lambda i=i: b.store("context", f"from b {i}", provenance=OWNER))
        assert len(await a.list()) == 30
        assert len({f.id for f in await b.list()}) == 30
    finally:
        await a.aclose()
        await b.aclose()


async def test_odd_ids_are_simply_unknown(tmp_path: Path) -> None:
    backend = await SqliteMemoryBackend.open(tmp_path / "memory.db")
    try:
        fact = (await backend.store("goal", "Ship it", provenance=OWNER)).fact
        for odd in ("", " ", "1_0", "01", "1.0", "-1", "x" * 100, "1; DROP TABLE memory_facts"):
            assert await backend.get(odd) is None
            assert await backend.forget(odd) is False
            assert await backend.restore(odd) is False
        assert await backend.get(fact.id) is not None
    finally:
        await backend.aclose()


async def test_the_rank_window_counts_only_visible_matches(tmp_path: Path, monkeypatch) -> None:
    """A narrow scope still finds its old facts behind many newer matches it cannot see."""
    from fermix_core.memory import MemoryFilter, sqlite_engine

    monkeypatch.setattr(sqlite_engine, "RANK_WINDOW", 5)
    backend = await SqliteMemoryBackend.open(tmp_path / "memory.db")
    try:
        guest = Provenance(speaker="guest", conversation_key=("t", "g", None))
        old = await backend.store("context", "llama farm visit", provenance=guest)
        for i in range(20):
            await backend.store("context", f"llama fact {i}", provenance=OWNER)
        scoped = MemoryFilter(speakers=frozenset({"guest"}), conversation_key=("t", "g", None))
        assert [f.id for f in await backend.search("llama", where=scoped)] == [old.fact.id]
        everything = await backend.search("llama", limit=50)
        assert len(everything) == 5, "only the newest window of matches is ranked"
        assert old.fact.id not in {f.id for f in everything}
    finally:
        await backend.aclose()
