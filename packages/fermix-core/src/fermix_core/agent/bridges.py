"""The tool-schema deferral bridges: ``tool_search``, ``tool_describe`` and ``tool_call``.

Deferred tools (plugin and MCP tools, and any spec marked ``deferred``) keep their names in
the prompt but leave the provider wire, which keeps a large plugin surface from costing
every request thousands of schema tokens. These three tools are how the model reaches them
on demand.

Each bridge is built per snapshot and bound to it, so search, description and invocation
can only ever see what the run's trust allows: a guest searching for an owner tool finds
nothing, exactly as if it did not exist. The agent loop unwraps ``tool_call`` before
dispatch (so traces, the repeated-call detector and the side-effect rule see the real
tool); :class:`ToolCallBridge.run` is the fallback for a caller that invokes it directly.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from fermix_core.specs import PolicyClass, ToolSpec
from fermix_core.tool import Tool, ToolBuildError, ToolContext, ToolError, ToolOutput

if TYPE_CHECKING:  # pragma: no cover - typing only
    from fermix_core.agent.capabilities import Capabilities

__all__ = [
    "ToolCallArgs",
    "ToolCallBridge",
    "ToolDescribe",
    "ToolDescribeArgs",
    "ToolSearch",
    "ToolSearchArgs",
    "bridge_specs",
]

#: How many deferred names a "nothing matched" answer lists before eliding the rest.
_MAX_LISTED = 40


class ToolSearchArgs(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    query: str = Field(
        min_length=1, max_length=500, description="What you want to do, in a few keywords."
    )
    limit: int = Field(default=5, ge=1, le=20, description="How many matches to return.")


class ToolDescribeArgs(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    name: str = Field(min_length=1, max_length=128, description="Exact name of the tool.")


class ToolCallArgs(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    name: str = Field(min_length=1, max_length=128, description="Exact name of the tool to run.")
    arguments: dict[str, Any] = Field(
        default_factory=dict, description="The tool's arguments, as its schema describes them."
    )

    @field_validator("arguments", mode="before")
    @classmethod
    def _decode_json(cls, value: Any) -> Any:
        # Models regularly double-encode nested arguments; accept a JSON object string.
        if value is None:
            return {}
        if isinstance(value, str):
            if not value.strip():
                return {}
            try:
                decoded = json.loads(value)
            except json.JSONDecodeError as exc:
                raise ValueError(f"arguments is not valid JSON ({exc.msg})") from exc
            return decoded
        return value


class _Bridge(Tool[Any]):
    """A tool bound to the snapshot it searches, describes or dispatches within."""

    def __init__(self, spec: ToolSpec, capabilities: Capabilities) -> None:
        super().__init__(spec)
        self.capabilities = capabilities


def _not_available(name: str) -> ToolError:
    return ToolError(
        f"No tool named {name!r} is available on this turn. Use tool_search to find the right name."
    )


class ToolSearch(_Bridge):
    async def run(self, args: ToolSearchArgs, ctx: ToolContext) -> ToolOutput:
        caps = self.capabilities
        matches = caps.search(args.query, args.limit)
        if not matches:
            names = sorted(caps.deferred)
            listed = ", ".join(names[:_MAX_LISTED]) + (" …" if len(names) > _MAX_LISTED else "")
            return ToolOutput(
                content=(
                    f"No deferred tool matches {args.query!r}. Try other keywords. "
                    f"Deferred tools on this turn: {listed or 'none'}."
                ),
                data={"matches": []},
            )
        lines = [f"Tools matching {args.query!r}:"]
        lines += [f"- {spec.name} — {spec.description.strip()}" for spec in matches]
        lines.append(
            "Call tool_describe with a name for its argument schema, then tool_call with "
            "that name and arguments."
        )
        return ToolOutput(content="\n".join(lines), data={"matches": [s.name for s in matches]})


class ToolDescribe(_Bridge):
    async def run(self, args: ToolDescribeArgs, ctx: ToolContext) -> ToolOutput:
        caps = self.capabilities
        spec = caps.specs.get(args.name)
        if spec is None:
            raise _not_available(args.name)
        try:
            definition = caps.definition(args.name)
        except ToolBuildError as exc:
            raise ToolError(
                f"Tool {args.name!r} failed to load, so it cannot be used right now."
            ) from exc
        lines = [f"# {spec.name}", "", spec.description.strip()]
        if spec.guidance:
            lines += ["", "## When and how to use it", spec.guidance.strip()]
        schema = json.dumps(definition.parameters, indent=2, sort_keys=True)
        lines += ["", "## Arguments (JSON schema)", schema]
        if spec.failure_modes:
            lines += ["", "## Failure modes", *(f"- {mode}" for mode in spec.failure_modes)]
        lines += ["", f"Run it with tool_call(name={spec.name!r}, arguments={{...}})."]
        return ToolOutput(
            content="\n".join(lines), data={"tool": spec.name, "schema": definition.parameters}
        )


class ToolCallBridge(_Bridge):
    async def run(self, args: ToolCallArgs, ctx: ToolContext) -> ToolOutput:
        if args.name == self.name:
            raise ToolError("tool_call cannot run tool_call; name the tool you want directly.")
        caps = self.capabilities
        if args.name not in caps.specs:
            raise _not_available(args.name)
        try:
            target = caps.tool(args.name)
        except ToolBuildError as exc:
            raise ToolError(
                f"Tool {args.name!r} failed to load, so it cannot be used right now."
            ) from exc
        return await target.invoke(args.arguments, ctx)


def bridge_specs(capabilities: Capabilities) -> tuple[ToolSpec, ...]:
    """The three bridge specs, their factories bound to *capabilities*."""

    def bound(cls: type[_Bridge]) -> Any:
        return lambda spec: cls(spec, capabilities)

    return (
        ToolSpec(
            name="tool_search",
            description=(
                "Search the installed plugin tools listed under ## Plugins by what you want to "
                "do; returns matching tool names with one-line descriptions."
            ),
            factory=bound(ToolSearch),
            args_model=ToolSearchArgs,
            policy=PolicyClass.READ_ONLY,
            guidance='Use a few keywords ("send email", "calendar events").',
            failure_modes=("no match: the answer lists every deferred tool name",),
        ),
        ToolSpec(
            name="tool_describe",
            description="Show one tool's full argument schema, guidance and failure modes.",
            factory=bound(ToolDescribe),
            args_model=ToolDescribeArgs,
            policy=PolicyClass.READ_ONLY,
            guidance="Call it before the first tool_call of a plugin tool you have not used.",
            failure_modes=("unknown or unavailable name: search with tool_search",),
        ),
        ToolSpec(
            name="tool_call",
            description=(
                "Run a plugin tool listed under ## Plugins by name with its arguments (you may "
                "also call it directly by name)."
            ),
            factory=bound(ToolCallBridge),
            args_model=ToolCallArgs,
            policy=PolicyClass.READ_ONLY,
            read_only=False,
            guidance=(
                "Pass the exact tool name and an arguments object matching the schema from "
                "tool_describe. The tool's own rules and failures apply."
            ),
            failure_modes=(
                "unknown or unavailable name: search with tool_search",
                "invalid arguments: the error lists the fields to fix",
            ),
        ),
    )
