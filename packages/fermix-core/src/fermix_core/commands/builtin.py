"""Core's own slash commands.

They are ordinary handlers behind ordinary :class:`CommandSpec` records (see
:mod:`fermix_core.commands.plugin`): whatever a third-party command can do, these do the
same way, and whatever they need from the runtime they ask of
:class:`~fermix_core.gateway.types.CommandServices`. Answers are written for someone on a
phone: short, and saying what happens next.
"""

from __future__ import annotations

from fermix_core.commands.router import CommandContext
from fermix_core.gateway.types import TurnJob
from fermix_core.tool import Trust

__all__ = [
    "BACKGROUND_LIMIT_REPLY",
    "SANDBOX_SUBCOMMANDS",
    "background_command",
    "compact_command",
    "help_command",
    "new_command",
    "sandbox_command",
    "stop_command",
    "tasks_command",
    "ultra_command",
    "whoami_command",
]

#: The daemon-wide cap on detached work; past it ``/background`` is refused, not queued.
BACKGROUND_LIMIT = 8
BACKGROUND_LIMIT_REPLY = (
    f"{BACKGROUND_LIMIT} background tasks are already running — that is the limit; "
    "try again when one finishes."
)

#: What ``/sandbox`` manages (the handler lives in :mod:`fermix_core.sandbox.chat`).
SANDBOX_SUBCOMMANDS: tuple[tuple[str, str], ...] = (
    ("/sandbox show", "show the sandbox mode, workspace, granted folders and command settings"),
    ("/sandbox grant PATH (or /grant PATH)", "grant the agent a folder (asks to /confirm)"),
    ("/sandbox revoke PATH (or /revoke PATH)", "take a granted folder back"),
    ("/sandbox env allow|deny NAME", "pass a host variable to commands (asks) or withhold it"),
    ("/sandbox env set NAME VALUE", "set a variable for every command (asks to /confirm)"),
    ("/sandbox preset bare|assistant|extended", "choose the command profile"),
    ("/sandbox approve", "apply a [sandbox] edit made outside Fermix (asks to /confirm)"),
    ("/confirm TOKEN", "apply a change that asked for confirmation"),
)


# ---------------------------------------------------------------------- any sender


async def help_command(ctx: CommandContext) -> str:
    """``/help``: the commands this sender may actually run, nothing they would be refused."""
    lines = ["Commands you can use here:"]
    lines += [f"/{name} — {text}" for name, text, _role in ctx.registry_help]
    if ctx.trust is Trust.GUEST:
        lines.append("")
        lines.append("You are chatting as a guest: read-only chat, no changes to this machine.")
    lines.append("")
    lines.append("Anything else that starts with / is sent to the agent as ordinary text.")
    return "\n".join(lines)


async def whoami_command(ctx: CommandContext) -> str:
    """``/whoami``: the stable id the channel's authorization compares, and the role it gets.

    It is how an operator discovers the id to put in ``owner_user_id``, so it says where.
    """
    message = ctx.message
    policy = ctx.policy
    lines = [f"Your {message.channel} user id: {message.sender_id}"]
    if ctx.trust is Trust.OPERATOR:
        if policy is not None and policy.local:
            lines.append("Role: operator (local caller; the full tool surface).")
        else:
            lines.append("Role: operator (owner of this Fermix; the full tool surface).")
        return "\n".join(lines)
    lines.append("Role: guest (read-only chat; no skills, commands on this machine or network).")
    if policy is not None and policy.in_command_allowlist(message.sender_id):
        lines.append(
            "Owner-only commands are open to you through command_allowlist "
            "(sandbox changes excepted)."
        )
    if policy is not None and policy.effective_owner is None and not policy.local:
        lines.append(
            "This channel has no owner configured. If this is your account, set "
            f'owner_user_id = "{message.sender_id}" in [fermix_channels.{message.channel}] '
            "in config.toml (or run `fermix setup --reconfigure`) and restart Fermix."
        )
    return "\n".join(lines)


# ---------------------------------------------------------------------- operator


async def new_command(ctx: CommandContext) -> str:
    """``/new`` (``/clear``): a fresh window; nothing durable is thrown away."""
    await ctx.services.clear_conversation(ctx.key)
    return (
        "Started a fresh conversation. Long-term memory, resource revisions and scheduled "
        "jobs are preserved; earlier messages stay in history but are no longer replayed."
    )


async def compact_command(ctx: CommandContext) -> str:
    """``/compact``: summarize the window now instead of waiting for the threshold."""
    outcome = await ctx.services.compact_conversation(ctx.key)
    return outcome.strip() or "Compacted this conversation: older messages are now a summary."


async def stop_command(ctx: CommandContext) -> str:
    """``/stop``: runs ahead of the queue, so it can stop the turn it would otherwise wait for."""
    report = await ctx.services.stop_conversation(ctx.key)
    if not report.anything:
        return "Nothing was running in this conversation."
    parts: list[str] = []
    if report.cancelled:
        parts.append("stopped the running turn (its request stays in history as context only)")
    if report.cleared:
        plural = "message" if report.cleared == 1 else "messages"
        parts.append(f"dropped {report.cleared} queued {plural}")
    if report.background:
        plural = "task" if report.background == 1 else "tasks"
        parts.append(f"stopped {report.background} background {plural}")
    text = "; ".join(parts)
    return f"{text[0].upper()}{text[1:]}."


async def background_command(ctx: CommandContext) -> str:
    """``/background`` (``/bg``): detached work, refused (never queued) past the cap."""
    if not ctx.args and not ctx.message.attachments:
        return "Usage: /background <request> — runs it detached and posts the result here."
    # A port that answers one request at a time (the CLI) hands out the place where late
    # results go; a chat channel posts into the chat itself.
    detached = getattr(ctx.reply, "detached", None)
    job = TurnJob(
        message=ctx.message.model_copy(update={"text": ctx.args}),
        trust=ctx.trust,
        reply=detached() if callable(detached) else ctx.reply,
        cwd=ctx.cwd,
        background=True,
    )
    task_id = await ctx.services.start_background(job)
    if task_id is None:
        return BACKGROUND_LIMIT_REPLY
    return (
        f"Started background task {task_id}. I'll post the result here when it finishes; "
        "/tasks lists it."
    )


async def tasks_command(ctx: CommandContext) -> str:
    """``/tasks``: background work started from this conversation."""
    tasks = ctx.services.background_tasks(ctx.key)
    if not tasks:
        return "No background tasks from this conversation."
    lines = ["Background tasks:"]
    for task in tasks:
        ident = task.get("id", "?")
        status = task.get("status", "unknown")
        prompt = " ".join(str(task.get("prompt", "")).split())
        if len(prompt) > 80:
            prompt = prompt[:79] + "…"
        line = f"- {ident} [{status}]"
        if prompt:
            line += f" {prompt}"
        lines.append(line)
    return "\n".join(lines)


async def ultra_command(ctx: CommandContext) -> str:
    """``/ultra <prompt>``: a normal foreground turn tagged with the ultra run profile."""
    if not ctx.args and not ctx.message.attachments:
        return "Usage: /ultra <request> — runs it as an exhaustive multi-agent turn."
    job = TurnJob(
        message=ctx.message.model_copy(update={"text": ctx.args}),
        trust=ctx.trust,
        reply=ctx.reply,
        cwd=ctx.cwd,
        run_profile="ultra",
    )
    follow = getattr(ctx.reply, "follow", None)
    if callable(follow):
        # A port that answers one request at a time (the CLI) waits for this turn and
        # prints its answer after this acknowledgement.
        follow(job)
    await ctx.services.submit_turn(job)
    return "Working on that in ultra mode (exhaustive, many sub-agents) — it can take a while."


async def sandbox_command(ctx: CommandContext) -> str:
    """``/sandbox`` and its aliases ``/grant``, ``/revoke``, ``/confirm``.

    The implementation is imported on first use: the sandbox package is not needed to
    answer ``/help``, and this module is imported on every boot.
    """
    from fermix_core.sandbox.chat import handle_sandbox_command

    return await handle_sandbox_command(ctx)
