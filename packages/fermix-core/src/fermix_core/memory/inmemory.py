"""A dict-backed :class:`MemoryBackend`: the reference semantics, and a fake for tests.

It exists so the contract has an executable definition that needs no database, and so that
tests of memory *callers* (tools, review, prompt building) can run without SQLite. Search is
deliberately plain — distinct query words found in the fact, best first — because its job
is to be predictable, not clever.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from datetime import UTC, datetime

from fermix_core.memory.backend import (
    MemoryBackend,
    MemoryCategory,
    MemoryFact,
    MemoryStoreError,
    Provenance,
    StoreResult,
    normalize_categories,
    normalize_category,
    normalize_content,
    normalize_key,
    same_content,
    tokenize,
)

__all__ = ["InMemoryBackend"]


class InMemoryBackend(MemoryBackend):
    """Facts in a dict, lost when the object goes away."""

    def __init__(self) -> None:
        self._facts: dict[str, MemoryFact] = {}
        #: Write order, so facts written within one clock tick still sort deterministically.
        self._seq: dict[str, int] = {}
        self._ids = itertools.count(1)
        self._ticks = itertools.count()
        self.closed = False

    # ------------------------------------------------------------------ writes

    async def store(
        self,
        category: MemoryCategory | str,
        content: str,
        *,
        key: str | None = None,
        provenance: Provenance,
        replace_id: str | None = None,
    ) -> StoreResult:
        cat = normalize_category(category)
        text = normalize_content(content)
        handle = normalize_key(key)
        if not isinstance(provenance, Provenance):
            raise MemoryStoreError("provenance must be a Provenance saying who caused the write")
        now = datetime.now(UTC)

        if replace_id is not None:
            return self._replace(replace_id, cat, text, handle, provenance, now)

        if handle is not None:
            existing = self._active_by_key(handle)
            if existing is not None:
                if existing.category == cat and existing.content == text:
                    return StoreResult(action="unchanged", fact=existing)
                updated = existing.model_copy(
                    update={
                        "category": cat,
                        "content": text,
                        "provenance": provenance,
                        "updated_at": now,
                    }
                )
                self._put(updated)
                return StoreResult(action="updated", fact=updated, previous=existing)
        else:
            for fact in self._facts.values():
                if not fact.archived and fact.category == cat and same_content(fact.content, text):
                    return StoreResult(action="unchanged", fact=fact)

        fact = self._new(cat, text, handle, provenance, now)
        return StoreResult(action="added", fact=fact)

    def _replace(
        self,
        replace_id: str,
        cat: MemoryCategory,
        text: str,
        handle: str | None,
        provenance: Provenance,
        now: datetime,
    ) -> StoreResult:
        old = self._facts.get(replace_id)
        if old is None:
            raise MemoryStoreError(
                f"no memory with id {replace_id!r} to replace; search or list to find it"
            )
        if old.archived:
            raise MemoryStoreError(
                f"memory {replace_id!r} is archived; restore it before replacing it"
            )
        new_key = handle if handle is not None else old.key
        if new_key is not None:
            holder = self._active_by_key(new_key)
            if holder is not None and holder.id != old.id:
                raise MemoryStoreError(
                    f"key {new_key!r} is held by memory {holder.id!r}; replace that one instead"
                )
        if old.category == cat and old.content == text and old.key == new_key:
            return StoreResult(action="unchanged", fact=old)
        self._put(old.model_copy(update={"archived": True, "updated_at": now}))
        fact = self._new(cat, text, new_key, provenance, now)
        return StoreResult(action="replaced", fact=fact, previous=old)

    async def forget(self, id: str) -> bool:
        fact = self._facts.get(id)
        if fact is None or fact.archived:
            return False
        self._put(fact.model_copy(update={"archived": True, "updated_at": datetime.now(UTC)}))
        return True

    async def restore(self, id: str) -> bool:
        fact = self._facts.get(id)
        if fact is None or not fact.archived:
            return False
        if fact.key is not None:
            holder = self._active_by_key(fact.key)
            if holder is not None:
                raise MemoryStoreError(
                    f"cannot restore {id!r}: its key {fact.key!r} is now held by memory "
                    f"{holder.id!r}; forget that one first"
                )
        self._put(fact.model_copy(update={"archived": False, "updated_at": datetime.now(UTC)}))
        return True

    # ------------------------------------------------------------------ reads

    async def get(self, id: str) -> MemoryFact | None:
        return self._facts.get(id)

    async def get_by_key(self, key: str) -> MemoryFact | None:
        if not isinstance(key, str) or not key.strip():
            return None
        return self._active_by_key(key.strip())

    async def search(
        self,
        query: str,
        *,
        limit: int = 10,
        categories: Iterable[MemoryCategory | str] | None = None,
        include_archived: bool = False,
    ) -> list[MemoryFact]:
        wanted = set(tokenize(query or ""))
        if not wanted or limit < 1:
            return []
        scored = []
        for fact in self._candidates(categories, include_archived):
            words = set(tokenize(fact.content))
            if fact.key:
                words.update(tokenize(fact.key))
            score = len(wanted & words)
            if score:
                scored.append((score, fact.updated_at, self._seq[fact.id], fact))
        scored.sort(key=lambda row: row[:3], reverse=True)
        return [row[3] for row in scored[:limit]]

    async def list(
        self,
        *,
        categories: Iterable[MemoryCategory | str] | None = None,
        include_archived: bool = False,
        limit: int | None = None,
    ) -> list[MemoryFact]:
        facts = sorted(
            self._candidates(categories, include_archived),
            key=lambda f: (f.updated_at, self._seq[f.id]),
            reverse=True,
        )
        return facts if limit is None else facts[: max(limit, 0)]

    async def aclose(self) -> None:
        self.closed = True

    # ------------------------------------------------------------------ internals

    def _candidates(
        self, categories: Iterable[MemoryCategory | str] | None, include_archived: bool
    ) -> list[MemoryFact]:
        cats = normalize_categories(categories)
        return [
            f
            for f in self._facts.values()
            if (include_archived or not f.archived) and (cats is None or f.category in cats)
        ]

    def _active_by_key(self, key: str) -> MemoryFact | None:
        return next((f for f in self._facts.values() if f.key == key and not f.archived), None)

    def _new(
        self,
        cat: MemoryCategory,
        text: str,
        key: str | None,
        provenance: Provenance,
        now: datetime,
    ) -> MemoryFact:
        fact = MemoryFact(
            id=str(next(self._ids)),
            category=cat,
            key=key,
            content=text,
            provenance=provenance,
            created_at=now,
            updated_at=now,
        )
        self._put(fact)
        return fact

    def _put(self, fact: MemoryFact) -> None:
        self._facts[fact.id] = fact
        self._seq[fact.id] = next(self._ticks)
