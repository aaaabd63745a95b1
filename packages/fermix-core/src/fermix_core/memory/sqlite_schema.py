"""The memory tables' DDL, schema versioning and connection setup, and query building.

See :mod:`fermix_core.memory.sqlite` for the layout and why it is shaped this way.
"""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

from fermix_core.memory.backend import MemoryCategory, MemoryUnavailableError
from fermix_core.sqlite_files import create_private, open_connection, use_wal

__all__ = [
    "BUSY_TIMEOUT_S",
    "COMPONENT",
    "SCHEMA_VERSION",
    "MemoryDatabaseError",
    "MemorySchemaError",
    "connect",
    "match_expression",
]

COMPONENT = "memory"
SCHEMA_VERSION = 1
BUSY_TIMEOUT_S = 10.0
_MAX_QUERY_TERMS = 24

_WORD = re.compile(r"\w+")
#: Words too common to be worth matching; dropped unless a query has nothing else.
_STOPWORDS = frozenset(
    _WORD.findall(
        "a an and are as at be but by did do does for from had has have how i if in into is it "
        "its me my of on or our so than that the their them then there these they this to was "
        "we were what when where which who why will with you your"
    )
)

_CATEGORY_CHECK = ", ".join(f"'{c.value}'" for c in MemoryCategory)
_TOKENIZER = "unicode61 remove_diacritics 2"

_CREATE = (
    # Same shape as the conversation store's own definition, whichever component comes first.
    "CREATE TABLE IF NOT EXISTS schema_version "
    "(component VARCHAR NOT NULL, version INTEGER NOT NULL, PRIMARY KEY (component))",
    f"""CREATE TABLE IF NOT EXISTS memory_facts (
        id INTEGER PRIMARY KEY,
        category TEXT NOT NULL CHECK (category IN ({_CATEGORY_CHECK})),
        key TEXT,
        content TEXT NOT NULL,
        folded TEXT NOT NULL,
        speaker TEXT NOT NULL CHECK (speaker IN ('owner', 'guest', 'job', 'system')),
        conversation_key TEXT,
        job_id TEXT,
        archived INTEGER NOT NULL DEFAULT 0 CHECK (archived IN (0, 1)),
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL,
        seq INTEGER NOT NULL
    )""",
    "CREATE UNIQUE INDEX IF NOT EXISTS ux_memory_facts_key ON memory_facts (key) "
    "WHERE archived = 0 AND key IS NOT NULL",
    "CREATE INDEX IF NOT EXISTS ix_memory_facts_folded ON memory_facts (category, folded) "
    "WHERE archived = 0",
    "CREATE INDEX IF NOT EXISTS ix_memory_facts_recent ON memory_facts (archived, updated_at, seq)",
    "CREATE INDEX IF NOT EXISTS ix_memory_facts_job ON memory_facts (job_id) "
    "WHERE job_id IS NOT NULL",
    "CREATE INDEX IF NOT EXISTS ix_memory_facts_conversation ON memory_facts (conversation_key) "
    "WHERE conversation_key IS NOT NULL",
    "CREATE VIRTUAL TABLE IF NOT EXISTS memory_facts_fts USING fts5(content, key, "
    f"content='memory_facts', content_rowid='id', tokenize='{_TOKENIZER}')",
    "CREATE TRIGGER IF NOT EXISTS memory_facts_ai AFTER INSERT ON memory_facts BEGIN "
    "INSERT INTO memory_facts_fts (rowid, content, key) VALUES (new.id, new.content, new.key); "
    "END",
    "CREATE TRIGGER IF NOT EXISTS memory_facts_ad AFTER DELETE ON memory_facts BEGIN "
    "INSERT INTO memory_facts_fts (memory_facts_fts, rowid, content, key) "
    "VALUES ('delete', old.id, old.content, old.key); END",
    "CREATE TRIGGER IF NOT EXISTS memory_facts_au AFTER UPDATE OF content, key ON memory_facts "
    "BEGIN INSERT INTO memory_facts_fts (memory_facts_fts, rowid, content, key) "
    "VALUES ('delete', old.id, old.content, old.key); "
    "INSERT INTO memory_facts_fts (rowid, content, key) VALUES (new.id, new.content, new.key); "
    "END",
    "CREATE VIRTUAL TABLE IF NOT EXISTS memory_history_fts USING fts5(text, "
    f"content='messages', content_rowid='id', tokenize='{_TOKENIZER}')",
    "CREATE TABLE IF NOT EXISTS memory_state (name TEXT PRIMARY KEY, value TEXT NOT NULL)",
)


class MemoryDatabaseError(MemoryUnavailableError):
    """``memory.db`` cannot be opened, read or written; the message says what to check."""


class MemorySchemaError(MemoryDatabaseError):
    """``memory.db`` holds a memory schema newer than this build; nothing was written."""


def match_expression(query: str) -> str | None:
    """The FTS5 MATCH text for free-form *query*, or ``None`` when it has no words."""
    words: list[str] = []
    for word in _WORD.findall((query or "").lower()):
        if word not in words:
            words.append(word)
    meaningful = [w for w in words if w not in _STOPWORDS] or words
    terms = [f'"{w}"*' if len(w) >= 3 else f'"{w}"' for w in meaningful[:_MAX_QUERY_TERMS]]
    return " OR ".join(terms) or None


# --------------------------------------------------------------------------- opening


def _read_version(conn: sqlite3.Connection) -> int:
    has_table = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'"
    ).fetchone()
    if has_table is None:
        return 0
    row = conn.execute(
        "SELECT version FROM schema_version WHERE component = ?", (COMPONENT,)
    ).fetchone()
    return int(row[0]) if row else 0


def _check_version(version: int, path: Path) -> None:
    if version > SCHEMA_VERSION:
        raise MemorySchemaError(
            f"{path} has memory schema version {version}, but this Fermix only knows versions "
            f"up to {SCHEMA_VERSION}; upgrade fermix (the file was left untouched)"
        )


def connect(path: Path) -> sqlite3.Connection:
    """Open *path*, check the memory schema version, then create or keep the tables."""
    path = Path(path)
    create_private(path, MemoryDatabaseError)
    conn = open_connection(path, MemoryDatabaseError, BUSY_TIMEOUT_S)
    try:
        _check_version(_read_version(conn), path)
        use_wal(conn, path, MemoryDatabaseError)
        if _read_version(conn) != SCHEMA_VERSION:
            conn.execute("BEGIN IMMEDIATE")
            try:
                found = _read_version(conn)  # another process may have created it meanwhile
                _check_version(found, path)
                if found < SCHEMA_VERSION:
                    for statement in _CREATE:
                        conn.execute(statement)
                    conn.execute(
                        "INSERT INTO schema_version (component, version) VALUES (?, ?) "
                        "ON CONFLICT (component) DO UPDATE SET version = excluded.version",
                        (COMPONENT, SCHEMA_VERSION),
                    )
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
    except MemoryDatabaseError:
        conn.close()
        raise
    except sqlite3.DatabaseError as exc:
        conn.close()
        raise MemoryDatabaseError(
            f"cannot prepare {path} for memory ({exc}); if another Fermix process holds it, "
            "stop that one (`fermix stop`); if the file is damaged, move it aside or restore it "
            "from a backup"
        ) from exc
    return conn
