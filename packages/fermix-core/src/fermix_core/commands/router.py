"""Slash-command parsing, role gates and dispatch.

Commands run in the gateway, before the agent: they must answer even when the model is
down, and ``/stop`` must not wait behind the turn it is meant to stop. The router is built
from the :class:`CommandSpec` records plugins register — core's own commands included —
so a third-party command is parsed, gated, timed and reported exactly like ``/help``.

Parsing is forgiving where platforms differ (``/Help``, ``/help@my_bot``) and strict where
a false positive would hurt: only ``/name`` followed by whitespace or the end of the text
is a command, and an unknown name is not an error but ordinary text for the agent, so
"/usr/bin/python crashed" reaches the model untouched.
"""

from __future__ import annotations

import inspect
import logging
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fermix_core.channel import ConversationKey, InboundMessage
from fermix_core.gateway.reply import try_reply_text
from fermix_core.gateway.trust import TrustPolicy
from fermix_core.gateway.types import CommandServices, ReplyPort
from fermix_core.specs import CommandSpec, Role, resolve_ref
from fermix_core.tool import Trust

__all__ = [
    "CommandConflictError",
    "CommandContext",
    "CommandResult",
    "CommandRouter",
    "HelpEntry",
    "ParsedCommand",
]

log = logging.getLogger("fermix.commands")

_COMMAND = re.compile(
    r"^\s*/(?P<name>[A-Za-z][A-Za-z0-9_-]*)(?:@(?P<bot>[A-Za-z0-9_.-]+))?(?:\s+(?P<args>.*))?$",
    re.DOTALL,
)

#: ``(name, help, role)`` as ``/help`` lists it; aliases are folded into the help text.
HelpEntry = tuple[str, str, Role]

Handler = Callable[["CommandContext"], Any]


class CommandConflictError(ValueError):
    """Two command specs claim one name or alias."""


@dataclass(frozen=True)
class ParsedCommand:
    """A recognized command in a message: the spec, how it was typed, and its arguments."""

    spec: CommandSpec
    invoked_as: str
    args: str

    @property
    def name(self) -> str:
        return self.spec.name


@dataclass
class CommandContext:
    """Everything a handler may use; handlers never reach for runtime globals.

    ``registry_help`` is already narrowed to the commands this sender may run.
    ``invoked_as`` is the name or alias as typed (lowercased), so one handler can serve
    ``/sandbox`` and its aliases. ``cwd`` is only set for local operator callers.
    """

    message: InboundMessage
    trust: Trust
    args: str
    reply: ReplyPort
    services: CommandServices
    registry_help: list[HelpEntry] = field(default_factory=list)
    invoked_as: str = ""
    name: str = ""
    policy: TrustPolicy | None = None
    cwd: Path | None = None

    @property
    def key(self) -> ConversationKey:
        return self.message.conversation_key

    @property
    def is_operator(self) -> bool:
        return self.trust is Trust.OPERATOR

    async def say(self, text: str) -> bool:
        """Send an extra message to the sender's chat now (before the handler returns)."""
        return await try_reply_text(self.reply, self.message, text)


@dataclass(frozen=True)
class CommandResult:
    """What dispatch did: ``ran`` (the handler returned), ``refused`` (role gate), or
    ``error`` (the handler raised or could not be imported; a short, secret-free label)."""

    name: str
    ran: bool = False
    refused: bool = False
    error: str | None = None
    reply: str | None = None


class CommandRouter:
    """Finds, gates and runs slash commands from a set of :class:`CommandSpec` records."""

    def __init__(self, specs: Iterable[CommandSpec] = ()) -> None:
        self._specs: dict[str, CommandSpec] = {}
        self._index: dict[str, CommandSpec] = {}
        self._handlers: dict[str, Handler] = {}
        for spec in specs:
            self.add(spec)

    @classmethod
    def from_registry(cls, registry: Any) -> CommandRouter:
        """The router over every command the loaded plugins registered."""
        return cls(registry.typed(CommandSpec).values())

    def add(self, spec: CommandSpec) -> None:
        if not isinstance(spec, CommandSpec):
            raise TypeError(f"expected a CommandSpec, not {type(spec).__name__}")
        problems = spec.problems()
        if problems:
            raise ValueError(f"command {spec.name!r}: {'; '.join(problems)}")
        for name in (spec.name, *spec.aliases):
            taken = self._index.get(name)
            if taken is not None:
                raise CommandConflictError(
                    f"/{name} is claimed by both /{taken.name} and /{spec.name}; "
                    "disable one of the plugins that register them"
                )
        self._specs[spec.name] = spec
        for name in (spec.name, *spec.aliases):
            self._index[name] = spec

    @property
    def specs(self) -> list[CommandSpec]:
        return list(self._specs.values())

    def get(self, name: str) -> CommandSpec | None:
        return self._index.get(name.lower())

    # ------------------------------------------------------------------ parsing

    def parse(self, text: str) -> ParsedCommand | None:
        """The command *text* invokes, or ``None`` when it is ordinary text for the agent.

        A ``@botname`` suffix (how group chats address one bot) is tolerated and ignored.
        """
        if not text or not text.lstrip().startswith("/"):
            return None
        match = _COMMAND.match(text)
        if match is None:
            return None
        invoked = match["name"].lower()
        spec = self._index.get(invoked)
        if spec is None:
            return None
        return ParsedCommand(spec=spec, invoked_as=invoked, args=(match["args"] or "").strip())

    # ------------------------------------------------------------------ gating

    @staticmethod
    def allowed(
        spec: CommandSpec, *, trust: Trust, sender_id: str | None, policy: TrustPolicy | None
    ) -> bool:
        """The role gate: ``Role.ANY`` for any authorized sender, the operator otherwise.

        ``command_allowlist`` opens owner-only commands to listed guests; sandbox mutations
        never open.
        """
        if trust is Trust.OPERATOR:
            return True
        if spec.sandbox_mutation:
            return False
        if spec.role is Role.ANY:
            return True
        if policy is None:
            return False
        return policy.may_run_command(
            sender_id, trust, operator_only=True, sandbox_mutation=spec.sandbox_mutation
        )

    def help_entries(
        self, *, trust: Trust, sender_id: str | None, policy: TrustPolicy | None
    ) -> list[HelpEntry]:
        """The commands this sender may run, in registration order."""
        entries: list[HelpEntry] = []
        for spec in self._specs.values():
            if not self.allowed(spec, trust=trust, sender_id=sender_id, policy=policy):
                continue
            text = spec.help
            if spec.aliases:
                aliases = ", ".join(f"/{alias}" for alias in spec.aliases)
                text = f"{text} (also {aliases})"
            entries.append((spec.name, text, spec.role))
        return entries

    # ------------------------------------------------------------------ dispatch

    def _handler(self, spec: CommandSpec) -> Handler:
        handler = self._handlers.get(spec.name)
        if handler is None:
            assert spec.handler is not None
            handler = resolve_ref(spec.handler)
            if not callable(handler):
                raise TypeError(f"handler of /{spec.name} is not callable")
            self._handlers[spec.name] = handler
        return handler

    async def dispatch(
        self,
        parsed: ParsedCommand,
        *,
        message: InboundMessage,
        trust: Trust,
        reply: ReplyPort,
        services: CommandServices,
        policy: TrustPolicy | None = None,
        emit: Callable[..., object] | None = None,
        cwd: Path | None = None,
    ) -> CommandResult:
        """Gate and run *parsed* for *message*, sending the handler's answer back.

        Never raises for a handler's failure: the sender gets a short note and the log
        gets the traceback. Telemetry: ``command.received``, then ``command.unauthorized``
        or ``command.dispatch`` (with ``duration_ms`` and ``ok``).
        """
        spec = parsed.spec
        meta = {"command": spec.name, "invoked_as": parsed.invoked_as, "channel": message.channel}
        _emit(emit, "command.received", **meta, trust=str(trust))
        if not self.allowed(spec, trust=trust, sender_id=message.sender_id, policy=policy):
            reason = "sandbox_mutation" if spec.sandbox_mutation else "operator_only"
            _emit(emit, "command.unauthorized", **meta, reason=reason)
            text = _refusal(parsed, policy)
            await try_reply_text(reply, message, text)
            return CommandResult(spec.name, refused=True, reply=text)

        ctx = CommandContext(
            message=message,
            trust=trust,
            args=parsed.args,
            reply=reply,
            services=services,
            registry_help=self.help_entries(
                trust=trust, sender_id=message.sender_id, policy=policy
            ),
            invoked_as=parsed.invoked_as,
            name=spec.name,
            policy=policy,
            cwd=cwd,
        )
        started = time.perf_counter()
        error: str | None = None
        text: str | None = None
        try:
            handler = self._handler(spec)
            outcome = handler(ctx)
            if inspect.isawaitable(outcome):
                outcome = await outcome
            if outcome is not None and not isinstance(outcome, str):
                raise TypeError(
                    f"handler of /{spec.name} returned {type(outcome).__name__}, "
                    "expected str or None"
                )
            text = outcome
        except ImportError as exc:
            error = type(exc).__name__
            log.error("/%s is unavailable: %s", spec.name, exc)
            text = (
                f"/{parsed.invoked_as} is unavailable: the plugin that provides it failed to "
                "load. `fermix plugins list` shows why."
            )
        except Exception as exc:
            error = type(exc).__name__
            log.exception("/%s failed", spec.name)
            text = (
                f"/{parsed.invoked_as} failed ({error}). The details are in the log: "
                "run `fermix logs`."
            )
        duration_ms = (time.perf_counter() - started) * 1000.0
        _emit(emit, "command.dispatch", **meta, duration_ms=duration_ms, ok=error is None)
        if text and text.strip():
            await try_reply_text(reply, message, text)
        return CommandResult(spec.name, ran=error is None, error=error, reply=text)


def _refusal(parsed: ParsedCommand, policy: TrustPolicy | None) -> str:
    shown = f"/{parsed.invoked_as}"
    if parsed.spec.sandbox_mutation:
        return (
            f"{shown} changes what the agent may touch on this machine, so only the owner "
            "can run it."
        )
    gap = policy.describe_owner_gap() if policy is not None else None
    if gap is not None:
        return f"{shown} is owner-only, and {gap}."
    return (
        f"{shown} is owner-only. The owner can let you run it by adding your id "
        "(see /whoami) to command_allowlist."
    )


def _emit(emit: Callable[..., object] | None, name: str, **data: Any) -> None:
    if emit is None:
        return
    try:
        emit(name, **data)
    except Exception:
        log.exception("telemetry emit of %s failed", name)
