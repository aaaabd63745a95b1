"""``request_directory_access``: the agent's half of the in-chat approval loop.

The tool never widens anything itself. It asks the sandbox to *propose* a grant, which
holds it behind a single-use ``/confirm TOKEN`` bound to this conversation, and returns
the text the owner must see: the exact canonical path, the reason, and the config diff.
Only the owner's ``/confirm`` (a pre-agent slash command the model cannot send) applies it.

The trust check is made here as well as in :func:`~fermix_core.sandbox.propose_grant` so
the refusal reads the same whichever layer a future change moves, and so a guest, job,
subagent or background run is turned away before any path is even canonicalised.
"""

from __future__ import annotations

import logging

from fermix_core.tool import Tool, ToolContext, ToolError, ToolOutput, Trust
from pydantic import BaseModel, ConfigDict, Field

from fermix_tools.files.common import sandbox


class RequestDirectoryAccessArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    path: str = Field(
        min_length=1,
        max_length=4096,
        description="The directory the task needs (absolute, or starting with ~).",
    )
    reason: str = Field(
        min_length=1,
        max_length=500,
        description="Why the task needs it, in one sentence the owner will read.",
    )


class RequestDirectoryAccess(Tool[RequestDirectoryAccessArgs]):
    async def run(self, args: RequestDirectoryAccessArgs, ctx: ToolContext) -> ToolOutput:
        if ctx.trust is not Trust.OPERATOR or not ctx.attended or ctx.origin != "main":
            raise ToolError(_refusal(ctx))
        from fermix_core.sandbox import propose_grant

        policy = sandbox(ctx)
        proposal = propose_grant(policy, args.path, args.reason, ctx)
        prompt = proposal.prompt()
        shown = await _show_prompt(ctx, proposal)
        instruction = (
            "The owner has been shown this request with its /confirm line. Tell them in one "
            "short sentence why the folder is needed, then stop and wait: only their /confirm "
            "applies it."
            if shown
            else "Show the owner this request as written, then stop and wait: only their "
            "/confirm applies it."
        )
        return ToolOutput(
            content=f"{prompt}\n\n[Nothing has changed yet. {instruction}]",
            data={
                "path": str(proposal.canonical_path),
                "reason": proposal.reason,
                "diff": proposal.diff,
                "token": proposal.token,
                "expires_in": proposal.expires_in,
                "prompt": prompt,
                "prompt_without_token": proposal.prompt(include_token=False),
            },
        )


async def _show_prompt(ctx: ToolContext, proposal: object) -> bool:
    """Send the approval prompt straight to the chat when its reply port can (every chat
    channel: plain text ending in the ``/confirm TOKEN`` line); ``False`` otherwise."""
    key = ctx.conversation_key
    approval = getattr(ctx.services.get("reply"), "approval", None)
    if key is None or not callable(approval):
        return False
    try:
        await approval(key.chat_id, key.thread_id, proposal)
    except Exception as exc:
        # The model relays the prompt from the tool output instead.
        logging.getLogger("fermix.tools").warning(
            "could not send the approval prompt to the chat: %s: %s", type(exc).__name__, exc
        )
        return False
    return True


def _refusal(ctx: ToolContext) -> str:
    if ctx.trust is not Trust.OPERATOR:
        who = "a guest conversation"
    elif ctx.origin != "main":
        who = f"a {ctx.origin} run"
    else:
        who = "an unattended run"
    return (
        f"request_directory_access is not available in {who}: only the owner, in an attended "
        "chat, can be asked for directory access. Finish the task inside the sandbox, or "
        "report which folder is needed and why."
    )
