"""Version 4 of the conversation schema: ``ix_messages_window`` dropped.

A version-3 database (today's tables plus that index, stamped 3) is filled through the store
of that shape and opened by the current one: the index goes, no row changes, the file equals
a fresh one, windows and stop markers read the same rows in the same order — through the
unique ``(conversation_id, seq)`` index, never a scan of the conversation.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from fermix_core.channel import ConversationKey
from fermix_core.messages import Message, ToolCall, ToolResult, Usage
from fermix_core.store import SCHEMA_VERSION, ConversationStore, engine
from fermix_core.store.schema import COMPONENT, WINDOW_INDEX, read_version

pytestmark = pytest.mark.anyio

V3_WINDOW_INDEX = (
    "CREATE INDEX IF NOT EXISTS ix_messages_window ON messages (conversation_id, anchor_seq, seq)"
)


def _master(path: Path) -> list[tuple[str, str, str]]:
    conn = sqlite3.connect(path)
    try:
        rows = conn.execute("SELECT type, name, sql FROM sqlite_master ORDER BY type, name")
        return [tuple(row) for row in rows]
    finally:
        conn.close()


def _rows(path: Path) -> list[tuple]:
    conn = sqlite3.connect(path)
    try:
        return [
            *conn.execute("SELECT * FROM conversations ORDER BY id"),
            *conn.execute("SELECT * FROM turns ORDER BY id"),
            *conn.execute("SELECT * FROM messages ORDER BY id"),
        ]
    finally:
        conn.close()


def _as_version_3(path: Path, *, with_index: bool = True) -> None:
    """Put back what version 3 had on top of today's tables, and stamp it 3."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        if with_index:
            conn.execute(V3_WINDOW_INDEX)
        conn.execute("UPDATE schema_version SET version = 3 WHERE component = ?", (COMPONENT,))
    finally:
        conn.close()


async def _fill(store: ConversationStore) -> int:
    """Turns of every shape: tool rows, a turn committed after a later one, a stopped turn."""
    cid = await store.conversation_id(ConversationKey("cli", "a"))
    usage = Usage()
    first = await store.start_turn(cid, Message.user("q1"), speaker="owner", sender_id="u")
    await store.commit_turn(
        first.handle.turn_id,
        [
            Message.assistant(tool_calls=[ToolCall(id="c1", name="echo")]),
            Message.tool(ToolResult(call_id="c1", name="echo", content="r1")),
            Message.assistant("a1"),
        ],
        usage=usage,
        model="m",
        provider="p",
    )
    slow = await store.start_turn(cid, Message.user("background"), speaker="owner", sender_id="u")
    quick = await store.start_turn(cid, Message.user("q2"), speaker="owner", sender_id="u")
    await store.commit_turn(
        quick.handle.turn_id, [Message.assistant("a2")], usage=usage, model="m", provider="p"
    )
    await store.commit_turn(
        slow.handle.turn_id, [Message.assistant("late")], usage=usage, model="m", provider="p"
    )
    await store.start_turn(cid, Message.user("stopped"), speaker="owner", sender_id="u")
    return cid


async def _texts(path: Path, cid: int) -> list[str]:
    async with await ConversationStore.open(path) as store:
        return [row.message.text for row in await store.load_window(cid)]


async def test_a_version_3_database_loses_the_window_index_and_nothing_else(
    tmp_path: Path,
) -> None:
    old, fresh = tmp_path / "old" / "memory.db", tmp_path / "fresh" / "memory.db"
    async with await ConversationStore.open(old) as store:
        pass
    _as_version_3(old)
    # Rows written while the file had version 3's shape (the index written with them).
    conn = sqlite3.connect(old, isolation_level=None)
    conn.execute("UPDATE schema_version SET version = 4 WHERE component = ?", (COMPONENT,))
    conn.close()
    async with await ConversationStore.open(old) as store:
        cid = await _fill(store)
    _as_version_3(old)
    before = _rows(old)
    conn = sqlite3.connect(old)
    assert conn.execute(
        "SELECT COUNT(*) FROM sqlite_master WHERE name = ?", (WINDOW_INDEX,)
    ).fetchone() == (1,)
    conn.close()

    expected = ["q1", "", "r1", "a1", "background", "late", "q2", "a2", "stopped"]
    async with await ConversationStore.open(old) as store:
        assert [row.message.text for row in await store.load_window(cid)] == expected
    assert _rows(old) == before, "the upgrade changed no row"
    async with await ConversationStore.open(old) as store:
        assert await store.append_marker(cid, "[stopped]")
    assert await _texts(old, cid) == [*expected, "[stopped]"]
    async with await ConversationStore.open(fresh):
        pass
    assert _master(old) == _master(fresh)
    check = sqlite3.connect(old)
    try:
        assert read_version(check) == SCHEMA_VERSION == 4
        assert check.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        check.close()


async def test_a_version_3_database_without_the_index_upgrades_too(tmp_path: Path) -> None:
    """An index someone dropped by hand already: the upgrade has nothing to drop."""
    path = tmp_path / "memory.db"
    async with await ConversationStore.open(path) as store:
        cid = await _fill(store)
    _as_version_3(path, with_index=False)
    assert (await _texts(path, cid))[-1] == "stopped"
    check = sqlite3.connect(path)
    try:
        assert read_version(check) == 4
    finally:
        check.close()


@pytest.mark.parametrize(
    "name", ["_SELECT_WINDOW", "_SELECT_WINDOW_POSITIONS", "_SELECT_LAST", "_SELECT_TOP"]
)
async def test_window_and_last_row_queries_search_the_unique_index(
    tmp_path: Path, name: str
) -> None:
    """No query of a turn, a cold window, compaction or /stop scans a conversation's rows."""
    path = tmp_path / "memory.db"
    async with await ConversationStore.open(path):
        pass
    conn = sqlite3.connect(path)
    try:
        sql = getattr(engine, name)
        plan = [row[3] for row in conn.execute(f"EXPLAIN QUERY PLAN {sql}", (1,) * sql.count("?"))]
    finally:
        conn.close()
    messages = [step for step in plan if " m " in f" {step} " or "messages" in step]
    assert messages and all(
        "USING" in step and "sqlite_autoindex_messages_1" in step for step in messages
    ), plan
    assert not any(step.startswith("SCAN") for step in plan), plan
