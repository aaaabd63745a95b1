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
from collections.abc import Iterable
from datetime import datetime
from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, ConfigDict, model_validator

from fermix_core.channel import ConversationKey

__all__ = [
    "USER_CATEGORIES",
    "WORK_CATEGORIES",
    "MemoryBackend",
    "MemoryCategory",
    "MemoryFact",
    "MemoryStoreError",
    "Provenance",
    "Speaker",
    "StoreAction",
    "StoreResult",
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


class Provenance(BaseModel):
    """Who caused a memory write, and from where.

    A guest write must name its conversation and a job write its job: those are the scopes
    the respective callers are later confined to when they read memory back.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

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

    model_config = ConfigDict(frozen=True, extra="forbid")

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

    model_config = ConfigDict(frozen=True, extra="forbid")

    action: StoreAction
    fact: MemoryFact
    previous: MemoryFact | None = None


class MemoryBackend(ABC):
    """Long-term memory storage, built from a ``MemoryBackendSpec``'s factory.

    Semantics every backend shares (``MemoryBackendContract`` checks them):

    * ``store`` with a ``key`` that an active fact holds updates that fact in place
      (``"updated"``), or reports ``"unchanged"`` when nothing differs.
    * ``store`` without a key whose category and content match an active fact (ignoring
      case and spacing) is ``"unchanged"``: repeating a fact must not duplicate it.
    * ``store`` with ``replace_id`` archives that fact and adds the new one in its place
      (``"replaced"``); the new fact inherits the old key unless a key is given.
    * ``forget`` archives; archived facts are invisible to ``get_by_key``, ``search`` and
      ``list`` unless asked for, and ``restore`` brings them back.
    * Invalid input (unknown category, blank content, unknown ``replace_id``) raises
      :class:`MemoryStoreError`; searching never raises on odd query text.
    """

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
    ) -> list[MemoryFact]:
        """Facts, most recently updated first."""

    async def aclose(self) -> None:  # noqa: B027 - optional hook
        """Release connections; the default holds none."""


# --------------------------------------------------------------------------- helpers

_TOKEN_RE = re.compile(r"\w+")
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


def normalize_key(key: str | None) -> str | None:
    if key is None:
        return None
    if not isinstance(key, str) or not key.strip():
        raise MemoryStoreError(
            "memory key is blank; omit it or give a stable name like 'user.timezone'"
        )
    return key.strip()


def same_content(a: str, b: str) -> bool:
    """Equal ignoring case and runs of whitespace — what counts as a repeated fact."""
    return _SPACE_RE.sub(" ", a).casefold().strip() == _SPACE_RE.sub(" ", b).casefold().strip()


def tokenize(text: str) -> list[str]:
    """Lower-cased word tokens; punctuation and query operators carry no meaning."""
    return _TOKEN_RE.findall(text.casefold())
