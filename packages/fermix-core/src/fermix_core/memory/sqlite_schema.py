"""The memory tables' DDL, schema versioning and connection setup, and query building.

See :mod:`fermix_core.memory.sqlite` for the layout and why it is shaped this way.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable
from pathlib import Path

from fermix_core.memory.backend import MemoryCategory, MemoryUnavailableError
from fermix_core.sqlite_files import create_private, open_connection, use_wal

__all__ = [
    "BUSY_TIMEOUT_S",
    "COMPONENT",
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "MemoryDatabaseError",
    "MemorySchemaError",
    "connect",
    "match_expression",
    "match_terms",
    "rebuild_term_counts",
]

COMPONENT = "memory"
SCHEMA_VERSION = 2
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

_V1 = (
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

#: Adds each word's count of rows for both indexes (``memory_fact_terms``,
#: ``memory_history_terms``), so a search can tell its rare words from its common ones
#: without walking doclists. The words of a row are read back from a contentless scratch
#: index with the same tokenizer (``memory_terms_scratch``, empty between statements), so
#: the counts use exactly the index's own tokens; the fact triggers keep them in the same
#: transaction as the fact. Existing indexes are counted once, here.
_V2 = (
    # Only which rows hold a word matters here: no positions, no per-row sizes.
    "CREATE VIRTUAL TABLE memory_terms_scratch USING fts5(content, key, content='', "
    f"tokenize='{_TOKENIZER}', detail=none, columnsize=0)",
    "CREATE VIRTUAL TABLE memory_terms_scratch_v USING fts5vocab(memory_terms_scratch, row)",
    "CREATE TABLE memory_fact_terms (term TEXT PRIMARY KEY, docs INTEGER NOT NULL) WITHOUT ROWID",
    "CREATE TABLE memory_history_terms (term TEXT PRIMARY KEY, docs INTEGER NOT NULL) "
    "WITHOUT ROWID",
    "DROP TRIGGER IF EXISTS memory_facts_ai",
    "DROP TRIGGER IF EXISTS memory_facts_ad",
    "DROP TRIGGER IF EXISTS memory_facts_au",
    "CREATE TRIGGER memory_facts_ai AFTER INSERT ON memory_facts BEGIN "
    "INSERT INTO memory_facts_fts (rowid, content, key) VALUES (new.id, new.content, new.key); "
    "INSERT INTO memory_terms_scratch (rowid, content, key) VALUES (1, new.content, new.key); "
    "INSERT INTO memory_fact_terms (term, docs) SELECT term, doc FROM memory_terms_scratch_v "
    "WHERE 1 ON CONFLICT (term) DO UPDATE SET docs = docs + excluded.docs; "
    "INSERT INTO memory_terms_scratch (memory_terms_scratch) VALUES ('delete-all'); END",
    "CREATE TRIGGER memory_facts_ad AFTER DELETE ON memory_facts BEGIN "
    "INSERT INTO memory_facts_fts (memory_facts_fts, rowid, content, key) "
    "VALUES ('delete', old.id, old.content, old.key); "
    "INSERT INTO memory_terms_scratch (rowid, content, key) VALUES (1, old.content, old.key); "
    "INSERT INTO memory_fact_terms (term, docs) SELECT term, doc FROM memory_terms_scratch_v "
    "WHERE 1 ON CONFLICT (term) DO UPDATE SET docs = docs - excluded.docs; "
    "INSERT INTO memory_terms_scratch (memory_terms_scratch) VALUES ('delete-all'); END",
    "CREATE TRIGGER memory_facts_au AFTER UPDATE OF content, key ON memory_facts BEGIN "
    "INSERT INTO memory_facts_fts (memory_facts_fts, rowid, content, key) "
    "VALUES ('delete', old.id, old.content, old.key); "
    "INSERT INTO memory_facts_fts (rowid, content, key) VALUES (new.id, new.content, new.key); "
    "INSERT INTO memory_terms_scratch (rowid, content, key) VALUES (1, old.content, old.key); "
    "INSERT INTO memory_fact_terms (term, docs) SELECT term, doc FROM memory_terms_scratch_v "
    "WHERE 1 ON CONFLICT (term) DO UPDATE SET docs = docs - excluded.docs; "
    "INSERT INTO memory_terms_scratch (memory_terms_scratch) VALUES ('delete-all'); "
    "INSERT INTO memory_terms_scratch (rowid, content, key) VALUES (1, new.content, new.key); "
    "INSERT INTO memory_fact_terms (term, docs) SELECT term, doc FROM memory_terms_scratch_v "
    "WHERE 1 ON CONFLICT (term) DO UPDATE SET docs = docs + excluded.docs; "
    "INSERT INTO memory_terms_scratch (memory_terms_scratch) VALUES ('delete-all'); END",
)

_COUNTED = {"memory_fact_terms": "memory_facts_fts", "memory_history_terms": "memory_history_fts"}


def rebuild_term_counts(conn: sqlite3.Connection, table: str) -> None:
    """Recount *table* (``memory_fact_terms`` or ``memory_history_terms``) from its index.

    One pass over the whole index, in the caller's transaction: for the migration, and for
    bulk loads that fill an index directly instead of through the triggers.
    """
    index = _COUNTED[table]
    vocab = f"temp.{index}_rebuild_v"
    conn.execute(f"CREATE VIRTUAL TABLE {vocab} USING fts5vocab(main, {index}, row)")
    try:
        conn.execute(f"DELETE FROM {table}")  # noqa: S608 - constant names
        conn.execute(f"INSERT INTO {table} (term, docs) SELECT term, doc FROM {vocab}")  # noqa: S608
    finally:
        conn.execute(f"DROP TABLE {vocab}")


def _create_v1(conn: sqlite3.Connection) -> None:
    for statement in _V1:
        conn.execute(statement)


def _add_term_counts(conn: sqlite3.Connection) -> None:
    for statement in _V2:
        conn.execute(statement)
    for table in _COUNTED:
        rebuild_term_counts(conn, table)


#: ``{target_version: upgrade from the version before}``, run in order inside one
#: ``BEGIN IMMEDIATE`` transaction: a fresh file runs them all, an older one every step
#: after its version, so a crash or a failing step leaves the file as it was. A change
#: appends the next version and bumps :data:`SCHEMA_VERSION`.
MIGRATIONS: dict[int, Callable[[sqlite3.Connection], None]] = {
    1: _create_v1,
    2: _add_term_counts,
}


class MemoryDatabaseError(MemoryUnavailableError):
    """``memory.db`` cannot be opened, read or written; the message says what to check."""


class MemorySchemaError(MemoryDatabaseError):
    """``memory.db`` holds a memory schema newer than this build; nothing was written."""


def match_terms(query: str) -> list[str]:
    """The FTS5 terms for free-form *query*: each word quoted, three letters or more a prefix."""
    words: list[str] = []
    for word in _WORD.findall((query or "").lower()):
        if word not in words:
            words.append(word)
    meaningful = [w for w in words if w not in _STOPWORDS] or words
    return [f'"{w}"*' if len(w) >= 3 else f'"{w}"' for w in meaningful[:_MAX_QUERY_TERMS]]


def match_expression(query: str) -> str | None:
    """The FTS5 MATCH text for free-form *query*, or ``None`` when it has no words."""
    return " OR ".join(match_terms(query)) or None


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
                    for version in range(found + 1, SCHEMA_VERSION + 1):
                        MIGRATIONS[version](conn)
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
