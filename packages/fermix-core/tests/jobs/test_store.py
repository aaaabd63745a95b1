"""The SQLite job store: the shared contract, plus migrations and cross-process claims."""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path

import anyio
import pytest
from fermix_core.jobs.memory_store import InMemoryJobStore
from fermix_core.jobs.store import (
    COMPONENT,
    SCHEMA_VERSION,
    JobStoreSchemaError,
    SqliteJobStore,
    migrate,
)
from fermix_core.store import ConversationStore
from fermix_core.testing.jobs import T0, JobStoreContract, make_job

pytestmark = pytest.mark.anyio


class TestSqliteJobStore(JobStoreContract):
    async def open_store(self, tmp_path: Path) -> SqliteJobStore:
        return await SqliteJobStore.open(tmp_path / "memory.db")


class TestInMemoryJobStore(JobStoreContract):
    """The second implementation: the scheduler needs the contract, not SQLite."""

    async def open_store(self, tmp_path: Path) -> InMemoryJobStore:
        return InMemoryJobStore()


async def test_shares_memory_db_with_the_conversation_store(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    conversations = await ConversationStore.open(path)
    jobs = await SqliteJobStore.open(path)
    try:
        await jobs.create_job(make_job())
        assert (await jobs.get_job("j1")) is not None
    finally:
        await jobs.aclose()
        await conversations.close()
    conn = sqlite3.connect(path)
    versions = dict(conn.execute("SELECT component, version FROM schema_version").fetchall())
    conn.close()
    assert versions[COMPONENT] == SCHEMA_VERSION
    assert "conversations" in versions
    assert path.stat().st_mode & 0o777 == 0o600


async def test_a_newer_schema_is_left_untouched(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    store = await SqliteJobStore.open(path)
    await store.aclose()
    conn = sqlite3.connect(path)
    conn.execute("UPDATE schema_version SET version = 99 WHERE component = 'jobs'")
    conn.commit()
    conn.close()
    with pytest.raises(JobStoreSchemaError, match="upgrade fermix"):
        await SqliteJobStore.open(path)


def test_migrations_run_in_order_in_one_transaction(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    conn = sqlite3.connect(path, isolation_level=None)
    steps = {
        1: [
            "CREATE TABLE IF NOT EXISTS schema_version (component VARCHAR NOT NULL, "
            "version INTEGER NOT NULL, PRIMARY KEY (component))",
            "CREATE TABLE a (x)",
        ],
        2: ["ALTER TABLE a ADD COLUMN y"],
        3: ["CREATE TABLE b (z)", "THIS IS NOT SQL"],
    }
    assert migrate(conn, path, current=2, migrations=steps) == (0, 2)
    with pytest.raises(sqlite3.OperationalError):
        migrate(conn, path, current=3, migrations=steps)
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert "b" not in tables  # the failed step rolled back whole
    assert conn.execute("SELECT version FROM schema_version").fetchone()[0] == 2
    conn.close()


_CLAIMER = """
import anyio, sys
from fermix_core.jobs.store import SqliteJobStore
async def main():
    store = await SqliteJobStore.open(sys.argv[1])
    won = 0
    for n in range(int(sys.argv[2])):
        run = await store.claim(f"j{n}", now=1.0, trigger="manual", session_id="s", config={})
        won += run is not None
    await store.aclose()
    print(won)
anyio.run(main)
"""


async def test_two_processes_never_claim_the_same_job(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    store = await SqliteJobStore.open(path)
    count = 40
    for n in range(count):
        await store.create_job(make_job(f"j{n}", next_run_at=T0))
    wins: list[int] = []

    async def claimer() -> None:
        done = await anyio.run_process([sys.executable, "-c", _CLAIMER, str(path), str(count)])
        wins.append(int(done.stdout))

    async with anyio.create_task_group() as tg:
        tg.start_soon(claimer)
        tg.start_soon(claimer)
    assert sum(wins) == count
    for n in range(count):
        assert len(await store.list_runs(f"j{n}")) == 1
    await store.aclose()


async def test_the_scheduler_queries_use_their_indexes(tmp_path: Path) -> None:
    """A pass over many idle jobs must stay index lookups (the tick budget depends on it)."""
    store = await SqliteJobStore.open(tmp_path / "memory.db")
    conn = store._sync.conn
    for n in range(50):
        await store.create_job(make_job(f"j{n}", expires_at=T0 + 9000 if n % 5 == 0 else None))
    plans = {
        "due": "SELECT * FROM jobs WHERE status = 'scheduled' AND next_run_at <= 1 "
        "ORDER BY next_run_at, id LIMIT 64",
        "next": "SELECT MIN(next_run_at) FROM jobs WHERE status = 'scheduled'",
    }
    for name, sql in plans.items():
        detail = " ".join(row[3] for row in conn.execute(f"EXPLAIN QUERY PLAN {sql}"))
        assert "ix_jobs_due" in detail, (name, detail)
    source = Path(__file__).parents[2] / "src/fermix_core/jobs/store.py"
    assert source.read_text().count("INDEXED BY ix_jobs_expiry") == 2
    await store.aclose()
