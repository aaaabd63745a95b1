"""``memory_recall`` and ``memory_sources_list``: reading long-term memory.

``memory_recall`` is offered to guests (it is ``READ_ONLY``), which is only safe because
the scope it searches is resolved from the run, not from its arguments: the ``scope``
argument narrows, never widens (see :mod:`fermix_core.memory.scope`). The filter goes into
the backend query itself, so a limit of 10 means ten visible results, and a fact outside
the caller's scope is indistinguishable from one that does not exist.

Everything recalled comes back inside a ``<memory-context>`` fence with injection markers
neutralised; flags are put in the trace and in the output's ``data``.

``memory_sources_list`` is ``OWNER_DATA_READ``: it describes the owner's memory (counts,
profiles, review status), so guests never see it.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from fermix_core.memory.fence import fence_memory
from fermix_core.memory.review import ReviewState, review_state_path
from fermix_core.memory.scope import resolve_scope
from fermix_core.tool import NoArgs, Tool, ToolContext, ToolError, ToolOutput, Trust
from pydantic import BaseModel, ConfigDict, Field, model_validator

from fermix_tools.memory._common import memory_backend, memory_errors, trace_flags

MAX_LIMIT = 50


class MemoryRecallArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    query: str | None = Field(
        default=None,
        min_length=1,
        max_length=500,
        description="Words to search for in saved facts and/or history (prefixes match).",
    )
    key: str | None = Field(
        default=None,
        min_length=1,
        max_length=100,
        description="Exact key of a saved fact, e.g. 'user.timezone' (instead of query).",
    )
    source: Literal["memories", "history", "all"] = Field(
        default="all", description="Saved facts, past conversation messages, or both."
    )
    scope: Literal["current", "owner", "all"] = Field(
        default="owner",
        description=(
            "This conversation, the owner's memory, or everything; it can only narrow what "
            "this run is allowed to see."
        ),
    )
    limit: int = Field(default=10, ge=1, le=MAX_LIMIT, description="Most results per source.")

    @model_validator(mode="after")
    def _one_lookup(self) -> MemoryRecallArgs:
        has_query = self.query is not None and bool(self.query.strip())
        if has_query == (self.key is not None):
            raise ValueError("give exactly one of query (to search) or key (to look up)")
        return self


def _summary(facts: int, messages: int) -> str:
    parts = []
    if facts:
        parts.append(f"{facts} saved fact{'s' if facts != 1 else ''}")
    if messages:
        parts.append(f"{messages} past message{'s' if messages != 1 else ''}")
    return " and ".join(parts)


class MemoryRecall(Tool[MemoryRecallArgs]):
    async def run(self, args: MemoryRecallArgs, ctx: ToolContext) -> ToolOutput:
        scope = resolve_scope(ctx, args.scope)
        backend = memory_backend(ctx)
        facts: list[Any] = []
        history: list[Any] = []
        notes = [scope.note] if scope.note else []
        with memory_errors():
            if args.key is not None:
                fact = await backend.get_by_key(args.key.strip())
                if fact is not None and scope.facts.matches_fact(fact):
                    facts = [fact]
                if args.source == "history":
                    notes.append("a key looks up saved facts only; history was not searched")
            else:
                query = args.query or ""
                wants_facts = args.source in ("memories", "all")
                wants_history = args.source in ("history", "all")
                if wants_history and not backend.history_available:
                    notes.append("this memory backend cannot search conversation history")
                    wants_history = False
                if wants_facts and wants_history:  # one backend call for both
                    facts, history = await backend.search_both(
                        query,
                        limit=args.limit,
                        facts_where=scope.facts,
                        history_where=scope.history,
                    )
                elif wants_facts:
                    facts = await backend.search(query, limit=args.limit, where=scope.facts)
                elif wants_history:
                    history = await backend.search_history(
                        query, limit=args.limit, where=scope.history
                    )
        what = f"key {args.key!r}" if args.key is not None else f"{args.query!r}"
        fenced = fence_memory([*facts, *history])
        flags = trace_flags(ctx, self.name, fenced.flags)
        head = f"scope: {scope.name}"
        if scope.narrowed:
            head += f" (asked for {scope.requested})"
        if facts or history:
            lines = [f"Found {_summary(len(facts), len(history))} for {what} ({head})."]
        else:
            lines = [f"Nothing in memory matches {what} ({head})."]
        lines += [f"Note: {note}." for note in notes]
        if fenced:
            lines.append(fenced)
        return ToolOutput(
            content="\n".join(lines),
            data={
                "scope": scope.as_dict(),
                "facts": [f.id for f in facts],
                "history": [m.id for m in history],
                "flags": flags,
            },
        )


def _file_info(path: Path, home: Path) -> dict[str, Any]:
    try:
        st = path.stat()
    except OSError:
        return {"path": str(path.relative_to(home)), "exists": False}
    return {
        "path": str(path.relative_to(home)),
        "exists": True,
        "bytes": st.st_size,
        "modified": datetime.fromtimestamp(st.st_mtime, UTC).isoformat(timespec="seconds"),
    }


def _when(ts: float | None) -> str | None:
    return None if ts is None else datetime.fromtimestamp(ts, UTC).isoformat(timespec="seconds")


class MemorySourcesList(Tool[NoArgs]):
    async def run(self, args: NoArgs, ctx: ToolContext) -> ToolOutput:
        if ctx.trust is not Trust.OPERATOR:
            raise ToolError("memory sources are the owner's information and are not listed here")
        scope = resolve_scope(ctx, "all")
        backend = memory_backend(ctx)
        with memory_errors():
            facts = await backend.describe(where=scope.ceiling)
        home = Path(ctx.home.path)
        profiles = [
            _file_info(home / "memory" / "main" / name, home) for name in ("USER.md", "MEMORY.md")
        ]
        state = ReviewState.load(review_state_path(home))
        config = ctx.services.get("config")
        settings = getattr(
            getattr(getattr(config, "core", None), "fermix_core", None), "memory", None
        )
        review = {
            "enabled": getattr(settings, "review_enabled", None),
            "interval_hours": getattr(settings, "review_interval_hours", None),
            "last_run": _when(state.last_run),
            "last_success": _when(state.last_success),
            "failures": state.failures,
            "backoff_until": _when(state.backoff_until),
            "last_error": state.last_error,
        }
        report = {"scope": scope.name, "memories": facts, "profiles": profiles, "review": review}
        by_category = facts.get("by_category", {})
        counts = ", ".join(f"{n} {cat}" for cat, n in by_category.items() if n) or "none"  # type: ignore[union-attr]
        history = facts.get("history", {})
        lines = [
            f"Saved facts ({scope.name} scope, backend {facts.get('backend')}): "
            f"{facts.get('active', 0)} active ({counts}), {facts.get('archived', 0)} archived.",
        ]
        if isinstance(history, dict) and history.get("available"):
            lines.append(
                f"Conversation history: {history.get('messages', 0)} messages in "
                f"{history.get('conversations', 0)} conversations (searchable with "
                "memory_recall source='history')."
            )
        else:
            lines.append("Conversation history: not searchable with this backend.")
        for info in profiles:
            status = (
                f"{info['bytes']} bytes, updated {info['modified']}"
                if info["exists"]
                else "missing"
            )
            lines.append(f"Profile {info['path']}: {status}.")
        if state.last_run is None:
            lines.append("Background review: has not run yet.")
        else:
            line = f"Background review: last ran {review['last_run']}"
            if state.failures:
                line += (
                    f"; the last {state.failures} attempt(s) failed, next try after "
                    f"{review['backoff_until']}"
                )
            lines.append(line + ".")
        return ToolOutput(content="\n".join(lines), data=report)
