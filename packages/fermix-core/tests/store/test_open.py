"""Opening memory.db: pragmas, permissions, schema versions, migrations, bad files."""

from __future__ import annotations

import hashlib
import os
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from fermix_core.channel import ConversationKey
from fermix_core.messages import Message
from fermix_core.store import (
    SCHEMA_VERSION,
    ConversationStore,
    StoreCorruptError,
    StoreError,
    StoreSchemaError,
)
from fermix_core.store.engine import connect
from fermix_core.store.models import store_registry
from fermix_core.store.schema import COMPONENT, ensure_schema, read_version

pytestmark = pytest.mark.anyio


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


async def test_fresh_database_is_private_wal_and_versioned(db_path: Path) -> None:
    async with await ConversationStore.open(db_path) as store:
        await store.conversation_id(ConversationKey("cli", "local"))
        assert stat.S_IMODE(db_path.stat().st_mode) == 0o600
        for sidecar in ("memory.db-wal", "memory.db-shm"):
            side = db_path.parent / sidecar
            if side.exists():
                assert stat.S_IMODE(side.stat().st_mode) == 0o600, sidecar
        conn = store._sync.conn  # the store's own connection: its pragmas are what matter
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL
        assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
        # Never waits for a lock by itself (a call may run on the event loop); the store's
        # thread waits the store's timeout for a call that found the file locked.
        assert conn.execute("PRAGMA busy_timeout").fetchone()[0] == 0
        assert store.worker.busy_timeout_ms >= 1000
        assert conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 0
    check = sqlite3.connect(db_path)
    try:
        assert read_version(check) == SCHEMA_VERSION
        assert check.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        check.close()


async def test_live_schema_matches_the_sqlmodel_models(db_path: Path) -> None:
    async with await ConversationStore.open(db_path):
        pass
    conn = sqlite3.connect(db_path)
    try:
        for table in store_registry.metadata.sorted_tables:
            live = {row[1] for row in conn.execute(f"PRAGMA table_info({table.name})")}
            assert live == {c.name for c in table.columns}, table.name
            indexes = {row[1] for row in conn.execute(f"PRAGMA index_list({table.name})")}
            assert {ix.name for ix in table.indexes} <= indexes, table.name
    finally:
        conn.close()


def test_opening_an_existing_database_does_not_need_sqlalchemy(db_path: Path) -> None:
    connect(db_path).close()
    script = (
        "import sys, anyio\n"
        "from pathlib import Path\n"
        "from fermix_core.store import ConversationStore\n"
        "async def main():\n"
        "    async with await ConversationStore.open(Path(sys.argv[1])) as s:\n"
        "        await s.next_session_number()\n"
        "anyio.run(main)\n"
        "print('sqlalchemy' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script, str(db_path)], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "False"


async def test_newer_database_is_refused_and_left_untouched(db_path: Path) -> None:
    async with await ConversationStore.open(db_path) as store:
        cid = await store.conversation_id(ConversationKey("cli", "local"))
        handle = await store.begin_turn(
            cid, Message.user("keep me"), speaker="owner", sender_id=None, session_id="s"
        )
        assert handle.turn_id == 1
    conn = sqlite3.connect(db_path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = DELETE")  # no sidecars: any write would show
    conn.execute(
        "UPDATE schema_version SET version = ? WHERE component = ?",
        (SCHEMA_VERSION + 5, COMPONENT),
    )
    conn.close()
    before = digest(db_path)
    mtime = db_path.stat().st_mtime_ns
    with pytest.raises(StoreSchemaError) as info:
        await ConversationStore.open(db_path)
    message = str(info.value)
    assert f"version {SCHEMA_VERSION + 5}" in message and f"up to {SCHEMA_VERSION}" in message
    assert "upgrade fermix" in message
    assert digest(db_path) == before and db_path.stat().st_mtime_ns == mtime
    assert not (db_path.parent / "memory.db-wal").exists(), "never switched to WAL"


@pytest.mark.parametrize(
    "content",
    [b"this is not a database at all" * 10, b"SQLite format 3\x00" + b"\xff" * 200],
    ids=["text", "bad-header"],
)
async def test_a_file_that_is_not_a_database_is_a_typed_error(
    db_path: Path, content: bytes
) -> None:
    db_path.parent.mkdir(parents=True)
    db_path.write_bytes(content)
    with pytest.raises(StoreCorruptError, match="move it aside"):
        await ConversationStore.open(db_path)
    assert db_path.read_bytes() == content


async def test_unwritable_location_is_a_typed_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(StoreError, match="cannot create"):
        await ConversationStore.open(blocker / "memory.db")


async def test_other_components_tables_and_versions_are_left_alone(db_path: Path) -> None:
    db_path.parent.mkdir(parents=True)
    conn = sqlite3.connect(db_path, isolation_level=None)
    conn.execute("CREATE TABLE schema_version (component TEXT PRIMARY KEY, version INTEGER)")
    conn.execute("INSERT INTO schema_version VALUES ('memories', 7)")
    conn.execute("CREATE TABLE memories (id INTEGER PRIMARY KEY, fact TEXT)")
    conn.execute("INSERT INTO memories (fact) VALUES ('likes tea')")
    conn.close()
    async with await ConversationStore.open(db_path) as store:
        await store.conversation_id(ConversationKey("cli", "local"))
    conn = sqlite3.connect(db_path)
    try:
        versions = dict(conn.execute("SELECT component, version FROM schema_version"))
        assert versions == {"memories": 7, COMPONENT: SCHEMA_VERSION}
        assert conn.execute("SELECT fact FROM memories").fetchall() == [("likes tea",)]
    finally:
        conn.close()


def _fresh(tmp_path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(tmp_path / "m.db", isolation_level=None)
    ensure_schema(conn)
    return conn


def test_migrations_run_in_order_inside_one_transaction(tmp_path: Path) -> None:
    conn = _fresh(tmp_path)
    ran: list[int] = []

    def step(version: int):
        def apply(c: sqlite3.Connection) -> None:
            ran.append(version)
            c.execute(f"ALTER TABLE turns ADD COLUMN extra_{version} INTEGER")

        return apply

    found, now = ensure_schema(
        conn,
        current=SCHEMA_VERSION + 2,
        migrations={SCHEMA_VERSION + 1: step(SCHEMA_VERSION + 1), SCHEMA_VERSION + 2: step(99)},
    )
    assert (found, now) == (SCHEMA_VERSION, SCHEMA_VERSION + 2)
    assert ran == [SCHEMA_VERSION + 1, 99]
    columns = {row[1] for row in conn.execute("PRAGMA table_info(turns)")}
    assert {f"extra_{SCHEMA_VERSION + 1}", "extra_99"} <= columns
    assert read_version(conn) == SCHEMA_VERSION + 2
    # Already current: nothing runs again.
    assert ensure_schema(conn, current=SCHEMA_VERSION + 2, migrations={}) == (
        SCHEMA_VERSION + 2,
        SCHEMA_VERSION + 2,
    )
    conn.close()


def test_a_failing_migration_rolls_everything_back(tmp_path: Path) -> None:
    conn = _fresh(tmp_path)

    def good(c: sqlite3.Connection) -> None:
        c.execute("ALTER TABLE turns ADD COLUMN applied INTEGER")

    def bad(c: sqlite3.Connection) -> None:
        raise RuntimeError("step two broke")

    with pytest.raises(RuntimeError, match="step two broke"):
        ensure_schema(
            conn,
            current=SCHEMA_VERSION + 2,
            migrations={SCHEMA_VERSION + 1: good, SCHEMA_VERSION + 2: bad},
        )
    assert "applied" not in {row[1] for row in conn.execute("PRAGMA table_info(turns)")}
    assert read_version(conn) == SCHEMA_VERSION
    with pytest.raises(StoreError, match="no migration"):
        ensure_schema(conn, current=SCHEMA_VERSION + 1, migrations={})
    conn.close()


def test_connect_refuses_a_newer_file_before_opening_it(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("CREATE TABLE schema_version (component TEXT PRIMARY KEY, version INTEGER)")
    conn.execute("INSERT INTO schema_version VALUES (?, ?)", (COMPONENT, SCHEMA_VERSION + 1))
    conn.close()
    before = digest(path)
    with pytest.raises(StoreSchemaError):
        connect(path)
    assert digest(path) == before
    assert sorted(os.listdir(tmp_path)) == ["m.db"]


async def test_a_version_1_database_gains_sender_names_and_keeps_its_history(
    db_path: Path,
) -> None:
    from fermix_core.messages import Message, Usage

    async with await ConversationStore.open(db_path) as store:
        cid = await store.conversation_id(("cli", "old"))
        handle = await store.begin_turn(
            cid, Message.user("from before"), speaker="owner", sender_id="1", session_id="s"
        )
        await store.commit_turn(
            handle.turn_id, [Message.assistant("kept")], usage=Usage(), model=None, provider=None
        )
    conn = sqlite3.connect(db_path, isolation_level=None)
    conn.execute("ALTER TABLE messages DROP COLUMN sender_name")
    conn.execute("UPDATE schema_version SET version = 1 WHERE component = ?", (COMPONENT,))
    conn.close()

    async with await ConversationStore.open(db_path) as store:
        window = await store.load_window(cid)
        assert [row.message.text for row in window] == ["from before", "kept"]
        assert window[0].sender_name is None
    check = sqlite3.connect(db_path)
    try:
        assert read_version(check) == SCHEMA_VERSION == 4
        columns = {row[1] for row in check.execute("PRAGMA table_info(messages)")}
        assert "sender_name" in columns
    finally:
        check.close()
