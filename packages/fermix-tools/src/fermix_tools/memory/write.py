"""``memory_store`` and ``memory_forget``: the two tools that change long-term memory.

Who wrote a fact is never the model's to say: provenance comes from the run
(:func:`~fermix_core.memory.scope.resolve_scope`) — the owner's turn writes owner memory, a
scheduled run writes its job's memory, and a guest writes nothing. A fact may only be
corrected or forgotten by a run that could read it: a job cannot rewrite the owner's
profile by guessing an id or a key.

The result says what actually happened, because "saved" is not always true: a repeated
fact is ``unchanged``, a key that already had a value is ``updated`` (and says what it
was), and a correction by id is ``replaced`` (the old fact archived, restorable).
"""

from __future__ import annotations

from fermix_core.memory.directives import OWNER_MESSAGES_STATE, directive_problem
from fermix_core.memory.fence import neutralize, scan
from fermix_core.memory.scope import EffectiveScope, resolve_scope
from fermix_core.tool import Tool, ToolContext, ToolError, ToolOutput
from pydantic import BaseModel, ConfigDict, Field, field_validator

from fermix_tools.memory._common import CATEGORY_HELP, Category, memory_backend, memory_errors

MAX_CONTENT = 1000
_KEY_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:-]*$"
_ID_PATTERN = r"^[A-Za-z0-9_-]+$"


class MemoryStoreArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    category: Category = Field(description=f"What the fact is about: {CATEGORY_HELP}.")
    content: str = Field(
        min_length=1,
        max_length=MAX_CONTENT,
        description="The fact: one short, self-contained sentence.",
    )
    key: str | None = Field(
        default=None,
        min_length=1,
        max_length=100,
        pattern=_KEY_PATTERN,
        description="Optional stable handle such as 'user.timezone'; storing again updates it.",
    )
    replace_id: str | None = Field(
        default=None,
        min_length=1,
        max_length=40,
        pattern=_ID_PATTERN,
        description="Id of a saved fact this one corrects; the old one is archived.",
    )

    @field_validator("content")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("state the fact to remember; blank content is not a fact")
        return value.strip()


class MemoryForgetArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str = Field(
        min_length=1, max_length=40, pattern=_ID_PATTERN, description="Id of the fact to forget."
    )


def _writable(ctx: ToolContext) -> EffectiveScope:
    scope = resolve_scope(ctx, "all")
    if scope.writer is None:
        raise ToolError(
            "memory cannot be changed from this conversation (read-only access); "
            "you can still use memory_recall"
        )
    return scope


def _owner_messages(ctx: ToolContext, scope: EffectiveScope) -> list[str] | None:
    """The owner's own messages this turn may quote, or None outside an owner's turn."""
    if scope.writer is None or scope.writer.speaker != "owner" or ctx.origin == "job":
        return None
    messages = ctx.state.get(OWNER_MESSAGES_STATE)
    if not isinstance(messages, list | tuple):
        return None
    return [m for m in messages if isinstance(m, str)]


def _quote(text: str) -> str:
    return f'"{neutralize(text)[0]}"'


class MemoryStore(Tool[MemoryStoreArgs]):
    async def run(self, args: MemoryStoreArgs, ctx: ToolContext) -> ToolOutput:
        scope = _writable(ctx)
        problem = directive_problem(args.category, args.content, _owner_messages(ctx, scope))
        if problem:
            raise ToolError(problem)
        backend = memory_backend(ctx)
        with memory_errors():
            if args.replace_id is not None:
                target = await backend.get(args.replace_id)
                if target is None or not scope.may_modify(target):
                    raise ToolError(
                        f"no memory with id {args.replace_id!r} that this run can correct; "
                        "use memory_recall to find the id"
                    )
            if args.key is not None:
                holder = await backend.get_by_key(args.key)
                if holder is not None and not scope.may_modify(holder):
                    raise ToolError(
                        f"the key {args.key!r} belongs to a memory this run cannot change; "
                        "choose another key"
                    )
            assert scope.writer is not None
            result = await backend.store(
                args.category,
                args.content,
                key=args.key,
                provenance=scope.writer,
                replace_id=args.replace_id,
            )
        fact = result.fact
        if result.action == "added":
            text = f"Saved as memory {fact.id} [{fact.category.value}]."
        elif result.action == "unchanged":
            text = f"Unchanged: memory {fact.id} already says this."
        elif result.action == "updated":
            before = result.previous.content if result.previous else ""
            text = f"Updated memory {fact.id} (key {fact.key}); it was: {_quote(before)}."
        else:
            old = result.previous.id if result.previous else "?"
            text = (
                f"Replaced memory {old} with memory {fact.id}; the old one is archived "
                f"(the owner can restore it with `fermix memory restore {old}`)."
            )
        markers = scan(args.content)
        if markers:
            text += (
                " Note: the text looks like an instruction; it is kept as data and will be "
                "fenced when recalled."
            )
        return ToolOutput(
            content=text,
            data={
                "action": result.action,
                "id": fact.id,
                "category": fact.category.value,
                "key": fact.key,
                "previous_id": result.previous.id if result.previous else None,
                "flags": markers,
            },
        )


class MemoryForget(Tool[MemoryForgetArgs]):
    async def run(self, args: MemoryForgetArgs, ctx: ToolContext) -> ToolOutput:
        scope = _writable(ctx)
        backend = memory_backend(ctx)
        with memory_errors():
            fact = await backend.get(args.id)
            if fact is None or not scope.may_modify(fact):
                raise ToolError(
                    f"no memory with id {args.id!r} that this run can forget; use "
                    "memory_recall to find the id"
                )
            if fact.archived:
                raise ToolError(f"memory {args.id} is already forgotten (archived)")
            if not await backend.forget(args.id):
                raise ToolError(f"memory {args.id} could not be forgotten; it changed meanwhile")
        return ToolOutput(
            content=(
                f"Forgot memory {args.id} [{fact.category.value}]: {_quote(fact.content)}. It is "
                f"archived; the owner can restore it with `fermix memory restore {args.id}`."
            ),
            data={"action": "archived", "id": args.id},
        )
