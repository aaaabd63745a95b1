"""The SQL of the SQLite memory backend, run synchronously on one connection.

Everything here runs on the backend's worker thread, one call at a time (the async facade
in :mod:`fermix_core.memory.sqlite` guarantees that). Each public method is one
transaction; the ``*_in_tx`` variants run inside a caller's transaction so a batch can
land whole or not at all. Interpolated SQL fragments are constants or ``?`` lists: every
value is bound.
"""

from __future__ import annotations

import json
import re
import sqlite3
import time
import unicodedata
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fermix_core.channel import ConversationKey
from fermix_core.memory.backend import (
    AddOp,
    ArchiveOp,
    HistoryMessage,
    MemoryCategory,
    MemoryFact,
    MemoryFilter,
    MemoryStoreError,
    Provenance,
    ReplaceOp,
    StoreResult,
    fold_content,
    memory_of,
    normalize_categories,
    normalize_content,
    normalize_key,
    replacement_key,
)

__all__ = ["HISTORY_BATCH", "HISTORY_INLINE", "RANK_WINDOW", "TERM_BUDGET", "SyncMemory"]

#: Messages indexed per catch-up transaction, so a large backlog never holds the write
#: lock (or the backend's worker) long enough to stall a turn.
HISTORY_BATCH = 5_000
#: A history search indexes at most this many new messages itself; a larger backlog is
#: left to the background catch-up (after replies), so a recall never pays for it.
HISTORY_INLINE = 1_000
#: A search ranks (bm25) at most this many visible matches, the newest ones: past that, a
#: common word would make every recall score a large share of memory for ten results.
RANK_WINDOW = 200
#: How many rows the words that lead a search may match together (by the stored per-word
#: counts): the rarest word always leads, the next rarest join while the sum stays within
#: this, and the rest are dropped; a word over it on its own is matched exactly, not as a
#: prefix. bm25 walks every row holding a word to weigh it, so this bounds that walk.
TERM_BUDGET = 5_000
#: Token characters as the ``unicode61`` tokenizer sees them (letters and digits, so
#: ``foo_bar`` is two tokens); only used to look words up in the per-word counts.
_TOKEN = re.compile(r"[^\W_]+")
_HISTORY_WATERMARK = "history_indexed_id"
_SEQ = "seq"

_FACT_COLUMNS = (
    "f.id, f.category, f.key, f.content, f.speaker, f.conversation_key, f.job_id, f.archived, "
    "f.created_at, f.updated_at"
)
_PLAIN_FACT_COLUMNS = _FACT_COLUMNS.replace("f.", "")
_MESSAGE_COLUMNS = (
    "m.id, c.channel, c.chat_id, c.thread_id, m.role, m.speaker, m.text, m.created_at"
)
_PLAIN_MESSAGE_COLUMNS = "id, channel, chat_id, thread_id, role, speaker, text, created_at"


#: The history index's watermark and the newest message id, read in one statement.
_CATCH_UP_STATE = (
    "SELECT COALESCE((SELECT CAST(value AS INTEGER) FROM memory_state WHERE name = ?), 0), "
    "COALESCE((SELECT MAX(id) FROM messages), 0)"
)
#: One catch-up transaction as one statement: inserting a step size into this temporary
#: view runs its trigger, which indexes the messages past the watermark (at most that many
#: ids), adds their word counts, empties the scratch index and moves the watermark last,
#: all inside the statement's own transaction. The watermark and the newest id are read
#: again by each step (primary-key lookups): nothing moves them before the last step, and
#: no other writer can append while the statement holds the write lock. Temporary objects
#: live on this connection only (nothing is added to the file's schema); a temporary
#: trigger may name the main database's tables.
_MARK = (
    "COALESCE((SELECT CAST(value AS INTEGER) FROM memory_state "  # noqa: S608 (constants)
    f"WHERE name = '{_HISTORY_WATERMARK}'), 0)"
)
_UPTO = f"MIN(COALESCE((SELECT MAX(id) FROM messages), 0), {_MARK} + NEW.step)"  # noqa: S608
_NEW_ROWS = (
    f"SELECT id, text FROM messages WHERE id > {_MARK} AND id <= {_UPTO} "  # noqa: S608
    "AND role IN ('user', 'assistant') AND kind IN ('message', 'summary') AND text != ''"
)
_CATCH_UP_TRIGGER = (
    "CREATE TEMP VIEW IF NOT EXISTS memory_catch_up (step) AS SELECT NULL",
    "CREATE TEMP TRIGGER IF NOT EXISTS memory_catch_up_run "  # noqa: S608 (constants)
    "INSTEAD OF INSERT ON memory_catch_up BEGIN "
    f"INSERT INTO memory_history_fts (rowid, text) {_NEW_ROWS}; "
    f"INSERT INTO memory_terms_scratch (rowid, content) {_NEW_ROWS}; "
    "INSERT INTO memory_history_terms (term, docs) SELECT term, doc "
    "FROM memory_terms_scratch_v WHERE 1 ON CONFLICT (term) "
    "DO UPDATE SET docs = docs + excluded.docs; "
    "INSERT INTO memory_terms_scratch (memory_terms_scratch) VALUES ('delete-all'); "
    "INSERT INTO memory_state (name, value) SELECT "
    f"'{_HISTORY_WATERMARK}', CAST(upto AS TEXT) FROM (SELECT {_MARK} AS mark, "
    f"{_UPTO} AS upto) WHERE upto > mark "
    "ON CONFLICT (name) DO UPDATE SET value = excluded.value; "
    "END",
)


def _parse_id(fid: object) -> int | None:
    """The row id *fid* names, accepting only its canonical spelling ("12", not "012")."""
    if not isinstance(fid, str) or not fid.isascii() or not fid.isdigit():
        return None
    number = int(fid)
    return number if str(number) == fid and number < 2**63 else None


def _key_json(key: Sequence[str | None] | None) -> str | None:
    if key is None:
        return None
    return json.dumps(list(key), ensure_ascii=False, separators=(",", ":"))


def _stamp(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, UTC)


def _fact(row: tuple) -> MemoryFact:
    fid, category, key, content, speaker, conv, job_id, archived, created, updated = row
    provenance = Provenance(
        speaker=speaker,
        conversation_key=ConversationKey(*json.loads(conv)) if conv else None,
        job_id=job_id,
    )
    return MemoryFact(
        id=str(fid),
        category=MemoryCategory(category),
        key=key,
        content=content,
        provenance=provenance,
        created_at=_stamp(created),
        updated_at=_stamp(updated),
        archived=bool(archived),
    )


def _message(row: tuple) -> HistoryMessage:
    mid, channel, chat_id, thread_id, role, speaker, text, created = row
    return HistoryMessage(
        id=mid,
        conversation_key=ConversationKey(channel, chat_id, thread_id),
        role=role,
        speaker=speaker,
        text=text,
        created_at=_stamp(created),
    )


def _fact_filter(where: MemoryFilter | None) -> tuple[str, list[Any]]:
    if where is None:
        return "", []
    if where.empty:
        return " AND 0", []
    sql, params = "", []
    if where.speakers is not None:
        sql += f" AND f.speaker IN ({', '.join('?' * len(where.speakers)) or 'NULL'})"
        params += sorted(where.speakers)
    if where.conversation_key is not None:
        sql += " AND f.conversation_key = ?"
        params.append(_key_json(where.conversation_key))
    if where.job_id is not None:
        sql += " AND f.job_id = ?"
        params.append(where.job_id)
    return sql, params


def _message_filter(where: MemoryFilter | None) -> tuple[str, list[Any]]:
    if where is None:
        return "", []
    if where.empty or where.job_id is not None:
        return " AND 0", []  # history rows carry no job id
    sql, params = "", []
    if where.speakers is not None:
        sql += f" AND m.speaker IN ({', '.join('?' * len(where.speakers)) or 'NULL'})"
        params += sorted(where.speakers)
    if where.conversation_key is not None:
        channel, chat_id, thread_id = where.conversation_key
        sql += " AND c.channel = ? AND c.chat_id = ? AND c.thread_id IS ?"
        params += [channel, chat_id, thread_id]
    return sql, params


def _fold(token: str) -> str:
    """*token* as ``unicode61 remove_diacritics 2`` stores it (lower case, no accents)."""
    decomposed = unicodedata.normalize("NFD", token.lower())
    return "".join(c for c in decomposed if not unicodedata.combining(c))


def _above(prefix: str) -> str | None:
    """The smallest string greater than every string starting with *prefix*."""
    last = ord(prefix[-1])
    return None if last >= 0x10FFFF else prefix[:-1] + chr(last + 1)


def _category_filter(categories: Iterable[MemoryCategory | str] | None) -> tuple[str, list[Any]]:
    cats = normalize_categories(categories)
    if cats is None:
        return "", []
    if not cats:
        return " AND 0", []
    return f" AND f.category IN ({', '.join('?' * len(cats))})", sorted(c.value for c in cats)


# --------------------------------------------------------------------------- the SQL


class SyncMemory:
    """All SQL of the SQLite backend, on one connection, one caller at a time."""

    def __init__(self, conn: sqlite3.Connection, path: Path) -> None:
        self.conn = conn
        self.path = path
        self._has_history = False
        #: The temporary view and trigger of :meth:`catch_up_batch` exist on this connection.
        self._catch_up_ready = False

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        conn = self.conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise

    def close(self) -> None:
        self.conn.close()

    # ------------------------------------------------------------------ facts

    def _next_seq(self) -> int:
        row = self.conn.execute(
            "INSERT INTO memory_state (name, value) VALUES (?, '1') ON CONFLICT (name) "
            "DO UPDATE SET value = CAST(value AS INTEGER) + 1 RETURNING value",
            (_SEQ,),
        ).fetchone()
        return int(row[0])

    def _row(self, fid: int) -> MemoryFact | None:
        row = self.conn.execute(
            f"SELECT {_FACT_COLUMNS} FROM memory_facts f WHERE f.id = ?",  # noqa: S608
            (fid,),
        ).fetchone()
        return _fact(row) if row else None

    def _active_by_key(self, key: str) -> MemoryFact | None:
        row = self.conn.execute(
            f"SELECT {_FACT_COLUMNS} FROM memory_facts f WHERE f.key = ? AND f.archived = 0",  # noqa: S608
            (key,),
        ).fetchone()
        return _fact(row) if row else None

    def _insert(
        self, cat: MemoryCategory, text: str, key: str | None, prov: Provenance, now: float
    ) -> MemoryFact:
        fid = self.conn.execute(
            "INSERT INTO memory_facts (category, key, content, folded, speaker, "
            "conversation_key, job_id, archived, created_at, updated_at, seq) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, 0, ?, ?, ?)",
            (
                cat.value,
                key,
                text,
                fold_content(text),
                prov.speaker,
                _key_json(prov.conversation_key),
                prov.job_id,
                now,
                now,
                self._next_seq(),
            ),
        ).lastrowid
        return self._row(int(fid))  # type: ignore[return-value]

    def store_in_tx(
        self,
        cat: MemoryCategory,
        text: str,
        key: str | None,
        prov: Provenance,
        replace_id: str | None,
    ) -> StoreResult:
        now = time.time()
        if replace_id is not None:
            return self._replace(replace_id, cat, text, key, prov, now)
        if key is not None:
            existing = self._active_by_key(key)
            if existing is not None:
                if existing.category == cat and existing.content == text:
                    return StoreResult(action="unchanged", fact=existing)
                self.conn.execute(
                    "UPDATE memory_facts SET category = ?, content = ?, folded = ?, speaker = ?, "
                    "conversation_key = ?, job_id = ?, updated_at = ?, seq = ? WHERE id = ?",
                    (
                        cat.value,
                        text,
                        fold_content(text),
                        prov.speaker,
                        _key_json(prov.conversation_key),
                        prov.job_id,
                        max(now, existing.updated_at.timestamp()),
                        self._next_seq(),
                        int(existing.id),
                    ),
                )
                updated = self._row(int(existing.id))
                assert updated is not None
                return StoreResult(action="updated", fact=updated, previous=existing)
        else:
            mine_sql, mine_params = _fact_filter(memory_of(prov))
            row = self.conn.execute(
                f"SELECT {_FACT_COLUMNS} FROM memory_facts f WHERE f.category = ? "  # noqa: S608
                f"AND f.folded = ? AND f.archived = 0{mine_sql} LIMIT 1",
                (cat.value, fold_content(text), *mine_params),
            ).fetchone()
            if row is not None:
                return StoreResult(action="unchanged", fact=_fact(row))
        return StoreResult(action="added", fact=self._insert(cat, text, key, prov, now))

    def _replace(
        self,
        replace_id: str,
        cat: MemoryCategory,
        text: str,
        key: str | None,
        prov: Provenance,
        now: float,
    ) -> StoreResult:
        old, new_key = replacement_key(self.get(replace_id), replace_id, key, self._active_by_key)
        if old.category == cat and old.content == text and old.key == new_key:
            return StoreResult(action="unchanged", fact=old)
        self.conn.execute(
            "UPDATE memory_facts SET archived = 1, updated_at = ?, seq = ? WHERE id = ?",
            (now, self._next_seq(), int(old.id)),
        )
        fact = self._insert(cat, text, new_key, prov, now)
        return StoreResult(action="replaced", fact=fact, previous=old)

    def store(
        self,
        cat: MemoryCategory,
        text: str,
        key: str | None,
        prov: Provenance,
        replace_id: str | None,
    ) -> StoreResult:
        with self._write():
            return self.store_in_tx(cat, text, key, prov, replace_id)

    def forget_in_tx(self, fid: str) -> bool:
        number = _parse_id(fid)
        if number is None:
            return False
        changed = self.conn.execute(
            "UPDATE memory_facts SET archived = 1, updated_at = ?, seq = ? "
            "WHERE id = ? AND archived = 0",
            (time.time(), self._next_seq(), number),
        ).rowcount
        return bool(changed)

    def forget(self, fid: str) -> bool:
        with self._write():
            return self.forget_in_tx(fid)

    def restore(self, fid: str) -> bool:
        with self._write():
            fact = self.get(fid)
            if fact is None or not fact.archived:
                return False
            if fact.key is not None:
                holder = self._active_by_key(fact.key)
                if holder is not None:
                    raise MemoryStoreError(
                        f"cannot restore {fid!r}: its key {fact.key!r} is now held by memory "
                        f"{holder.id!r}; forget that one first"
                    )
            self.conn.execute(
                "UPDATE memory_facts SET archived = 0, updated_at = ?, seq = ? WHERE id = ?",
                (time.time(), self._next_seq(), int(fact.id)),
            )
            return True

    def apply_batch(
        self, ops: Sequence[AddOp | ReplaceOp | ArchiveOp], prov: Provenance
    ) -> list[StoreResult | bool]:
        results: list[StoreResult | bool] = []
        with self._write():
            for op in ops:
                if isinstance(op, ArchiveOp):
                    if not self.forget_in_tx(op.id):
                        raise MemoryStoreError(f"no active memory {op.id!r} to archive")
                    results.append(True)
                    continue
                text = normalize_content(op.content)
                key = normalize_key(op.key)
                replace_id = op.id if isinstance(op, ReplaceOp) else None
                results.append(self.store_in_tx(op.category, text, key, prov, replace_id))
        return results

    def get(self, fid: str) -> MemoryFact | None:
        number = _parse_id(fid)
        return None if number is None else self._row(number)

    def get_by_key(self, key: str) -> MemoryFact | None:
        return self._active_by_key(key)

    def _docs(self, table: str, token: str, prefix: bool) -> int:
        """Rows of *table*'s index holding *token* (as a prefix: summed over its words)."""
        if not prefix:
            sql = f"SELECT COALESCE(SUM(docs), 0) FROM {table} WHERE term = ?"  # noqa: S608
            return int(self.conn.execute(sql, (token,)).fetchone()[0])
        upper = _above(token)
        sql = f"SELECT COALESCE(SUM(docs), 0) FROM {table} WHERE term >= ?"  # noqa: S608
        args: tuple[str, ...] = (token,)
        if upper is not None:
            sql, args = f"{sql} AND term < ?", (token, upper)
        return int(self.conn.execute(sql, args).fetchone()[0])

    def _weigh(self, table: str, term: str) -> tuple[int, str]:
        """How many rows *term* matches, and the term to search (see :data:`TERM_BUDGET`)."""
        tokens = [_fold(t) for t in _TOKEN.findall(term)]
        if not tokens:
            return 0, term
        head = min((self._docs(table, t, False) for t in tokens[:-1]), default=None)
        last = self._docs(table, tokens[-1], term.endswith("*"))
        if term.endswith("*") and last > TERM_BUDGET:
            # Common enough on its own: its prefix family only adds cost, so match the
            # word itself if it occurs as one (a partial word still needs the prefix).
            exact = self._docs(table, tokens[-1], False)
            if exact:
                term, last = term[:-1], exact
        return (last if head is None else min(head, last)), term

    def _leading(self, table: str, terms: Sequence[str]) -> str:
        """The MATCH expression of *terms*' rarest words, within :data:`TERM_BUDGET` rows."""
        weighed = sorted(
            ((*self._weigh(table, t), i) for i, t in enumerate(terms)), key=lambda w: (w[0], w[2])
        )
        total, kept = weighed[0][0], [weighed[0][1:]]
        for rows, term, i in weighed[1:]:
            if total + rows > TERM_BUDGET:
                break  # ascending: no later word fits either
            total += rows
            kept.append((term, i))
        return " OR ".join(term for term, _ in sorted(kept, key=lambda k: k[1]))

    def search(
        self,
        terms: Sequence[str],
        limit: int,
        categories: Iterable[MemoryCategory | str] | None,
        include_archived: bool,
        where: MemoryFilter | None,
    ) -> list[MemoryFact]:
        cat_sql, cat_params = _category_filter(categories)
        where_sql, where_params = _fact_filter(where)
        archived = "" if include_archived else " AND f.archived = 0"
        expression = self._leading("memory_fact_terms", terms)
        # Inner: the newest RANK_WINDOW visible matches, walked in rowid order (cheap, and
        # bm25 is only computed for rows that pass the filters). Outer: rank those.
        rows = self.conn.execute(
            f"SELECT {_PLAIN_FACT_COLUMNS} FROM (SELECT {_FACT_COLUMNS}, f.seq AS seq, "  # noqa: S608
            "bm25(memory_facts_fts, 2.0, 1.0) AS score FROM memory_facts_fts "
            "JOIN memory_facts f ON f.id = memory_facts_fts.rowid "
            f"WHERE memory_facts_fts MATCH ?{archived}{cat_sql}{where_sql} "
            "ORDER BY memory_facts_fts.rowid DESC LIMIT ?) "
            "ORDER BY score, updated_at DESC, seq DESC LIMIT ?",
            (expression, *cat_params, *where_params, RANK_WINDOW, limit),
        ).fetchall()
        return [_fact(row) for row in rows]

    def list(
        self,
        categories: Iterable[MemoryCategory | str] | None,
        include_archived: bool,
        limit: int | None,
        where: MemoryFilter | None,
    ) -> list[MemoryFact]:
        cat_sql, cat_params = _category_filter(categories)
        where_sql, where_params = _fact_filter(where)
        archived = "" if include_archived else " AND f.archived = 0"
        rows = self.conn.execute(
            f"SELECT {_FACT_COLUMNS} FROM memory_facts f WHERE 1{archived}{cat_sql}{where_sql} "  # noqa: S608
            "ORDER BY f.updated_at DESC, f.seq DESC LIMIT ?",
            (*cat_params, *where_params, -1 if limit is None else max(limit, 0)),
        ).fetchall()
        return [_fact(row) for row in rows]

    def fact_counts(self, where: MemoryFilter | None) -> list[tuple[str, int, int]]:
        where_sql, params = _fact_filter(where)
        return self.conn.execute(
            f"SELECT f.category, f.archived, COUNT(*) FROM memory_facts f WHERE 1{where_sql} "  # noqa: S608
            "GROUP BY f.category, f.archived",
            params,
        ).fetchall()

    # ------------------------------------------------------------------ history

    def _history_tables(self) -> bool:
        if self._has_history:  # once created, the store's tables stay
            return True
        rows = self.conn.execute(
            "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' "
            "AND name IN ('messages', 'conversations')"
        ).fetchone()
        self._has_history = int(rows[0]) == 2
        return self._has_history

    def _watermark(self) -> int:
        row = self.conn.execute(
            "SELECT value FROM memory_state WHERE name = ?", (_HISTORY_WATERMARK,)
        ).fetchone()
        return int(row[0]) if row else 0

    def backlog(self) -> int:
        """How many message ids past the history index's watermark (0: up to date)."""
        if not self._history_tables():
            return 0
        top = self.conn.execute("SELECT MAX(id) FROM messages").fetchone()[0]
        return 0 if top is None else max(int(top) - self._watermark(), 0)

    def catch_up_batch(self, limit: int | None = None) -> int:
        """Index up to *limit* (default :data:`HISTORY_BATCH`) messages past the watermark in
        one transaction.

        Returns how many ids it covered; 0 when the index is up to date. The messages' word
        counts (``memory_history_terms``) and the watermark move in the same transaction.

        The transaction is **one statement** (an insert into a temporary view whose trigger
        does every step, see :data:`_CATCH_UP_TRIGGER`), so the write lock on ``memory.db``
        is taken and released inside a single ``sqlite3_step``, while this thread has let go
        of the GIL. As five statements between ``BEGIN IMMEDIATE`` and ``COMMIT`` the thread
        needed the GIL back between every two of them, and under load the event loop's
        thread holds it for up to the interpreter's switch interval (5 ms) at a time: the
        lock stayed held 14-30 ms for 1-3 ms of work, and the conversation store's writes
        (the turns) waited behind it.
        """
        if not self._history_tables():
            return 0
        conn = self.conn
        mark, top = conn.execute(_CATCH_UP_STATE, (_HISTORY_WATERMARK,)).fetchone()
        if mark >= top:
            return 0  # up to date: no write transaction at all
        if not self._catch_up_ready:
            for statement in _CATCH_UP_TRIGGER:
                conn.execute(statement)
            self._catch_up_ready = True
        conn.execute(
            "INSERT INTO temp.memory_catch_up (step) VALUES (?)", (limit or HISTORY_BATCH,)
        )
        # Another process may have caught up (or further) meanwhile: report what moved.
        return max(self._watermark() - mark, 0)

    def catch_up_history(self) -> int:
        """Index every message appended since the last catch-up; returns how many ids."""
        seen = 0
        while step := self.catch_up_batch():
            seen += step
        return seen

    def _catch_up_small(self) -> None:
        """Index a backlog of at most :data:`HISTORY_INLINE` messages; leave a larger one."""
        if 0 < self.backlog() <= HISTORY_INLINE:
            self.catch_up_history()

    def search_history(
        self, terms: Sequence[str], limit: int, where: MemoryFilter | None
    ) -> list[HistoryMessage]:
        if not self._history_tables():
            return []
        self._catch_up_small()
        where_sql, params = _message_filter(where)
        expression = self._leading("memory_history_terms", terms)
        rows = self.conn.execute(
            f"SELECT {_PLAIN_MESSAGE_COLUMNS} FROM (SELECT {_MESSAGE_COLUMNS}, "  # noqa: S608
            "bm25(memory_history_fts) AS score FROM memory_history_fts "
            "JOIN messages m ON m.id = memory_history_fts.rowid "
            "JOIN conversations c ON c.id = m.conversation_id "
            f"WHERE memory_history_fts MATCH ?{where_sql} "
            "ORDER BY memory_history_fts.rowid DESC LIMIT ?) "
            "ORDER BY score, id DESC LIMIT ?",
            (expression, *params, RANK_WINDOW, limit),
        ).fetchall()
        return [_message(row) for row in rows]

    def search_both(
        self,
        terms: Sequence[str],
        limit: int,
        facts_where: MemoryFilter | None,
        history_where: MemoryFilter | None,
    ) -> tuple[list[MemoryFact], list[HistoryMessage]]:
        facts = self.search(terms, limit, None, False, facts_where)
        return facts, self.search_history(terms, limit, history_where)

    def recent_messages(
        self, after_id: int, speakers: Sequence[str], limit: int
    ) -> list[HistoryMessage]:
        if not self._history_tables() or not speakers or limit < 1:
            return []
        rows = self.conn.execute(
            f"SELECT {_MESSAGE_COLUMNS} FROM messages m "  # noqa: S608
            "JOIN conversations c ON c.id = m.conversation_id "
            f"WHERE m.id > ? AND m.speaker IN ({', '.join('?' * len(speakers))}) "
            "AND m.kind = 'message' AND m.role IN ('user', 'assistant') AND m.text != '' "
            "ORDER BY m.id DESC LIMIT ?",
            (after_id, *speakers, limit),
        ).fetchall()
        return [_message(row) for row in reversed(rows)]

    def history_counts(self, where: MemoryFilter | None) -> dict[str, Any]:
        if not self._history_tables():
            return {"available": False, "reason": "no conversation history in memory.db yet"}
        self._catch_up_small()
        where_sql, params = _message_filter(where)
        messages, conversations = self.conn.execute(
            "SELECT COUNT(*), COUNT(DISTINCT m.conversation_id) FROM messages m "  # noqa: S608
            "JOIN conversations c ON c.id = m.conversation_id "
            f"WHERE m.role IN ('user', 'assistant') AND m.text != ''{where_sql}",
            params,
        ).fetchone()
        return {
            "available": True,
            "messages": int(messages),
            "conversations": int(conversations),
            "indexed_through_id": self._watermark(),
            # Left to the catch-up after the next reply (or `fermix memory search`).
            "ids_not_indexed_yet": self.backlog(),
        }
