# ruff: noqa: E501  (the version-2 statements are kept exactly as they were)
"""Version 3 of the conversation schema: CHECKs as OR chains, two unused indexes dropped.

A database of version 2 is built from that version's own statements (frozen below), filled,
and opened by the current store: the migration must leave it equal to a fresh database,
keep every row, keep the constraints enforced, and leave a hand-edited table alone.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from fermix_core.channel import ConversationKey
from fermix_core.messages import Message, Usage
from fermix_core.store import SCHEMA_VERSION, ConversationStore
from fermix_core.store.schema import COMPONENT, create_current_schema, read_version

pytestmark = pytest.mark.anyio

V2_STATEMENTS: tuple[str, ...] = (
    (
        "\n"
        "CREATE TABLE IF NOT EXISTS conversations (\n"
        "\tid INTEGER NOT NULL, \n"
        '\t"key" VARCHAR NOT NULL, \n'
        "\tchannel VARCHAR NOT NULL, \n"
        "\tchat_id VARCHAR NOT NULL, \n"
        "\tthread_id VARCHAR, \n"
        "\twindow_start_seq INTEGER NOT NULL, \n"
        "\tsummary_message_id INTEGER, \n"
        "\tcreated_at FLOAT NOT NULL, \n"
        "\tupdated_at FLOAT NOT NULL, \n"
        "\tPRIMARY KEY (id), \n"
        '\tUNIQUE ("key")\n'
        ")\n"
        "\n"
    ),
    (
        "\n"
        "CREATE TABLE IF NOT EXISTS counters (\n"
        "\tname VARCHAR NOT NULL, \n"
        "\tvalue INTEGER NOT NULL, \n"
        "\tPRIMARY KEY (name)\n"
        ")\n"
        "\n"
    ),
    (
        "\n"
        "CREATE TABLE IF NOT EXISTS schema_version (\n"
        "\tcomponent VARCHAR NOT NULL, \n"
        "\tversion INTEGER NOT NULL, \n"
        "\tPRIMARY KEY (component)\n"
        ")\n"
        "\n"
    ),
    (
        "\n"
        "CREATE TABLE IF NOT EXISTS turns (\n"
        "\tid INTEGER NOT NULL, \n"
        "\tconversation_id INTEGER NOT NULL, \n"
        "\tuser_message_id INTEGER, \n"
        "\tstatus VARCHAR NOT NULL, \n"
        "\tspeaker VARCHAR NOT NULL, \n"
        "\tsender_id VARCHAR, \n"
        "\tsession_id VARCHAR NOT NULL, \n"
        "\trun_profile VARCHAR NOT NULL, \n"
        "\tmodel VARCHAR, \n"
        "\tprovider VARCHAR, \n"
        "\tinput_tokens INTEGER NOT NULL, \n"
        "\toutput_tokens INTEGER NOT NULL, \n"
        "\tcached_input_tokens INTEGER NOT NULL, \n"
        "\treasoning_tokens INTEGER NOT NULL, \n"
        "\tstarted_at FLOAT NOT NULL, \n"
        "\tfinished_at FLOAT, \n"
        "\tPRIMARY KEY (id), \n"
        "\tCONSTRAINT ck_turns_status CHECK (status IN ('started', 'committed', 'stopped', 'failed', 'empty')), \n"
        "\tCONSTRAINT ck_turns_speaker CHECK (speaker IN ('owner', 'guest', 'job', 'system')), \n"
        "\tFOREIGN KEY(conversation_id) REFERENCES conversations (id)\n"
        ")\n"
        "\n"
    ),
    ("CREATE INDEX IF NOT EXISTS ix_turns_conversation_id ON turns (conversation_id)"),
    (
        "\n"
        "CREATE TABLE IF NOT EXISTS messages (\n"
        "\tid INTEGER NOT NULL, \n"
        "\tconversation_id INTEGER NOT NULL, \n"
        "\tturn_id INTEGER, \n"
        "\tseq INTEGER NOT NULL, \n"
        "\tanchor_seq INTEGER NOT NULL, \n"
        "\tkind VARCHAR NOT NULL, \n"
        "\trole VARCHAR NOT NULL, \n"
        "\tspeaker VARCHAR NOT NULL, \n"
        "\tsender_id VARCHAR, \n"
        "\tsender_name VARCHAR, \n"
        "\tbody VARCHAR NOT NULL, \n"
        "\ttext VARCHAR NOT NULL, \n"
        "\tcreated_at FLOAT NOT NULL, \n"
        "\tPRIMARY KEY (id), \n"
        "\tCONSTRAINT uq_messages_conversation_seq UNIQUE (conversation_id, seq), \n"
        "\tCONSTRAINT ck_messages_kind CHECK (kind IN ('message', 'summary', 'marker')), \n"
        "\tCONSTRAINT ck_messages_role CHECK (role IN ('system', 'user', 'assistant', 'tool')), \n"
        "\tCONSTRAINT ck_messages_speaker CHECK (speaker IN ('owner', 'guest', 'job', 'system')), \n"
        "\tFOREIGN KEY(conversation_id) REFERENCES conversations (id), \n"
        "\tFOREIGN KEY(turn_id) REFERENCES turns (id)\n"
        ")\n"
        "\n"
    ),
    ("CREATE INDEX IF NOT EXISTS ix_messages_turn_id ON messages (turn_id)"),
    (
        "CREATE INDEX IF NOT EXISTS ix_messages_window ON messages (conversation_id, anchor_seq, seq)"
    ),
)


def _master(path: Path) -> list[tuple[str, str, str]]:
    conn = sqlite3.connect(path)
    try:
        rows = conn.execute(
            "SELECT type, name, sql FROM sqlite_master WHERE name != 'sqlite_sequence' "
            "ORDER BY type, name"
        )
        return [tuple(row) for row in rows]
    finally:
        conn.close()


def _version_2(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        for statement in V2_STATEMENTS:
            conn.execute(statement)
        conn.execute("INSERT INTO schema_version (component, version) VALUES (?, 2)", (COMPONENT,))
    finally:
        conn.close()


async def _a_committed_turn(store: ConversationStore, chat: str, text: str) -> int:
    cid = await store.conversation_id(ConversationKey("cli", chat))
    start = await store.start_turn(cid, Message.user(text), speaker="owner", sender_id="u")
    await store.commit_turn(
        start.handle.turn_id,
        [Message.assistant(f"re: {text}")],
        usage=Usage(),
        model="m",
        provider="p",
    )
    return cid


async def test_a_version_2_database_becomes_what_a_fresh_one_is(tmp_path: Path) -> None:
    old, fresh = tmp_path / "old" / "memory.db", tmp_path / "fresh" / "memory.db"
    _version_2(old)
    # Rows written under the version-2 constraints (their IN lists), by SQL of that time.
    conn = sqlite3.connect(old, isolation_level=None)
    conn.execute(
        "INSERT INTO conversations (key, channel, chat_id, thread_id, window_start_seq, "
        "created_at, updated_at) VALUES (?, 'cli', 'a', NULL, 0, 1, 1)",
        ('["cli","a",null]',),
    )
    conn.execute(
        "INSERT INTO turns (conversation_id, user_message_id, status, speaker, session_id, "
        "run_profile, input_tokens, output_tokens, cached_input_tokens, reasoning_tokens, "
        "started_at) VALUES (1, 1, 'committed', 'guest', 'main-1', 'normal', 0, 0, 0, 0, 1)"
    )
    body = Message.user("from version 2").model_dump_json()
    conn.execute(
        "INSERT INTO messages (conversation_id, turn_id, seq, anchor_seq, kind, role, speaker, "
        "body, text, created_at) VALUES (1, 1, 1, 1, 'message', 'user', 'guest', ?, 'x', 1)",
        (body,),
    )
    conn.close()
    async with await ConversationStore.open(old) as store:
        window = await store.load_window(1)
        assert [row.message.text for row in window] == ["from version 2"]
        # The same connection that migrated writes under the new constraints at once.
        await _a_committed_turn(store, "a", "after the upgrade")
        assert [row.message.text for row in await store.load_window(1)] == [
            "from version 2",
            "after the upgrade",
            "re: after the upgrade",
        ]
    async with await ConversationStore.open(fresh):
        pass
    assert _master(old) == _master(fresh)
    check = sqlite3.connect(old)
    try:
        assert read_version(check) == SCHEMA_VERSION == 4
        assert check.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        indexes = {
            name for (name,) in check.execute("SELECT name FROM sqlite_master WHERE type = 'index'")
        }
        # Version 3 dropped two indexes, version 4 the window's (test_migrate_v4.py).
        assert not indexes & {"ix_turns_conversation_id", "ix_messages_turn_id"}
        assert "ix_messages_window" not in indexes
    finally:
        check.close()


@pytest.mark.parametrize(
    ("table", "column", "bad"),
    [
        ("turns", "status", "finished"),
        ("turns", "speaker", "stranger"),
        ("messages", "kind", "note"),
        ("messages", "role", "robot"),
        ("messages", "speaker", "Owner"),
    ],
)
async def test_the_migrated_constraints_still_refuse_what_they_refused(
    tmp_path: Path, table: str, column: str, bad: str
) -> None:
    path = tmp_path / "memory.db"
    _version_2(path)
    async with await ConversationStore.open(path) as store:
        await _a_committed_turn(store, "a", "hello")
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        with pytest.raises(sqlite3.IntegrityError, match="CHECK constraint failed"):
            conn.execute(f"UPDATE {table} SET {column} = ? WHERE id = 1", (bad,))  # noqa: S608
        kept = conn.execute(f"SELECT {column} FROM {table} WHERE id = 1").fetchone()[0]  # noqa: S608
        assert kept != bad
    finally:
        conn.close()


async def test_a_hand_edited_table_keeps_its_own_constraints(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    edited = tuple(
        s.replace(
            "CHECK (role IN ('system', 'user', 'assistant', 'tool'))",
            "CHECK (role IN ('system', 'user', 'assistant', 'tool', 'developer'))",
        )
        for s in V2_STATEMENTS
    )
    conn = sqlite3.connect(path, isolation_level=None)
    for statement in edited:
        conn.execute(statement)
    conn.execute("INSERT INTO schema_version (component, version) VALUES (?, 2)", (COMPONENT,))
    conn.close()
    async with await ConversationStore.open(path) as store:
        await _a_committed_turn(store, "a", "hello")
    (sql,) = (
        sqlite3.connect(path)
        .execute("SELECT sql FROM sqlite_master WHERE name = 'messages'")
        .fetchone()
    )
    assert "role IN ('system', 'user', 'assistant', 'tool', 'developer')" in sql
    # The constraints whose text was the expected one changed all the same.
    assert "kind = 'message' OR kind = 'summary' OR kind = 'marker'" in sql
    assert "speaker IN" not in sql


def test_the_or_chains_accept_exactly_what_the_in_lists_accepted(tmp_path: Path) -> None:
    old = sqlite3.connect(":memory:")
    for statement in V2_STATEMENTS:
        old.execute(statement)
    new = sqlite3.connect(":memory:")
    create_current_schema(new)
    values = ["owner", "guest", "job", "system", "OWNER", "owner ", "", "user", "tool", None, 1]
    for db in (old, new):
        db.execute("CREATE TABLE probe (speaker)")
        db.executemany("INSERT INTO probe VALUES (?)", [(v,) for v in values])

    def accepted(db: sqlite3.Connection) -> list[bool]:
        sql = db.execute("SELECT sql FROM sqlite_master WHERE name = 'messages'").fetchone()[0]
        expr = sql.split("ck_messages_speaker CHECK (", 1)[1].split("), ", 1)[0]
        return [
            bool(r[0]) if r[0] is not None else None
            for r in db.execute(f"SELECT {expr} FROM probe ORDER BY rowid")  # noqa: S608
        ]

    assert accepted(old) == accepted(new)
