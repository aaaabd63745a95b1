"""The long-term memory contract every memory backend implements.

A fact is small, categorized and attributed. The six categories split on who a fact is
about — the user (identity, preference, interest, goal) or the work (context, directive) —
which is what lets background review rebuild USER.md and MEMORY.md separately. Provenance
records who caused a write, because what a guest or a scheduled job said must never read
back as something the owner said.

Forgetting archives instead of deleting: ``fermix memory restore ID`` has to be able to
undo a bad forget or an over-eager consolidation.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from enum import StrEnum
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from fermix_core.channel import ConversationKey

__all__ = [
    "OWNER_SPEAKERS",
    "USER_CATEGORIES",
    "WORK_CATEGORIES",
    "AddOp",
    "ArchiveOp",
    "HistoryMessage",
    "MemoryBackend",
    "MemoryCategory",
    "MemoryFact",
    "MemoryFilter",
    "MemoryOp",
    "MemoryStoreError",
    "Provenance",
    "ReplaceOp",
    "Speaker",
    "StoreAction",
    "StoreResult",
    "fold_content",
    "memory_of",
    "normalize_category",
    "normalize_content",
    "normalize_key",
    "tokenize",
]


class MemoryCategory(StrEnum):
    IDENTITY = "identity"
    PREFERENCE = "preference"
    INTEREST = "interest"
    GOAL = "goal"
    CONTEXT = "context"
    DIRECTIVE = "directive"


#: Facts about the user; they feed USER.md.
USER_CATEGORIES = frozenset(
    {
        MemoryCategory.IDENTITY,
        MemoryCategory.PREFERENCE,
        MemoryCategory.INTEREST,
        MemoryCategory.GOAL,
    }
)
#: Facts about the work; they feed MEMORY.md.
WORK_CATEGORIES = frozenset({MemoryCategory.CONTEXT, MemoryCategory.DIRECTIVE})

Speaker = Literal["owner", "guest", "job", "system"]
StoreAction = Literal["added", "updated", "replaced", "unchanged"]


class MemoryStoreError(ValueError):
    """A store, restore or lookup that cannot be carried out; the message says why."""


class MemoryUnavailableError(RuntimeError):
    """The backend's storage failed (disk, locks, a closed backend); retrying may help.

    Backends raise this (or a subclass) for failures that are not about the request, so
    tools can tell "that fact does not exist" from "memory is down".
    """


class Provenance(BaseModel):
    """Who caused a memory write, and from where.

    A guest write must name its conversation and a job write its job: those are the scopes
    the respective callers are later confined to when they read memory back.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    speaker: Speaker
    conversation_key: ConversationKey | None = None
    job_id: str | None = None

    @model_validator(mode="after")
    def _scoped(self) -> Provenance:
        if self.speaker == "guest" and self.conversation_key is None:
            raise ValueError("a guest's memory write must carry the conversation_key it came from")
        if self.speaker == "job" and not self.job_id:
            raise ValueError("a job's memory write must carry its job_id")
        return self


class MemoryFact(BaseModel):
    """One remembered fact. ``key`` is an optional stable handle ("user.timezone")."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    id: str
    category: MemoryCategory
    key: str | None = None
    content: str
    provenance: Provenance
    created_at: datetime
    updated_at: datetime
    archived: bool = False


class StoreResult(BaseModel):
    """What a store did. ``previous`` is the fact as it was before an update or replace."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    action: StoreAction
    fact: MemoryFact
    previous: MemoryFact | None = None


class MemoryFilter(BaseModel):
    """Which facts (or history rows) one caller may see; every set field must match.

    Built by :func:`fermix_core.memory.scope.resolve_scope` from who is calling, never from
    what the model asked for. ``speakers`` limits provenance speakers, ``conversation_key``
    the conversation a write came from, ``job_id`` the scheduled job that wrote it.
    ``empty`` matches nothing at all (an operator asking for "current" outside any
    conversation). A filter with nothing set matches everything.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    speakers: frozenset[Speaker] | None = None
    conversation_key: ConversationKey | None = None
    job_id: str | None = None
    empty: bool = False

    def matches(
        self, speaker: str, conversation_key: Sequence[str | None] | None, job_id: str | None
    ) -> bool:
        if self.empty:
            return False
        if self.speakers is not None and speaker not in self.speakers:
            return False
        if self.conversation_key is not None and (
            conversation_key is None or tuple(conversation_key) != tuple(self.conversation_key)
        ):
            return False
        return self.job_id is None or job_id == self.job_id

    def matches_fact(self, fact: MemoryFact) -> bool:
        p = fact.provenance
        return self.matches(p.speaker, p.conversation_key, p.job_id)


#: Provenance speakers that count as the owner's own memory: what the owner stored, and
#: what background review consolidated from the owner's messages (``"system"``).
OWNER_SPEAKERS: frozenset[str] = frozenset({"owner", "system"})


def memory_of(provenance: Provenance) -> MemoryFilter:
    """The memory a write with *provenance* belongs to: the owner's, one guest
    conversation's, or one job's. Repeated facts are detected within it only, so a job
    saving what the owner also knows still gets a fact of its own to recall."""
    if provenance.speaker == "job":
        return MemoryFilter(job_id=provenance.job_id)
    if provenance.speaker == "guest":
        return MemoryFilter(
            speakers=frozenset({"guest"}), conversation_key=provenance.conversation_key
        )
    return MemoryFilter(speakers=OWNER_SPEAKERS)


class HistoryMessage(BaseModel):
    """One message of conversation history, as memory search and review see it.

    History belongs to the conversation store; memory backends only read it. ``speaker``
    is the speaker of the turn the row belongs to (a reply to a guest is a guest row).
    """

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    id: int
    conversation_key: ConversationKey
    role: Literal["user", "assistant"]
    speaker: Speaker
    text: str
    created_at: datetime


class AddOp(BaseModel):
    """Add a fact (a no-op when an equal one is already active)."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    op: Literal["add"] = "add"
    category: MemoryCategory
    content: str
    key: str | None = None


class ReplaceOp(BaseModel):
    """Archive fact ``id`` and add its corrected version in its place."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    op: Literal["replace"] = "replace"
    id: str
    category: MemoryCategory
    content: str
    key: str | None = None


class ArchiveOp(BaseModel):
    """Archive fact ``id`` (restorable)."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    op: Literal["archive"] = "archive"
    id: str


MemoryOp = Annotated[AddOp | ReplaceOp | ArchiveOp, Field(discriminator="op")]


class MemoryBackend(ABC):
    """Long-term memory storage, built from a ``MemoryBackendSpec``'s factory.

    Semantics every backend shares (``MemoryBackendContract`` checks them):

    * ``store`` with a ``key`` that an active fact holds updates that fact in place
      (``"updated"``), or reports ``"unchanged"`` when nothing differs.
    * ``store`` without a key whose category and content match an active fact (ignoring
      case and spacing) of the same writer's memory (:func:`memory_of`) is
      ``"unchanged"``: repeating a fact must not duplicate it.
    * ``store`` with ``replace_id`` archives that fact and adds the new one in its place
      (``"replaced"``); the new fact inherits the old key unless a key is given.
    * ``forget`` archives; archived facts are invisible to ``get_by_key``, ``search`` and
      ``list`` unless asked for, and ``restore`` brings them back.
    * Invalid input (unknown category, blank content, unknown ``replace_id``) raises
      :class:`MemoryStoreError`; searching never raises on odd query text.
    * ``where`` narrows ``search`` and ``list`` to what one caller may see; backends apply
      it in the query itself so a limit counts only visible facts.

    History (``search_history``, ``recent_messages``) is optional: a backend that cannot
    read the conversation store keeps the defaults, which find nothing.
    """

    #: Registry name of the backend, shown by ``memory_sources_list``.
    name: str = "memory"
    #: Whether ``search_history``/``recent_messages`` can return anything.
    history_available: bool = False

    @abstractmethod
    async def store(
        self,
        category: MemoryCategory | str,
        content: str,
        *,
        key: str | None = None,
        provenance: Provenance,
        replace_id: str | None = None,
    ) -> StoreResult: ...

    @abstractmethod
    async def get(self, id: str) -> MemoryFact | None:
        """The fact with *id*, archived or not."""

    @abstractmethod
    async def get_by_key(self, key: str) -> MemoryFact | None:
        """The active fact holding *key*."""

    @abstractmethod
    async def search(
        self,
        query: str,
        *,
        limit: int = 10,
        categories: Iterable[MemoryCategory | str] | None = None,
        include_archived: bool = False,
        where: MemoryFilter | None = None,
    ) -> list[MemoryFact]:
        """Facts matching *query*, best first; an empty query matches nothing."""

    @abstractmethod
    async def forget(self, id: str) -> bool:
        """Archive an active fact; false when there is no such active fact."""

    @abstractmethod
    async def restore(self, id: str) -> bool:
        """Un-archive a fact; false when there is no such archived fact."""

    @abstractmethod
    async def list(
        self,
        *,
        categories: Iterable[MemoryCategory | str] | None = None,
        include_archived: bool = False,
        limit: int | None = None,
        where: MemoryFilter | None = None,
    ) -> list[MemoryFact]:
        """Facts, most recently updated first."""

    async def apply_batch(
        self, ops: Sequence[AddOp | ReplaceOp | ArchiveOp], *, provenance: Provenance
    ) -> list[StoreResult | bool]:
        """Apply *ops* in order; one result per op (``bool`` for an archive).

        Backends override this to make the batch atomic — background review relies on a
        consolidation landing whole or not at all. This fallback is sequential and stops
        at the first error, which may leave earlier operations applied.
        """
        results: list[StoreResult | bool] = []
        for op in ops:
            results.append(await self._apply_one(op, provenance))
        return results

    async def _apply_one(
        self, op: AddOp | ReplaceOp | ArchiveOp, provenance: Provenance
    ) -> StoreResult | bool:
        if isinstance(op, ArchiveOp):
            if not await self.forget(op.id):
                raise MemoryStoreError(f"no active memory {op.id!r} to archive")
            return True
        if isinstance(op, ReplaceOp):
            return await self.store(
                op.category, op.content, key=op.key, provenance=provenance, replace_id=op.id
            )
        return await self.store(op.category, op.content, key=op.key, provenance=provenance)

    async def search_history(
        self, query: str, *, limit: int = 10, where: MemoryFilter | None = None
    ) -> list[HistoryMessage]:
        """User/assistant messages matching *query*, best first (none by default)."""
        return []

    async def search_both(
        self,
        query: str,
        *,
        limit: int = 10,
        facts_where: MemoryFilter | None = None,
        history_where: MemoryFilter | None = None,
    ) -> tuple[list[MemoryFact], list[HistoryMessage]]:
        """``search`` and ``search_history`` for one query, as one call.

        The default runs the two; a backend whose calls each hop to a worker thread may do
        both in one hop (a recall of both sources waits for a core once, not twice).
        """
        facts = await self.search(query, limit=limit, where=facts_where)
        history = await self.search_history(query, limit=limit, where=history_where)
        return facts, history

    async def recent_messages(
        self,
        *,
        after_id: int = 0,
        speakers: Iterable[Speaker] = ("owner",),
        limit: int = 200,
    ) -> list[HistoryMessage]:
        """The newest *limit* messages after *after_id* by *speakers*, oldest first."""
        return []

    async def catch_up_history(self, *, step: int | None = None) -> int:
        """Bring a history index up to date; returns how many messages it covered.

        The runtime calls it after replies (once per burst, see
        :mod:`fermix_core.memory.history_index`), off the turn path, so a search never has a
        long backlog to index first; it passes *step*: index at most that many messages per
        write transaction and pause between them, so turns are not held behind the write
        lock. The default keeps no index: nothing to do.
        """
        return 0

    async def describe(self, *, where: MemoryFilter | None = None) -> dict[str, object]:
        """Counts for ``memory_sources_list``: active facts per category, archived, history."""
        facts = await self.list(include_archived=True, where=where)
        active = [f for f in facts if not f.archived]
        per_category = {c.value: 0 for c in MemoryCategory}
        for fact in active:
            per_category[fact.category.value] += 1
        return {
            "backend": self.name,
            "active": len(active),
            "archived": len(facts) - len(active),
            "by_category": per_category,
            "history": {"available": self.history_available},
        }

    async def aclose(self) -> None:  # noqa: B027 - optional hook
        """Release connections; the default holds none."""


# --------------------------------------------------------------------------- helpers

_TOKEN_RE = re.compile(r"[^\W_]+")
_SPACE_RE = re.compile(r"\s+")


def normalize_category(category: MemoryCategory | str) -> MemoryCategory:
    try:
        return MemoryCategory(category)
    except ValueError:
        names = ", ".join(c.value for c in MemoryCategory)
        raise MemoryStoreError(
            f"unknown memory category {category!r}; use one of {names}"
        ) from None


def normalize_categories(
    categories: Iterable[MemoryCategory | str] | None,
) -> frozenset[MemoryCategory] | None:
    if categories is None:
        return None
    if isinstance(categories, str):
        categories = [categories]
    return frozenset(normalize_category(c) for c in categories)


def normalize_content(content: str) -> str:
    if not isinstance(content, str) or not content.strip():
        raise MemoryStoreError("memory content is empty; state the fact to remember")
    return content.strip()


def checked_write(
    category: MemoryCategory | str, content: str, key: str | None, provenance: Provenance
) -> tuple[MemoryCategory, str, str | None]:
    """The validated (category, content, key) of a ``store`` call, for every backend."""
    if not isinstance(provenance, Provenance):
        raise MemoryStoreError("provenance must be a Provenance saying who caused the write")
    return normalize_category(category), normalize_content(content), normalize_key(key)


def replacement_key(
    old: MemoryFact | None,
    replace_id: str,
    key: str | None,
    active_by_key: Callable[[str], MemoryFact | None],
) -> tuple[MemoryFact, str | None]:
    """Check that *old* (the fact named by *replace_id*) may be replaced; return it with the
    key the replacement takes (the new one, else the old fact's). Same rules in every
    backend."""
    if old is None:
        raise MemoryStoreError(
            f"no memory with id {replace_id!r} to replace; search or list to find it"
        )
    if old.archived:
        raise MemoryStoreError(f"memory {replace_id!r} is archived; restore it before replacing it")
    new_key = key if key is not None else old.key
    if new_key is not None:
        holder = active_by_key(new_key)
        if holder is not None and holder.id != old.id:
            raise MemoryStoreError(
                f"key {new_key!r} is held by memory {holder.id!r}; replace that one instead"
            )
    return old, new_key


def normalize_key(key: str | None) -> str | None:
    if key is None:
        return None
    if not isinstance(key, str) or not key.strip():
        raise MemoryStoreError(
            "memory key is blank; omit it or give a stable name like 'user.timezone'"
        )
    return key.strip()


def fold_content(text: str) -> str:
    """The form two facts are compared in: case-folded, whitespace runs collapsed."""
    return _SPACE_RE.sub(" ", text).casefold().strip()


def same_content(a: str, b: str) -> bool:
    """Equal ignoring case and runs of whitespace — what counts as a repeated fact."""
    return fold_content(a) == fold_content(b)


def tokenize(text: str) -> list[str]:
    """Lower-cased word tokens; punctuation and query operators carry no meaning."""
    return _TOKEN_RE.findall(text.casefold())
