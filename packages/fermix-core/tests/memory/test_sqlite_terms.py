"""Memory schema v2: per-word row counts, the migration of older files, and the history backlog.

The counts (``memory_fact_terms``, ``memory_history_terms``) must always equal what the FTS
indexes themselves hold — read back here through ``fts5vocab`` — after every kind of write,
after the history catch-up, and after migrating a version-1 file that already has data.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import anyio
import anyio.lowlevel
import pytest
from fermix_core.memory import MemoryCategory, Provenance, sqlite_engine
from fermix_core.memory.sqlite import SCHEMA_VERSION, SqliteMemoryBackend
from fermix_core.memory.sqlite_schema import MIGRATIONS
from fermix_core.store import ConversationStore

pytestmark = pytest.mark.anyio

OWNER = Provenance(speaker="owner")


def raw(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(path, isolation_level=None)


def counts(conn: sqlite3.Connection, table: str) -> dict[str, int]:
    rows = conn.execute(f"SELECT term, docs FROM {table} WHERE docs != 0").fetchall()  # noqa: S608
    return dict(rows)


def index_counts(conn: sqlite3.Connection, index: str) -> dict[str, int]:
    conn.execute(f"CREATE VIRTUAL TABLE temp.v USING fts5vocab(main, {index}, row)")
    try:
        return dict(conn.execute("SELECT term, doc FROM temp.v").fetchall())
    finally:
        conn.execute("DROP TABLE temp.v")


def assert_counts_match(path: Path) -> None:
    with raw(path) as conn:
        assert counts(conn, "memory_fact_terms") == index_counts(conn, "memory_facts_fts")
        assert counts(conn, "memory_history_terms") == index_counts(conn, "memory_history_fts")
        scratch = conn.execute("SELECT COUNT(*) FROM memory_terms_scratch_v").fetchone()[0]
        assert scratch == 0, "the scratch index is empty between statements"


def add_messages(path: Path, texts: list[str]) -> None:
    with raw(path) as conn:
        conn.execute("BEGIN IMMEDIATE")  # as the store appends: waits for an indexer's lock
        start = conn.execute("SELECT COALESCE(MAX(id), 0) FROM messages").fetchone()[0]
        conn.executemany(
            "INSERT INTO messages (conversation_id, turn_id, seq, anchor_seq, kind, role, speaker, "
            "sender_id, body, text, created_at) VALUES (1, NULL, ?, ?, 'message', 'user', "
            "'owner', NULL, '{}', ?, 0)",
            [(start + i, start + i, text) for i, text in enumerate(texts, 1)],
        )
        conn.execute("COMMIT")


async def new_home(tmp_path: Path) -> Path:
    path = tmp_path / "memory.db"
    store = await ConversationStore.open(path)
    await store.conversation_id(("cli", "s", None))
    await store.close()
    return path


async def test_word_counts_follow_every_kind_of_write(tmp_path: Path) -> None:
    path = await new_home(tmp_path)
    backend = await SqliteMemoryBackend.open(path)
    try:
        assert_counts_match(path)
        first = await backend.store(MemoryCategory.CONTEXT, "Café deploys café", provenance=OWNER)
        await backend.store(MemoryCategory.CONTEXT, "deploy walrus", provenance=OWNER)
        keyed = await backend.store(
            MemoryCategory.PREFERENCE, "tea walrus", key="drink_pref", provenance=OWNER
        )
        assert_counts_match(path)
        await backend.store(
            MemoryCategory.PREFERENCE, "coffee only", key="drink_pref", provenance=OWNER
        )
        assert_counts_match(path)  # an update moved its words
        await backend.store(
            MemoryCategory.CONTEXT, "narwhal", provenance=OWNER, replace_id=first.fact.id
        )
        assert await backend.forget(keyed.fact.id)
        assert await backend.restore(keyed.fact.id)
        assert_counts_match(path)  # archived facts stay indexed and counted
        with raw(path) as conn:
            conn.execute("DELETE FROM memory_facts WHERE id = ?", (int(first.fact.id),))
            assert counts(conn, "memory_fact_terms").get("cafe") is None
        assert_counts_match(path)
        add_messages(path, ["walrus talk", "walrus and tea", "Ünïcode wörds"])
        assert await backend.catch_up_history() == 3
        assert_counts_match(path)
        with raw(path) as conn:
            assert counts(conn, "memory_history_terms")["walrus"] == 2
            assert counts(conn, "memory_history_terms")["unicode"] == 1
    finally:
        await backend.aclose()


async def test_a_version_1_file_with_data_is_migrated_in_place(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(sqlite_engine, "TERM_BUDGET", 25)  # narwhal: 20 rows, walrus: 40
    path = await new_home(tmp_path)
    with raw(path) as conn:  # the version-1 schema, as the previous release created it
        conn.execute("BEGIN IMMEDIATE")
        MIGRATIONS[1](conn)
        conn.execute("INSERT INTO schema_version (component, version) VALUES ('memory', 1)")
        conn.executemany(
            "INSERT INTO memory_facts (category, key, content, folded, speaker, archived, "
            "created_at, updated_at, seq) VALUES ('context', ?, ?, ?, 'owner', ?, 0, ?, ?)",
            [
                (f"k{i}" if i % 4 == 0 else None, text, text.lower(), i % 5 == 0, i, i)
                for i, text in enumerate(
                    [f"walrus fact {i}" if i % 3 else f"rare narwhal {i}" for i in range(60)], 1
                )
            ],
        )
        conn.execute("COMMIT")
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        assert "memory_fact_terms" not in tables
    add_messages(path, [f"history walrus {i}" for i in range(30)])
    with raw(path) as conn:  # part of the history already indexed under version 1
        conn.execute(
            "INSERT INTO memory_history_fts (rowid, text) SELECT id, text FROM messages "
            "WHERE id <= 20"
        )
        conn.execute("INSERT INTO memory_state (name, value) VALUES ('history_indexed_id', '20')")

    backend = await SqliteMemoryBackend.open(path)
    try:
        with raw(path) as conn:
            version = conn.execute(
                "SELECT version FROM schema_version WHERE component = 'memory'"
            ).fetchone()[0]
            assert version == SCHEMA_VERSION == 2
            assert conn.execute("SELECT COUNT(*) FROM memory_facts").fetchone()[0] == 60
            assert counts(conn, "memory_history_terms")["walrus"] == 20
        assert_counts_match(path)
        hits = await backend.search("narwhal walrus", limit=50)
        assert hits and all("narwhal" in f.content for f in hits), "the rare word leads"
        assert await backend.catch_up_history() == 10
        assert_counts_match(path)
        await backend.store(MemoryCategory.CONTEXT, "walrus after the upgrade", provenance=OWNER)
        assert_counts_match(path)  # the new triggers count
    finally:
        await backend.aclose()
    reopened = await SqliteMemoryBackend.open(path)  # already current: nothing rerun
    await reopened.aclose()
    assert_counts_match(path)


async def test_a_search_leaves_a_large_history_backlog_to_the_catch_up(
    tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.setattr(sqlite_engine, "HISTORY_INLINE", 5)
    monkeypatch.setattr(sqlite_engine, "HISTORY_BATCH", 4)
    path = await new_home(tmp_path)
    backend = await SqliteMemoryBackend.open(path)
    try:
        add_messages(path, [f"backlog dugong {i}" for i in range(9)])
        assert await backend.search_history("dugong") == [], "9 > 5: not on the search path"
        history = (await backend.describe())["history"]
        assert history["indexed_through_id"] == 0 and history["ids_not_indexed_yet"] == 9
        assert await backend.catch_up_history() == 9  # three batches, one worker call each
        assert len(await backend.search_history("dugong", limit=20)) == 9
        add_messages(path, ["fresh dugong"] * 3)
        assert len(await backend.search_history("dugong", limit=20)) == 12, "a small one is"
        assert_counts_match(path)
    finally:
        await backend.aclose()


async def test_a_stepped_catch_up_leaves_the_write_lock_free_between_transactions(
    tmp_path: Path, monkeypatch
) -> None:
    """With a step, each transaction indexes at most that many messages, and between two
    of them another connection (the conversation store) takes the write lock at once."""
    path = await new_home(tmp_path)
    backend = await SqliteMemoryBackend.open(path)
    other = raw(path)
    other.execute("PRAGMA busy_timeout = 0")  # a turn on the loop never waits for a lock
    covered: list[int] = []
    real = sqlite_engine.SyncMemory.catch_up_batch

    def stepped(self, limit=None):
        result = real(self, limit)
        covered.append(result)
        return result

    monkeypatch.setattr(sqlite_engine.SyncMemory, "catch_up_batch", stepped)
    taken: list[int] = []

    async def between(seconds: float) -> None:
        assert seconds >= 0
        other.execute("BEGIN IMMEDIATE")  # would raise "database is locked" if held
        other.execute("COMMIT")
        taken.append(len(covered))

    monkeypatch.setattr(backend, "_pause", between)
    try:
        add_messages(path, [f"stepped walrus {i}" for i in range(9)])
        assert await backend.catch_up_history(step=4) == 9
        assert covered == [4, 4, 1], "a step short of 4 reached the newest message: done"
        assert taken == [1, 2], "the lock was free after every transaction"
        add_messages(path, ["stepped walrus late"])
        assert await backend.catch_up_history(step=4) == 1
        assert await backend.catch_up_history(step=4) == 0
        assert covered == [4, 4, 1, 1, 0]
        assert len(await backend.search_history("walrus", limit=20)) == 10
        assert_counts_match(path)
    finally:
        other.close()
        await backend.aclose()


def sync_memory(path: Path) -> sqlite_engine.SyncMemory:
    from fermix_core.memory.sqlite_schema import connect

    return sqlite_engine.SyncMemory(connect(path), path)


def fts_rows(path: Path, word: str) -> int:
    """Messages the history index (not its content table) holds *word* for."""
    with raw(path) as conn:
        sql = "SELECT COUNT(*) FROM memory_history_fts WHERE memory_history_fts MATCH ?"
        return conn.execute(sql, (word,)).fetchone()[0]


async def test_a_catch_up_transaction_is_one_statement(tmp_path: Path) -> None:
    """The write lock is taken and released inside one statement: no BEGIN/COMMIT from
    Python, so the indexing thread never needs the GIL back while it holds the lock."""
    path = await new_home(tmp_path)
    sync = sync_memory(path)
    statements: list[str] = []
    try:
        add_messages(path, [f"single heron {i}" for i in range(9)])
        assert sync.catch_up_batch(100) == 9  # creates the temporary trigger first
        sync.conn.set_trace_callback(statements.append)
        add_messages(path, [f"single egret {i}" for i in range(5)])
        assert sync.catch_up_batch(3) == 3
        assert not sync.conn.in_transaction
        assert sync.catch_up_batch(3) == 2
        assert sync.catch_up_batch(3) == 0
        sync.conn.set_trace_callback(None)
        # Statements FTS5 runs for itself start with "--"; the trace repeats a statement
        # for each step of its trigger: keep one run of each of ours.
        ours = [s for s in statements if not s.startswith("--")]
        mine = [s for i, s in enumerate(ours) if i == 0 or ours[i - 1] != s]
        writes = [s for s in mine if not s.lstrip().upper().startswith("SELECT")]
        assert writes == ["INSERT INTO temp.memory_catch_up (step) VALUES (3)"] * 2, mine
        assert fts_rows(path, "single") == 14
        found = sync.search_history(["egret*"], 20, None)
        assert sorted(m.text for m in found) == [f"single egret {i}" for i in range(5)]
        assert_counts_match(path)
    finally:
        sync.close()


async def test_a_failing_catch_up_step_leaves_nothing_half_indexed(tmp_path: Path) -> None:
    """Any step of the one statement failing rolls back all of it: no index rows, no word
    counts, the watermark where it was; the next catch-up indexes everything."""
    path = await new_home(tmp_path)
    sync = sync_memory(path)
    try:
        add_messages(path, [f"atomic plover {i}" for i in range(6)])
        assert sync.catch_up_batch(2) == 2
        with raw(path) as conn:
            conn.execute(
                "CREATE TRIGGER fail_watermark BEFORE UPDATE ON memory_state "
                "BEGIN SELECT RAISE(ABORT, 'injected failure'); END"
            )
        with pytest.raises(sqlite3.IntegrityError, match="injected failure"):
            sync.catch_up_batch(2)
        assert not sync.conn.in_transaction
        assert fts_rows(path, "plover") == 2
        assert sync._watermark() == 2
        assert_counts_match(path)
        with raw(path) as conn:
            conn.execute("DROP TRIGGER fail_watermark")
        assert sync.catch_up_history() == 4
        assert fts_rows(path, "plover") == 6
        assert_counts_match(path)
    finally:
        sync.close()


async def test_a_stale_catch_up_never_indexes_a_message_twice(tmp_path: Path) -> None:
    """Two processes catching up the same file: the statement reads the watermark inside
    its own transaction, so one that read an old watermark before adds nothing twice."""
    path = await new_home(tmp_path)
    first, second = sync_memory(path), sync_memory(path)
    try:
        add_messages(path, [f"twice sandpiper {i}" for i in range(7)])
        assert second.catch_up_batch(1) == 1  # its trigger exists now
        assert first.catch_up_history() == 6
        # What `second` would run after reading the old watermark (1) a moment ago:
        second.conn.execute("INSERT INTO temp.memory_catch_up (step) VALUES (100)")
        assert fts_rows(path, "sandpiper") == 7
        assert second._watermark() == 7
        assert_counts_match(path)
    finally:
        first.close()
        second.close()


async def test_replies_that_never_stop_are_indexed_while_they_keep_coming(
    tmp_path: Path,
) -> None:
    """A flood of replies never leaves the indexer waiting for a quiet moment: the
    catch-up chases the newest message, step by step, while replies keep arriving."""
    from fermix_core.memory.history_index import HistoryIndexer

    path = await new_home(tmp_path)
    backend = await SqliteMemoryBackend.open(path)
    indexer = HistoryIndexer(backend, delay=0)
    try:
        async with anyio.create_task_group() as tg:
            await tg.start(indexer.serve)
            add_messages(path, [f"flood albatross {i}" for i in range(300)])
            indexer.note_reply()
            for wave in range(20_000):  # ends as soon as they are: a few dozen waves
                if backend.history_indexed >= 300:
                    break
                add_messages(path, [f"flood wave {wave} a", f"flood wave {wave} b"])
                indexer.note_reply()
                await anyio.lowlevel.checkpoint()
            else:
                pytest.fail("the first 300 messages were not indexed while replies kept coming")
            tg.cancel_scope.cancel()
        assert backend.history_transactions >= 2, "in steps, not one transaction at the end"
        assert fts_rows(path, "albatross") == 300
        assert await backend.search_history("albatross 299") != []
        await indexer.flush()
        await backend.catch_up_history()
        assert (await backend.describe())["history"]["ids_not_indexed_yet"] == 0
        assert_counts_match(path)
    finally:
        await backend.aclose()
