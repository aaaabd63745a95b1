"""Who may read and write which memory: the effective scope of one caller.

``memory_recall`` takes a ``scope`` argument (current | owner | all), but that argument is a
request, not an authorization. The ceiling comes from the caller as the runtime built it —
``ctx.trust``, ``ctx.origin``, ``ctx.conversation_key`` and the job id in ``ctx.state`` —
and the request can only narrow within it:

* a **scheduled run** (a job id in ``ctx.state``, or ``origin == "job"``) sees its own job's
  facts and its own run conversation, whatever scope it names; it cannot see the chat that
  created it, nor the owner's memory;
* a **guest** sees only what was said and stored in guest turns of the conversation it is
  in — owner turns in a shared chat are owner data;
* the **operator** gets what it asks for: ``current`` (this conversation), ``owner`` (facts
  by the owner or consolidated from the owner's messages, and the owner's history), or
  ``all`` (everything, guests' and jobs' memory included).

Writes use the same ceiling: a job may only correct or forget its own facts, a guest may
not write at all, and every write is stamped with the caller's provenance.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from fermix_core.memory.backend import OWNER_SPEAKERS, MemoryFact, MemoryFilter, Provenance
from fermix_core.tool import ToolContext, ToolError, Trust

__all__ = [
    "JOB_ID_STATE_KEY",
    "OWNER_SPEAKERS",
    "SCOPES",
    "EffectiveScope",
    "MemoryAccessError",
    "ScopeName",
    "resolve_scope",
]

ScopeName = Literal["current", "owner", "all"]
SCOPES: tuple[str, ...] = ("current", "owner", "all")

#: Where the runtime puts a scheduled run's job id in ``ToolContext.state``.
JOB_ID_STATE_KEY = "job_id"

#: Made without a validation round, which would build the model's validator at import.
_NOTHING = MemoryFilter.model_construct(empty=True)


class MemoryAccessError(ToolError):
    """The caller has no memory it may use in this way; the message says why."""


@dataclass(frozen=True)
class EffectiveScope:
    """What one caller may see and do, after its request was narrowed.

    ``facts``/``history`` filter reads for this request; ``ceiling`` is the widest set of
    facts the caller could ever read, which is also the set it may modify when
    ``writer`` is not ``None``.
    """

    requested: str
    name: str
    facts: MemoryFilter
    history: MemoryFilter
    ceiling: MemoryFilter
    writer: Provenance | None
    note: str = ""

    @property
    def narrowed(self) -> bool:
        return self.name != self.requested

    def may_modify(self, fact: MemoryFact) -> bool:
        return self.writer is not None and self.ceiling.matches_fact(fact)

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"requested": self.requested, "effective": self.name}
        if self.note:
            out["note"] = self.note
        return out


def _job_id(ctx: ToolContext) -> str | None:
    value = ctx.state.get(JOB_ID_STATE_KEY) if isinstance(ctx.state, dict) else None
    if isinstance(value, str) and value.strip():
        return value.strip()
    if value is not None and not isinstance(value, str):
        return str(value)
    return None


def resolve_scope(ctx: ToolContext, requested: str = "owner") -> EffectiveScope:
    """The scope *ctx* actually gets when it asks for *requested*.

    Raises :class:`MemoryAccessError` when the caller has no memory at all: a scheduled run
    without a job id, or a guest outside any conversation.
    """
    if requested not in SCOPES:
        raise MemoryAccessError(
            f"unknown memory scope {requested!r}; use one of {', '.join(SCOPES)}"
        )
    key = ctx.conversation_key
    job_id = _job_id(ctx)
    if job_id is not None or ctx.origin == "job":
        if job_id is None:
            raise MemoryAccessError(
                "this scheduled run carries no job id, so it has no memory to use"
            )
        facts = MemoryFilter(job_id=job_id)
        history = (
            MemoryFilter(speakers=frozenset({"job"}), conversation_key=key) if key else _NOTHING
        )
        return EffectiveScope(
            requested=requested,
            name="job",
            facts=facts,
            history=history,
            ceiling=facts,
            # A guest-created job stays read-only, like its creator.
            writer=(
                Provenance(speaker="job", job_id=job_id, conversation_key=key)
                if ctx.trust is Trust.OPERATOR
                else None
            ),
            note="a scheduled run reads only its own job's memory",
        )
    if ctx.trust is not Trust.OPERATOR:
        if key is None:
            raise MemoryAccessError("a guest can only recall memory inside its conversation")
        current = MemoryFilter(speakers=frozenset({"guest"}), conversation_key=key)
        return EffectiveScope(
            requested=requested,
            name="current",
            facts=current,
            history=current,
            ceiling=current,
            writer=None,
            note="" if requested == "current" else "a guest reads only the conversation it is in",
        )
    writer = Provenance(speaker="owner", conversation_key=key)
    everything = MemoryFilter()
    if requested == "all":
        facts = history = everything
        note = ""
    elif requested == "owner":
        facts = MemoryFilter(speakers=OWNER_SPEAKERS)
        history = MemoryFilter(speakers=frozenset({"owner"}))
        note = ""
    elif key is None:
        facts = history = _NOTHING
        note = "this run has no conversation, so 'current' holds nothing; ask for 'owner'"
    else:
        facts = history = MemoryFilter(conversation_key=key)
        note = ""
    return EffectiveScope(
        requested=requested,
        name=requested,
        facts=facts,
        history=history,
        ceiling=everything,
        writer=writer,
        note=note,
    )
