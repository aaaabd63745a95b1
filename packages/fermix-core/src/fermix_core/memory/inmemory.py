"""A dict-backed :class:`MemoryBackend`: the reference semantics, and a fake for tests.

It exists so the contract has an executable definition that needs no database, and so that
tests of memory *callers* (tools, review, prompt building) can run without SQLite. Search is
deliberately plain — distinct query words found in the fact, best first — because its job
is to be predictable, not clever.

History normally lives in the conversation store; here :meth:`InMemoryBackend.add_message`
records it directly, so review and history recall can be exercised without a database.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime

from fermix_core.channel import ConversationKey
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
    memory_of,
    normalize_categories,
    replacement_key,
    same_content,
    tokenize,
)

__all__ = ["InMemoryBackend"]


class InMemoryBackend(MemoryBackend):
    """Facts in a dict, lost when the object goes away."""

    name = "inmemory"
    history_available = True

    def __init__(self) -> None:
        self._facts: dict[str, MemoryFact] = {}
        self._messages: list[HistoryMessage] = []
        #: Write order, so facts written within one clock tick still sort deterministically.
        self._seq: dict[str, int] = {}
        self._ids = itertools.count(1)
        self._ticks = itertools.count()
        self.closed = False

    @classmethod
    def from_home(cls, home: object = None, config: object = None) -> InMemoryBackend:
        """The ``inmemory`` spec's factory; it keeps nothing on disk, so it ignores both."""
        return cls()

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
        cat, text, handle = checked_write(category, content, key, provenance)
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
            mine = memory_of(provenance)
            for fact in self._facts.values():
                if (
                    not fact.archived
                    and fact.category == cat
                    and same_content(fact.content, text)
                    and mine.matches_fact(fact)
                ):
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
        old, new_key = replacement_key(
            self._facts.get(replace_id), replace_id, handle, self._active_by_key
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
        where: MemoryFilter | None = None,
    ) -> list[MemoryFact]:
        wanted = set(tokenize(query or ""))
        if not wanted or limit < 1:
            return []
        scored = []
        for fact in self._candidates(categories, include_archived, where):
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
        where: MemoryFilter | None = None,
    ) -> list[MemoryFact]:
        facts = sorted(
            self._candidates(categories, include_archived, where),
            key=lambda f: (f.updated_at, self._seq[f.id]),
            reverse=True,
        )
        return facts if limit is None else facts[: max(limit, 0)]

    async def aclose(self) -> None:
        self.closed = True

    # ------------------------------------------------------------------ batches

    async def apply_batch(
        self, ops: Sequence[AddOp | ReplaceOp | ArchiveOp], *, provenance: Provenance
    ) -> list[StoreResult | bool]:
        """All of *ops* or none: on an error the facts are put back as they were.

        Nothing in here awaits anything that suspends, so no other task can observe the
        batch half-applied either.
        """
        facts, seq = dict(self._facts), dict(self._seq)
        try:
            return [await self._apply_one(op, provenance) for op in ops]
        except BaseException:
            self._facts, self._seq = facts, seq
            raise

    # ------------------------------------------------------------------ history

    def add_message(
        self,
        conversation_key: ConversationKey | tuple[str, str, str | None],
        role: str,
        speaker: Speaker,
        text: str,
        *,
        created_at: datetime | None = None,
    ) -> HistoryMessage:
        """Record one history message, as the conversation store would have."""
        message = HistoryMessage(
            id=len(self._messages) + 1,
            conversation_key=ConversationKey(*conversation_key),
            role=role,  # type: ignore[arg-type]
            speaker=speaker,
            text=text,
            created_at=created_at or datetime.now(UTC),
        )
        self._messages.append(message)
        return message

    async def search_history(
        self, query: str, *, limit: int = 10, where: MemoryFilter | None = None
    ) -> list[HistoryMessage]:
        wanted = set(tokenize(query or ""))
        if not wanted or limit < 1:
            return []
        scored = []
        for message in self._messages:
            if where is not None and not where.matches(
                message.speaker, message.conversation_key, None
            ):
                continue
            score = len(wanted & set(tokenize(message.text)))
            if score:
                scored.append((score, message.id, message))
        scored.sort(key=lambda row: row[:2], reverse=True)
        return [row[2] for row in scored[:limit]]

    async def recent_messages(
        self,
        *,
        after_id: int = 0,
        speakers: Iterable[Speaker] = ("owner",),
        limit: int = 200,
    ) -> list[HistoryMessage]:
        allowed = set(speakers)
        rows = [m for m in self._messages if m.id > after_id and m.speaker in allowed]
        return rows[-limit:] if limit > 0 else []

    async def describe(self, *, where: MemoryFilter | None = None) -> dict[str, object]:
        report = await super().describe(where=where)
        visible = [
            m
            for m in self._messages
            if where is None or where.matches(m.speaker, m.conversation_key, None)
        ]
        report["history"] = {
            "available": True,
            "messages": len(visible),
            "conversations": len({m.conversation_key for m in visible}),
        }
        return report

    # ------------------------------------------------------------------ internals

    def _candidates(
        self,
        categories: Iterable[MemoryCategory | str] | None,
        include_archived: bool,
        where: MemoryFilter | None = None,
    ) -> list[MemoryFact]:
        cats = normalize_categories(categories)
        return [
            f
            for f in self._facts.values()
            if (include_archived or not f.archived)
            and (cats is None or f.category in cats)
            and (where is None or where.matches_fact(f))
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
