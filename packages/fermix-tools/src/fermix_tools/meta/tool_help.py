"""``tool_help``: one tool's schema, guidance and failure modes, from the per-run snapshot.

The answer is drawn only from ``ctx.capabilities`` — the trust-filtered snapshot the loop
dispatches from — so a guest can never read the schema of a tool it cannot call, and a tool
that is not on this turn's surface is reported exactly like one that does not exist.
"""

from __future__ import annotations

import difflib
import json

from fermix_core.specs import ToolSpec, resolve_ref
from fermix_core.tool import Tool, ToolContext, ToolError, ToolOutput
from pydantic import BaseModel, ConfigDict, Field

MAX_LISTED = 40


class ToolHelpArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(
        min_length=1, max_length=128, description="Exact name of the tool to explain."
    )


def _schema(spec: ToolSpec) -> dict:
    if spec.args_model is None:
        return {"type": "object", "properties": {}, "additionalProperties": False}
    return resolve_ref(spec.args_model).model_json_schema()


def describe(spec: ToolSpec) -> str:
    lines = [f"# {spec.name}", "", spec.description]
    if spec.guidance:
        lines += ["", "## When and how to use it", spec.guidance]
    lines += ["", "## Arguments (JSON schema)", json.dumps(_schema(spec), indent=2, sort_keys=True)]
    if spec.failure_modes:
        lines += ["", "## Failure modes"] + [f"- {mode}" for mode in spec.failure_modes]
    traits = [f"policy: {spec.policy}", "read-only" if spec.read_only else "changes things"]
    if spec.owner_only:
        traits.append("owner only")
    lines += ["", "## Traits", ", ".join(traits)]
    return "\n".join(lines)


class ToolHelp(Tool[ToolHelpArgs]):
    async def run(self, args: ToolHelpArgs, ctx: ToolContext) -> ToolOutput:
        available = dict(ctx.capabilities)
        spec = available.get(args.name)
        if spec is None:
            names = sorted(available)
            close = difflib.get_close_matches(args.name, names, n=3)
            hint = f" Did you mean {', '.join(close)}?" if close else ""
            listed = ", ".join(names[:MAX_LISTED]) + (" …" if len(names) > MAX_LISTED else "")
            raise ToolError(
                f"No tool named {args.name!r} is available on this turn.{hint} "
                f"Available: {listed or 'none'}."
            )
        return ToolOutput(content=describe(spec), data={"tool": spec.name, "schema": _schema(spec)})
