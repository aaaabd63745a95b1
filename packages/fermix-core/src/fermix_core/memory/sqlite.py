"""The default memory backend: facts in ``memory.db`` with FTS5 full-text search.

Layout (all tables prefixed ``memory_``; the schema version is the ``"memory"`` row of the
shared ``schema_version`` table, so history and memory migrate independently):

* ``memory_facts`` — one row per fact, archived rows included (forgetting archives).
* ``memory_facts_fts`` — an **external-content** FTS5 index over ``content`` and ``key``,
  kept in step by triggers on ``memory_facts``. External content stores no second copy of
  the text, and triggers make the index part of every write's transaction, so a crash can
  never leave a fact unsearchable. Archived facts stay indexed (``include_archived``
  searches need them); visibility is filtered in the join.
* ``memory_history_fts`` — an external-content FTS5 index over the conversation store's
  ``messages.text``. This module never writes the store's tables, so there are no triggers
  on them; instead the index catches up from a watermark (``memory_state``): the runtime
  calls :meth:`SqliteMemoryBackend.catch_up_history` after replies (once per burst, see
  :mod:`fermix_core.memory.history_index`), and a search
  indexes only a small backlog itself. That is sound because the store only ever appends
  messages: row ids grow, and a row, once committed, never changes or disappears.
* ``memory_fact_terms`` / ``memory_history_terms`` (schema version 2) — per word, how many
  indexed rows hold it, kept in the same transactions as the indexes (the fact triggers,
  each catch-up batch) through ``memory_terms_scratch``, a contentless index with the same
  tokenizer that turns a row's text into the index's own words.

Ranking: the query's rarest words lead (by those counts, the rarest always, the next ones
while they match at most ``TERM_BUDGET`` rows together; a word over it alone is matched
exactly, not as a prefix), then bm25 (content weighs twice a key), ties broken by recency,
over the newest ``RANK_WINDOW`` (200) visible matches. A common word would otherwise make
every recall walk a large share of memory for ten results: bm25 weighs each word by
walking every row that holds it. Query text never reaches FTS5 syntax: it is cut into
words, each quoted, words of three or more letters matched as prefixes ("deploy" finds
"deployment"), common English stop words dropped, and the words OR-ed — so ``"``,
``NOT`` or ``(`` are just text.

One connection per backend, used by one worker thread at a time (a ``CapacityLimiter(1)``),
WAL journaling, and ``BEGIN IMMEDIATE`` for every write (a history catch-up step is one
statement, which takes the write lock as it starts and commits as it ends), so the daemon,
the CLI and the conversation store can share the file.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import anyio
import anyio.to_thread

from fermix_core.memory.backend import (
    AddOp,
    ArchiveOp,
    HistoryMessage,
    MemoryBackend,
    MemoryCategory,
    MemoryFact,
    MemoryFilter,
    MemoryStoreError,
    Provenance,
    ReplaceOp,
    Speaker,
    StoreResult,
    checked_write,
    normalize_categories,
)
from fermix_core.memory.sqlite_engine import SyncMemory
from fermix_core.memory.sqlite_schema import (
    COMPONENT,
    SCHEMA_VERSION,
    MemoryDatabaseError,
    MemorySchemaError,
    connect,
    match_expression,
    match_terms,
)

__all__ = [
    "COMPONENT",
    "SCHEMA_VERSION",
    "MemoryDatabaseError",
    "MemorySchemaError",
    "SqliteMemoryBackend",
    "match_expression",
    "open_sqlite_backend",
]

T = TypeVar("T")


# --------------------------------------------------------------------------- async facade


class SqliteMemoryBackend(MemoryBackend):
    """Long-term memory in ``memory.db``. Build it with ``await SqliteMemoryBackend.open(path)``."""

    name = "sqlite"
    history_available = True

    def __init__(self, sync: SyncMemory) -> None:
        self._sync: SyncMemory | None = sync
        self._limiter = anyio.CapacityLimiter(1)
        self.path = sync.path
        #: History catch-up transactions run and message ids they covered (benchmarks
        #: report what indexing ran alongside the turns they measure).
        self.history_transactions = 0
        self.history_indexed = 0

    @classmethod
    async def open(cls, path: Path | str) -> SqliteMemoryBackend:
        """Open (creating the memory tables as needed) the database at *path*.

        Raises :class:`MemorySchemaError` for a newer memory schema and
        :class:`MemoryDatabaseError` for a file that cannot be used.
        """
        target = Path(path)
        conn = await anyio.to_thread.run_sync(connect, target)
        return cls(SyncMemory(conn, target))

    async def aclose(self) -> None:
        sync, self._sync = self._sync, None
        if sync is not None:
            await anyio.to_thread.run_sync(sync.close, limiter=self._limiter)

    async def _call(self, method: Callable[..., T], /, *args: Any) -> T:
        if self._sync is None:
            raise MemoryDatabaseError(f"the memory backend for {self.path} is closed")
        sync = self._sync

        def call() -> T:
            if self._sync is None:
                raise MemoryDatabaseError(
                    f"the memory backend for {self.path} was closed while this call waited"
                )
            return method(sync, *args)

        try:
            return await anyio.to_thread.run_sync(call, limiter=self._limiter)
        except sqlite3.IntegrityError as exc:
            raise MemoryStoreError(
                f"memory write refused by the database ({exc}); another process may have "
                "changed the same fact — retry"
            ) from exc
        except sqlite3.Error as exc:
            raise MemoryDatabaseError(
                f"memory at {self.path} failed ({type(exc).__name__}: {exc}); check free disk "
                "space and that the file is writable, then retry"
            ) from exc

    # ------------------------------------------------------------------ contract

    async def store(
        self,
        category: MemoryCategory | str,
        content: str,
        *,
        key: str | None = None,
        provenance: Provenance,
        replace_id: str | None = None,
    ) -> StoreResult:
        cat, text, handle = checked_write(category, content, key, provenance)
        return await self._call(SyncMemory.store, cat, text, handle, provenance, replace_id)

    async def get(self, id: str) -> MemoryFact | None:
        return await self._call(SyncMemory.get, id)

    async def get_by_key(self, key: str) -> MemoryFact | None:
        if not isinstance(key, str) or not key.strip():
            return None
        return await self._call(SyncMemory.get_by_key, key.strip())

    async def search(
        self,
        query: str,
        *,
        limit: int = 10,
        categories: Iterable[MemoryCategory | str] | None = None,
        include_archived: bool = False,
        where: MemoryFilter | None = None,
    ) -> list[MemoryFact]:
        terms = match_terms(query)
        if not terms or limit < 1:
            return []
        cats = normalize_categories(categories)
        return await self._call(SyncMemory.search, terms, limit, cats, include_archived, where)

    async def forget(self, id: str) -> bool:
        return await self._call(SyncMemory.forget, id)

    async def restore(self, id: str) -> bool:
        return await self._call(SyncMemory.restore, id)

    async def list(
        self,
        *,
        categories: Iterable[MemoryCategory | str] | None = None,
        include_archived: bool = False,
        limit: int | None = None,
        where: MemoryFilter | None = None,
    ) -> list[MemoryFact]:
        cats = normalize_categories(categories)
        return await self._call(SyncMemory.list, cats, include_archived, limit, where)

    async def apply_batch(
        self, ops: Sequence[AddOp | ReplaceOp | ArchiveOp], *, provenance: Provenance
    ) -> list[StoreResult | bool]:
        """All of *ops* in one transaction: a failure leaves memory exactly as it was."""
        return await self._call(SyncMemory.apply_batch, list(ops), provenance)

    # ------------------------------------------------------------------ history

    async def search_history(
        self, query: str, *, limit: int = 10, where: MemoryFilter | None = None
    ) -> list[HistoryMessage]:
        terms = match_terms(query)
        if not terms or limit < 1:
            return []
        return await self._call(SyncMemory.search_history, terms, limit, where)

    async def search_both(
        self,
        query: str,
        *,
        limit: int = 10,
        facts_where: MemoryFilter | None = None,
        history_where: MemoryFilter | None = None,
    ) -> tuple[list[MemoryFact], list[HistoryMessage]]:
        terms = match_terms(query)
        if not terms or limit < 1:
            return [], []
        return await self._call(SyncMemory.search_both, terms, limit, facts_where, history_where)

    async def recent_messages(
        self,
        *,
        after_id: int = 0,
        speakers: Iterable[Speaker] = ("owner",),
        limit: int = 200,
    ) -> list[HistoryMessage]:
        return await self._call(SyncMemory.recent_messages, after_id, sorted(set(speakers)), limit)

    async def catch_up_history(self, *, step: int | None = None) -> int:
        """Bring the history index up to date now; returns how many message ids it covered.

        One batch per worker call, so a search waiting behind a long backlog runs between
        batches. A search indexes a small backlog itself; the runtime calls this after
        replies, once per burst (:mod:`fermix_core.memory.history_index`), off the turn path.
        With *step*, each transaction indexes at most *step* messages and the next waits as
        long as the last held the write lock, so the conversation store's writes (the
        turns) find the file free at least half of the time; and a step that found fewer
        than *step* messages reached the newest one, which ends the catch-up: messages
        appended since are left to the next one (the runtime's next burst), so a flood of
        turns is indexed in full steps once per burst, not chased by a transaction for
        every few new messages. Without *step* it runs until nothing is left.
        """
        seen = 0
        while True:
            started = time.perf_counter()
            covered = await self._call(SyncMemory.catch_up_batch, step)
            if not covered:
                return seen
            seen += covered
            self.history_transactions += 1
            self.history_indexed += covered
            if step is not None:
                if covered < step:
                    return seen
                await self._pause(time.perf_counter() - started)

    async def _pause(self, seconds: float) -> None:
        """Between two stepped catch-up transactions: the write lock is free meanwhile."""
        await anyio.sleep(seconds)

    async def describe(self, *, where: MemoryFilter | None = None) -> dict[str, object]:
        counts = await self._call(SyncMemory.fact_counts, where)
        per_category = {c.value: 0 for c in MemoryCategory}
        active = archived = 0
        for category, is_archived, count in counts:
            if is_archived:
                archived += count
            else:
                active += count
                per_category[category] = per_category.get(category, 0) + count
        return {
            "backend": self.name,
            "path": str(self.path),
            "active": active,
            "archived": archived,
            "by_category": per_category,
            "history": await self._call(SyncMemory.history_counts, where),
        }


async def open_sqlite_backend(home: Any, config: Any = None) -> SqliteMemoryBackend:
    """The ``sqlite`` spec's factory: the backend on ``FERMIX_HOME/memory.db``."""
    path = getattr(home, "memory_db", None) or Path(getattr(home, "path", home)) / "memory.db"
    return await SqliteMemoryBackend.open(path)
