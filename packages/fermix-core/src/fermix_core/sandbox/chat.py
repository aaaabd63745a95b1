"""``/sandbox`` (and ``/grant``, ``/revoke``, ``/confirm``) in chat.

The router has already made sure the sender is the operator (these are
``sandbox_mutation`` commands, never opened by ``command_allowlist``). What is left is
the conversation: show the sandbox, plan a change, hold the widening ones for
``/confirm TOKEN``, write ``config.toml`` and swap the running policy so the change holds
from the next tool call without a restart.

The runtime pieces come from the command services object (the turn runner):
``services.services["sandbox"]`` (the policy), ``services.confirmations`` (the
:class:`ConfirmationStore`), ``services.home`` and ``services.config`` (for the registry).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, MutableMapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from fermix_core.commands.builtin import SANDBOX_SUBCOMMANDS
from fermix_core.sandbox.grants import (
    ConfirmationError,
    ConfirmationStore,
    GrantError,
    apply_change,
    canonical_grant,
    evolve_policy,
    is_risky,
    plan_change,
    read_sandbox_table,
)
from fermix_core.sandbox.policy import BASE_ENV, SandboxPolicy

if TYPE_CHECKING:  # pragma: no cover
    from fermix_core.commands.router import CommandContext

__all__ = ["USAGE", "handle_sandbox_command"]

log = logging.getLogger("fermix.sandbox.chat")

#: One list for ``/help``-style usage, shared with :mod:`fermix_core.commands.builtin`.
USAGE = SANDBOX_SUBCOMMANDS


def usage_text() -> str:
    return "\n".join(f"- {usage}: {what}" for usage, what in USAGE)


class _Runtime:
    """The handler's view of the command services, read defensively."""

    def __init__(self, services: Any) -> None:
        self.owner = services
        table = getattr(services, "services", None)
        self.table: MutableMapping[str, Any] | None = (
            table if isinstance(table, MutableMapping) else None
        )
        # The runtime's store is a service of the table (made on first use); a bare
        # services object may carry one as an attribute instead.
        store = self.table.get("confirmations") if self.table is not None else None
        self.store: ConfirmationStore | None = (
            store if store is not None else getattr(services, "confirmations", None)
        )
        self.home = getattr(services, "home", None)
        self.config = getattr(services, "config", None)
        self.registry = getattr(self.config, "registry", None)

    @property
    def policy(self) -> SandboxPolicy | None:
        policy = self.table.get("sandbox") if self.table is not None else None
        if isinstance(policy, SandboxPolicy):
            return policy
        if self.config is not None and self.home is not None:
            try:
                return SandboxPolicy.from_config(self.config, Path(self.home.path))
            except Exception:
                log.exception("cannot build the sandbox policy from the loaded config")
        return None

    def swap(self, policy: SandboxPolicy) -> bool:
        if self.table is None or not isinstance(self.table.get("sandbox"), SandboxPolicy):
            return False
        self.table["sandbox"] = policy
        return True


async def handle_sandbox_command(ctx: CommandContext) -> str:
    """Entry point for ``/sandbox``, ``/grant``, ``/revoke`` and ``/confirm``."""
    runtime = _Runtime(ctx.services)
    invoked = ctx.invoked_as or "sandbox"
    if invoked == "confirm":
        return await _confirm(ctx, runtime, ctx.args)
    if invoked in ("grant", "revoke"):
        sub, rest = invoked, ctx.args
    else:
        head, _, rest = ctx.args.strip().partition(" ")
        sub = head.lower()
    rest = rest.strip()
    if sub in ("", "show", "status"):
        return _show(runtime)
    if sub == "help":
        return "Sandbox commands:\n" + usage_text()
    if sub == "approve":
        return await _ask_approval(ctx, runtime)
    policy = runtime.policy
    if policy is None:
        return (
            "The sandbox is not running in this process, so there is nothing to change here. "
            "Use `fermix grant path PATH` or `fermix sandbox show` in a terminal."
        )
    try:
        if sub in ("grant", "revoke"):
            base = ctx.cwd if ctx.cwd is not None else None
            if sub == "grant":
                path = canonical_grant(policy, rest, base)
            else:
                path = _revoke_target(policy, rest, base)
            return await _change(ctx, runtime, policy, sub, {"path": str(path)})
        if sub == "env":
            action, _, tail = rest.partition(" ")
            action = action.lower()
            tail = tail.strip()
            if action in ("allow", "deny") and tail and " " not in tail:
                return await _change(ctx, runtime, policy, f"env_{action}", {"name": tail})
            if action == "set":
                name, _, value = tail.partition(" ")
                if name and value.strip():
                    payload = {"name": name, "value": value.strip()}
                    return await _change(ctx, runtime, policy, "env_set", payload)
            return (
                "Usage: /sandbox env allow NAME · /sandbox env deny NAME · "
                "/sandbox env set NAME VALUE"
            )
        if sub == "preset":
            name = rest.lower()
            if not name or " " in name:
                return "Usage: /sandbox preset bare|assistant|extended"
            return await _change(ctx, runtime, policy, "preset", {"profile": name})
    except GrantError as exc:
        return f"Not changed: {exc}"
    return f"Unknown /sandbox subcommand {sub!r}. Sandbox commands:\n" + usage_text()


def _revoke_target(policy: SandboxPolicy, raw: str, base: Path | None) -> Path:
    """Revoking needs no existing folder (it may have been deleted) and no grant rules."""
    from fermix_core.sandbox.paths import PathProblem, canonical

    text = raw.strip().strip("'\"")
    if not text:
        raise GrantError("give the folder to take back, e.g. /sandbox revoke ~/projects/app")
    if base is None and not text.startswith(("/", "~")):
        raise GrantError(f"{text!r} is relative; give the full path (or one starting with ~)")
    try:
        return canonical(text, base or policy.workspace, policy.os_home)
    except PathProblem as exc:
        raise GrantError(str(exc)) from None


async def _change(
    ctx: CommandContext,
    runtime: _Runtime,
    policy: SandboxPolicy,
    kind: str,
    payload: dict[str, str],
) -> str:
    if runtime.home is None or runtime.registry is None:
        return (
            "Cannot change config.toml from here (no configuration is loaded in this process); "
            "use `fermix config set` or `fermix grant path` in a terminal."
        )
    current = await anyio.to_thread.run_sync(read_sandbox_table, runtime.home)
    edit = plan_change(policy, kind, payload, current)
    if not is_risky(kind, payload):
        return await _apply(runtime, policy, kind, payload)
    if runtime.store is None:
        return (
            "This change needs a confirmation, and confirmations are not available in this "
            "process; make it in a terminal with `fermix config set` or `fermix grant path`."
        )
    pending = runtime.store.issue(
        kind,
        payload,
        conversation_key=tuple(ctx.key),
        summary=edit.summary,
        diff=edit.diff(),
    )
    return (
        f"This would {edit.summary}:\n{edit.diff()}\n"
        f"Reply /confirm {pending.token} within {runtime.store.ttl:g} s to apply it."
    )


async def _apply(
    runtime: _Runtime, policy: SandboxPolicy, kind: str, payload: Mapping[str, str]
) -> str:
    from fermix_core.config.errors import ConfigError

    def write() -> Any:
        return apply_change(
            runtime.home,
            runtime.registry,
            policy,
            kind,
            payload,
            unavailable=_unavailable(runtime),
        )

    try:
        edit = await anyio.to_thread.run_sync(write)
    except GrantError as exc:
        return f"Not changed: {exc}"
    except ConfigError as exc:
        problems = "; ".join(str(p) for p in exc.problems) or str(exc)
        return f"Not changed: config.toml would become invalid ({problems})."
    live = runtime.swap(evolve_policy(policy, kind, payload))
    when = "It applies from the next tool call." if live else "Restart Fermix to apply it."
    return f"Done: {edit.summary}. Saved to config.toml. {when}"


def _unavailable(runtime: _Runtime) -> Any:
    for holder in (runtime.owner, runtime.config):
        value = getattr(holder, "unavailable", None)
        if value is not None and not callable(value):
            return value
    return ()


async def _confirm(ctx: CommandContext, runtime: _Runtime, args: str) -> str:
    token = args.strip()
    if not token:
        return "Usage: /confirm TOKEN — the token comes with the change you asked for."
    if runtime.store is None:
        return "There is nothing to confirm in this process."
    try:
        pending = runtime.store.take(token, conversation_key=tuple(ctx.key), trust=ctx.trust)
    except ConfirmationError as exc:
        return f"Not applied: {exc}."
    policy = runtime.policy
    if policy is None or runtime.home is None or runtime.registry is None:
        return "Not applied: the sandbox configuration is not loaded in this process."
    if pending.kind == APPROVE:
        return await _approve(runtime, policy)
    reply = await _apply(runtime, policy, pending.kind, pending.payload)
    if reply.startswith("Done"):
        await runtime.store.notify_applied(pending)
    return reply


APPROVE = "approve_config"


async def _ask_approval(ctx: CommandContext, runtime: _Runtime) -> str:
    from fermix_core.sandbox import approval

    if runtime.home is None or runtime.store is None:
        return "Nothing to approve in this process; use `fermix sandbox approve` in a terminal."
    state = await anyio.to_thread.run_sync(approval.check, runtime.home)
    if not state.pending:
        return "Nothing to approve: [sandbox] in config.toml is the one you approved."
    changes = "\n".join(state.changes())
    pending = runtime.store.issue(
        APPROVE,
        {},
        conversation_key=tuple(ctx.key),
        summary="apply the [sandbox] edit made outside Fermix",
        diff=changes,
    )
    return (
        "config.toml's [sandbox] was changed outside Fermix and is not applied:\n"
        f"{changes}\nIf you made this change, reply /confirm {pending.token} within "
        f"{runtime.store.ttl:g} s to apply it; otherwise undo it in config.toml."
    )


async def _approve(runtime: _Runtime, policy: SandboxPolicy) -> str:
    from fermix_core.config.models import SandboxConfig
    from fermix_core.sandbox import approval

    def approve() -> SandboxConfig:
        state = approval.approve_current(runtime.home)
        return SandboxConfig.model_validate(state.current)

    try:
        section = await anyio.to_thread.run_sync(approve)
    except Exception as exc:
        return f"Not applied: [sandbox] in config.toml does not validate ({exc})."
    workspace = section.workspace_root or Path(runtime.home.path) / "workspace"
    live = runtime.swap(
        policy.evolve(
            mode=section.mode,
            workspace=Path(workspace),
            allowed_roots=tuple(section.allowed_roots),
            command_profile=section.command_profile,
            env_allow=tuple(section.env.allow),
            env_deny=tuple(section.env.deny),
            env_set=dict(section.env.set),
            confinement=section.confinement,
            network=section.network,
        )
    )
    when = "It applies from the next tool call." if live else "Restart Fermix to apply it."
    return f"Done: the [sandbox] in config.toml is approved. {when}"


def _show(runtime: _Runtime) -> str:
    policy = runtime.policy
    if policy is None:
        return (
            "The sandbox is not running in this process. `fermix sandbox show` in a terminal "
            "prints the configured policy."
        )
    info = policy.describe()
    grants = ", ".join(info["allowed_roots"]) or "none"
    lines = []
    if runtime.home is not None:
        from fermix_core.sandbox import approval

        state = approval.check(runtime.home)
        if state.pending:
            lines.append(
                "NOT APPLIED — config.toml's [sandbox] was changed outside Fermix: "
                + "; ".join(state.changes())
                + ". /sandbox approve applies it (after /confirm)."
            )
    lines += [
        f"Sandbox: {info['mode']} mode, command profile {info['command_profile']}.",
        f"Workspace: {info['workspace']}",
        f"Granted folders: {grants}",
        f"Commands: {info['confinement']['detail']}"
        + (f" (to fix: {info['confinement']['fix']})" if info["confinement"]["fix"] else ""),
    ]
    for ignored in info["ignored_roots"]:
        lines.append(f"Ignored grant: {ignored['path']} ({ignored['reason']})")
    if info["mode"] == "standard":
        lines.append("Your current folder is admitted for local (CLI) turns when under your home.")
    elif info["mode"] == "open":
        lines.append(f"All of {info['os_home']} is admitted, except protected paths.")
    lines.append(
        f"Protected everywhere: {len(info['protected'])} locations (keys, credentials, browser "
        "profiles, Fermix's own state, OS folders); `fermix sandbox show` lists them."
    )
    env = info["env"]
    env_line = f"Command environment: {', '.join(BASE_ENV)}"
    if env["allow"]:
        env_line += f"; also allowed: {', '.join(env['allow'])}"
    if env["deny"]:
        env_line += f"; withheld: {', '.join(env['deny'])}"
    if env["set"]:
        env_line += f"; set: {', '.join(env['set'])}"
    lines.append(env_line)
    lines.append("Change it with:\n" + usage_text())
    return "\n".join(lines)
