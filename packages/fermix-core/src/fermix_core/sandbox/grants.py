"""Changing what the sandbox admits: config edits, confirmation tokens, and grant proposals.

Every change lands in ``[sandbox]`` of ``config.toml`` through the config writer, so
comments survive, the whole file is validated first, and ``config.toml`` stays the one
source of truth. Changes that *widen* access — a grant, letting a host variable through,
setting a variable, the ``extended`` preset — are not applied when asked for in chat: they
become a :class:`PendingChange` with a short token, and only ``/confirm TOKEN`` from the
owner, in the same conversation, within 60 seconds, applies them. Narrowing changes apply
at once.

:func:`propose_grant` is the same path for the agent's ``request_directory_access`` tool:
it refuses to even ask for a folder no grant may name, and otherwise returns the exact
canonical path, the reason and the config diff for the owner to approve.
"""

from __future__ import annotations

import inspect
import logging
import re
import secrets
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fermix_core.sandbox.paths import PathProblem, canonical, true_case
from fermix_core.sandbox.profiles import PROFILES
from fermix_core.tool import ToolContext, ToolError, Trust

if TYPE_CHECKING:  # pragma: no cover
    from fermix_core.home import FermixHome
    from fermix_core.plugins.registry import SpecRegistry
    from fermix_core.sandbox.policy import SandboxPolicy

__all__ = [
    "CONFIRM_TTL",
    "RISKY_KINDS",
    "ConfirmationError",
    "ConfirmationStore",
    "GrantError",
    "PendingChange",
    "Proposal",
    "SandboxEdit",
    "apply_change",
    "canonical_grant",
    "evolve_policy",
    "is_risky",
    "plan_change",
    "propose_grant",
]

log = logging.getLogger("fermix.sandbox.grants")

CONFIRM_TTL = 60.0
#: No 0/O, 1/I/L: the token is read off a phone screen and typed back.
TOKEN_ALPHABET = "ABCDEFGHJKMNPQRSTUVWXYZ23456789"  # noqa: S105 - an alphabet, not a secret
TOKEN_LENGTH = 8
MAX_PENDING_PER_CONVERSATION = 16
RISKY_KINDS = frozenset({"grant", "env_allow", "env_set"})
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_ENV_PATTERN = re.compile(r"^[A-Za-z_*?][A-Za-z0-9_*?]*$")


class GrantError(ToolError):
    """A change the sandbox refuses to make or even propose; the message says why."""


class ConfirmationError(Exception):
    """``/confirm`` could not apply a token. ``reason``: ``not_owner``, ``unknown``,
    ``expired`` or ``wrong_conversation``. Only ``unknown``/``expired`` tokens are gone;
    a refused attempt never consumes a token."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


# --------------------------------------------------------------------------- edits


@dataclass(frozen=True)
class SandboxEdit:
    """One planned change to ``[sandbox]``: the key, its value before and after."""

    kind: str
    payload: Mapping[str, str]
    key: str
    before: Any
    after: Any
    summary: str

    @property
    def risky(self) -> bool:
        return is_risky(self.kind, self.payload)

    def diff(self) -> str:
        """A two-line config diff, the way the owner will find it in ``config.toml``."""
        section, _, leaf = self.key.rpartition(".")
        lines = [f"[{section}]"]
        if self.before is not None:
            lines.append(f"- {leaf} = {_toml(self.before)}")
        if self.after is not None:
            lines.append(f"+ {leaf} = {_toml(self.after)}")
        return "\n".join(lines)


def _toml(value: Any) -> str:
    import tomlkit

    return tomlkit.item(value).as_string()


def is_risky(kind: str, payload: Mapping[str, str]) -> bool:
    """Widening changes need a confirmation; narrowing ones apply at once."""
    if kind == "preset":
        return payload.get("profile") == "extended"
    return kind in RISKY_KINDS


def canonical_grant(policy: SandboxPolicy, raw: str, base: Path | None) -> Path:
    """The folder a grant would store for *raw*, or :class:`GrantError` saying why not.

    Relative paths need a *base* (the caller's directory); chat has none, so it needs an
    absolute path or one starting with ``~``. The folder must exist: a grant is a promise
    about a real directory, and a typo should not silently widen nothing.
    """
    text = raw.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        text = text[1:-1]
    if not text:
        raise GrantError("give the folder to grant, e.g. /sandbox grant ~/projects/app")
    if base is None and not (text.startswith(("/", "~"))):
        raise GrantError(f"{text!r} is relative; give the full path (or one starting with ~)")
    try:
        path = canonical(text, base or policy.workspace, policy.os_home)
    except PathProblem as exc:
        raise GrantError(str(exc)) from None
    if policy.case_insensitive:
        path = true_case(path)
    refusal = policy.grant_refusal(path)
    if refusal is not None:
        raise GrantError(f"{path} cannot be granted: {refusal}.")
    if not path.exists():
        raise GrantError(f"{path} does not exist; create the folder first, then grant it")
    if not path.is_dir():
        raise GrantError(f"{path} is a file; grant the folder that holds it")
    return path


def plan_change(
    policy: SandboxPolicy, kind: str, payload: Mapping[str, str], current: Mapping[str, Any]
) -> SandboxEdit:
    """The edit *kind* makes to the ``[sandbox]`` values in *current* (the file's table).

    *current* is the plain ``[sandbox]`` table as written (``{}`` when absent). Raises
    :class:`GrantError` for an invalid request or one that changes nothing.
    """
    env = current.get("env") or {}
    if kind in ("grant", "revoke"):
        written = current.get("allowed_roots")
        roots = [str(r) for r in written or []]
        target = payload["path"]
        matching = [r for r in roots if _same_folder(policy, r, target)]
        if kind == "grant":
            if matching:
                raise GrantError(f"{target} is already granted")
            after = [*roots, target]
            summary = f"grant the agent access to {target}"
        else:
            if not matching:
                raise GrantError(f"{target} is not a granted folder; /sandbox shows the grants")
            after = [r for r in roots if r not in matching]
            summary = f"take back access to {target}"
        before = roots if written is not None else None
        return SandboxEdit(
            kind, dict(payload), "sandbox.allowed_roots", before, after or None, summary
        )
    if kind in ("env_allow", "env_deny"):
        name = payload["name"]
        if not _ENV_PATTERN.match(name):
            raise GrantError(f"{name!r} is not a variable name or pattern (letters, digits, _, *)")
        which = "allow" if kind == "env_allow" else "deny"
        written = env.get(which)
        values = [str(v) for v in written or []]
        if name in values:
            raise GrantError(f"{name} is already in [sandbox.env] {which}")
        verb = "pass" if which == "allow" else "withhold"
        return SandboxEdit(
            kind,
            dict(payload),
            f"sandbox.env.{which}",
            values if written is not None else None,
            [*values, name],
            f"{verb} host variable {name} {'to' if which == 'allow' else 'from'} commands",
        )
    if kind == "env_set":
        name = payload["name"]
        if not _ENV_NAME.match(name):
            raise GrantError(f"{name!r} is not a variable name (letters, digits and _)")
        table = env.get("set") or {}
        before = table.get(name)
        value = payload["value"]
        if before == value:
            raise GrantError(f"{name} is already set to that value")
        return SandboxEdit(
            kind,
            dict(payload),
            f"sandbox.env.set.{name}",
            before,
            value,
            f"set {name} for every command",
        )
    if kind == "preset":
        profile = payload["profile"]
        if profile not in PROFILES:
            raise GrantError(f"unknown preset {profile!r}; use bare, assistant or extended")
        before = current.get("command_profile")
        if (before or "assistant") == profile:
            raise GrantError(f"the command profile is already {profile}")
        return SandboxEdit(
            kind,
            dict(payload),
            "sandbox.command_profile",
            before,
            profile,
            f"switch the command profile to {profile}",
        )
    raise GrantError(f"unknown sandbox change {kind!r}")


def _same_folder(policy: SandboxPolicy, entry: str, target: str) -> bool:
    if entry == target:
        return True
    try:
        a = canonical(entry, policy.workspace, policy.os_home)
        b = canonical(target, policy.workspace, policy.os_home)
    except PathProblem:
        return False
    return policy._key(a) == policy._key(b)


def read_sandbox_table(home: FermixHome) -> dict[str, Any]:
    """``[sandbox]`` as written in ``config.toml`` (plain data; ``{}`` when absent)."""
    from fermix_core.config.document import plain, read_document

    data = plain(read_document(home.config_file))
    table = data.get("sandbox")
    return dict(table) if isinstance(table, dict) else {}


def apply_change(
    home: FermixHome,
    registry: SpecRegistry,
    policy: SandboxPolicy,
    kind: str,
    payload: Mapping[str, str],
    *,
    unavailable: Any = (),
    environ: Mapping[str, str] | None = None,
) -> SandboxEdit:
    """Plan *kind* against the file as it is now and write it (blocking: run in a thread).

    Re-reading at apply time means a confirmation applies to the file as it is when
    confirmed, not as it was when asked. Raises :class:`GrantError` when there is nothing
    to do and :class:`~fermix_core.config.ConfigError` when the result would be invalid.
    """
    from fermix_core.config.writer import set_value, unset_value

    edit = plan_change(policy, kind, payload, read_sandbox_table(home))
    options = {"unavailable": unavailable, "environ": environ}
    if edit.after is None:
        unset_value(home, edit.key, registry, **options)
    else:
        set_value(home, edit.key, _toml(edit.after), registry, **options)
    if kind in ("env_allow", "env_deny"):
        other = "deny" if kind == "env_allow" else "allow"
        table = read_sandbox_table(home).get("env") or {}
        values = [str(v) for v in table.get(other) or []]
        if payload["name"] in values:
            rest = [v for v in values if v != payload["name"]]
            key = f"sandbox.env.{other}"
            if rest:
                set_value(home, key, _toml(rest), registry, **options)
            else:
                unset_value(home, key, registry, **options)
    log.info("sandbox: %s", edit.summary)
    return edit


def evolve_policy(policy: SandboxPolicy, kind: str, payload: Mapping[str, str]) -> SandboxPolicy:
    """The running policy with an applied change, so it takes effect without a restart."""
    if kind == "grant":
        return policy.evolve(allowed_roots=(*policy.allowed_roots, Path(payload["path"])))
    if kind == "revoke":
        gone = payload["path"]
        kept = tuple(p for p in policy.allowed_roots if not _same_folder(policy, str(p), gone))
        return policy.evolve(allowed_roots=kept)
    if kind == "env_allow":
        deny = tuple(v for v in policy.env_deny if v != payload["name"])
        return policy.evolve(env_allow=(*policy.env_allow, payload["name"]), env_deny=deny)
    if kind == "env_deny":
        allow = tuple(v for v in policy.env_allow if v != payload["name"])
        return policy.evolve(env_deny=(*policy.env_deny, payload["name"]), env_allow=allow)
    if kind == "env_set":
        return policy.evolve(env_set={**policy.env_set, payload["name"]: payload["value"]})
    if kind == "preset":
        return policy.evolve(command_profile=payload["profile"])
    return policy


# --------------------------------------------------------------------------- confirmations


@dataclass(frozen=True)
class PendingChange:
    """A change waiting for ``/confirm TOKEN``; ``context`` is opaque runtime data (the
    request to resume after a grant, for example)."""

    token: str
    kind: str
    payload: Mapping[str, str]
    conversation_key: tuple[Any, ...]
    created: float
    expires: float
    summary: str
    diff: str
    reason: str = ""
    context: Mapping[str, Any] = field(default_factory=dict)


Listener = Callable[[PendingChange], Any]


class ConfirmationStore:
    """Pending confirmations of one runtime: single-use, conversation-bound, owner-only,
    expiring after :data:`CONFIRM_TTL` seconds of the injectable ``clock``.

    Thread-safe, because the CLI's in-process turn and the daemon's command handlers may
    share it. ``listeners`` are called (and awaited when they return an awaitable) after a
    confirmed change is applied — the runtime resumes the original request there.
    """

    def __init__(
        self,
        *,
        ttl: float = CONFIRM_TTL,
        clock: Callable[[], float] = time.monotonic,
        max_pending: int = MAX_PENDING_PER_CONVERSATION,
    ) -> None:
        self.ttl = ttl
        self.clock = clock
        self.max_pending = max_pending
        self.listeners: list[Listener] = []
        self._pending: dict[str, PendingChange] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        with self._lock:
            self._purge()
            return len(self._pending)

    def issue(
        self,
        kind: str,
        payload: Mapping[str, str],
        *,
        conversation_key: tuple[Any, ...],
        summary: str,
        diff: str,
        reason: str = "",
        context: Mapping[str, Any] | None = None,
    ) -> PendingChange:
        """Hold a change for confirmation and return it with its fresh token.

        A conversation holds at most ``max_pending`` changes; the oldest is dropped first,
        so a model asking in a loop cannot grow the store.
        """
        key = tuple(conversation_key)
        with self._lock:
            self._purge()
            mine = [p for p in self._pending.values() if p.conversation_key == key]
            for old in sorted(mine, key=lambda p: p.created)[
                : max(0, len(mine) - self.max_pending + 1)
            ]:
                del self._pending[old.token]
            token = self._new_token()
            now = self.clock()
            pending = PendingChange(
                token=token,
                kind=kind,
                payload=dict(payload),
                conversation_key=key,
                created=now,
                expires=now + self.ttl,
                summary=summary,
                diff=diff,
                reason=reason,
                context=dict(context or {}),
            )
            self._pending[token] = pending
            return pending

    def take(self, token: str, *, conversation_key: tuple[Any, ...], trust: Trust) -> PendingChange:
        """The pending change for *token*, removed so it cannot be applied twice.

        Refusals (a guest, another conversation) leave the token in place: a stranger
        guessing or replaying a token must not be able to burn the owner's confirmation.
        """
        if trust is not Trust.OPERATOR:
            raise ConfirmationError(
                "not_owner", "only the owner can confirm sandbox changes; nothing was applied"
            )
        wanted = normalize_token(token)
        with self._lock:
            self._purge(keep=wanted)
            pending = self._pending.get(wanted)
            if pending is None:
                raise ConfirmationError(
                    "unknown",
                    "no pending change has that token — it may have been used already or "
                    "have expired; ask for the change again",
                )
            if self.clock() >= pending.expires:
                del self._pending[wanted]
                raise ConfirmationError(
                    "expired",
                    f"that confirmation expired ({self.ttl:g} s); ask for the change again",
                )
            if pending.conversation_key != tuple(conversation_key):
                raise ConfirmationError(
                    "wrong_conversation",
                    "that token belongs to another conversation; confirm it there",
                )
            del self._pending[wanted]
            return pending

    def pending(self, conversation_key: tuple[Any, ...]) -> list[PendingChange]:
        key = tuple(conversation_key)
        with self._lock:
            self._purge()
            return [p for p in self._pending.values() if p.conversation_key == key]

    def discard(self, token: str) -> bool:
        with self._lock:
            return self._pending.pop(normalize_token(token), None) is not None

    async def notify_applied(self, pending: PendingChange) -> None:
        """Run the listeners; one failing never stops the others or the reply."""
        for listener in list(self.listeners):
            try:
                result = listener(pending)
                if inspect.isawaitable(result):
                    await result
            except Exception:
                log.exception("a confirmation listener failed")

    def _purge(self, keep: str | None = None) -> None:
        now = self.clock()
        for token in [t for t, p in self._pending.items() if p.expires <= now and t != keep]:
            del self._pending[token]

    def _new_token(self) -> str:
        while True:
            token = "".join(secrets.choice(TOKEN_ALPHABET) for _ in range(TOKEN_LENGTH))
            if token not in self._pending:
                return token


def normalize_token(token: str) -> str:
    """Tokens are forgiving about case, spaces and dashes (typed on a phone)."""
    return re.sub(r"[\s-]+", "", token or "").upper()


# --------------------------------------------------------------------------- proposals


@dataclass(frozen=True)
class Proposal:
    """What the owner is asked to approve for ``request_directory_access``."""

    token: str
    canonical_path: Path
    reason: str
    diff: str
    expires_in: float = CONFIRM_TTL

    def prompt(self, *, include_token: bool = True) -> str:
        """The owner-facing text. Channels that deliver the token privately (an Approve
        button in a group chat) pass ``include_token=False``."""
        lines = [
            "The agent asks for access to a folder:",
            f"  {self.canonical_path}",
            f"Why: {self.reason}",
            "Change to config.toml:",
            *(f"  {line}" for line in self.diff.splitlines()),
        ]
        if include_token:
            lines.append(f"Approve with /confirm {self.token} (expires in {self.expires_in:g} s).")
        else:
            lines.append(f"Approve with the button below (expires in {self.expires_in:g} s).")
        return "\n".join(lines)


def propose_grant(
    policy: SandboxPolicy,
    path: str | Path,
    reason: str,
    ctx: ToolContext,
    *,
    store: ConfirmationStore | None = None,
) -> Proposal:
    """Hold a grant of *path* for the owner's ``/confirm``, or refuse to ask at all.

    Only an attended operator turn of a main conversation may ask (never a guest, a job, a
    subagent or a background run). Folders no grant may name — ``/``, ``$HOME`` wholesale,
    ``FERMIX_HOME``, ``~/.ssh`` and other protected paths, OS trees — are refused here, so
    the owner is never prompted for something that would be rejected. *store* defaults to
    ``ctx.services["confirmations"]``.
    """
    if ctx.trust is not Trust.OPERATOR or not ctx.attended or ctx.origin != "main":
        raise GrantError(
            "directory access can only be requested in an attended conversation with the "
            "owner; finish the task inside the sandbox or tell the owner which folder is needed"
        )
    if ctx.conversation_key is None:
        raise GrantError("directory access needs a conversation to ask in")
    why = " ".join(str(reason or "").split())
    if not why:
        raise GrantError("say why the task needs this folder (the owner sees the reason)")
    if len(why) > 500:
        why = why[:499] + "…"
    target = canonical_grant(policy, str(path), Path(ctx.cwd) if ctx.local else None)
    if policy.contains(target, ctx):
        raise GrantError(f"{target} is already inside the sandbox; retry the operation")
    holder = store if store is not None else _store_from(ctx)
    roots = [str(p) for p in policy.allowed_roots]
    edit = SandboxEdit(
        "grant",
        {"path": str(target)},
        "sandbox.allowed_roots",
        roots or None,
        [*roots, str(target)],
        f"grant the agent access to {target}",
    )
    pending = holder.issue(
        "grant",
        {"path": str(target)},
        conversation_key=tuple(ctx.conversation_key),
        summary=edit.summary,
        diff=edit.diff(),
        reason=why,
        # The turn runner puts the job to re-run here on chat channels; after /confirm
        # applies the grant, a confirmations listener resubmits it.
        context={"resume": ctx.state["resume"]} if ctx.state.get("resume") is not None else None,
    )
    if policy.tracer is not None:
        try:
            policy.tracer.record(
                "sandbox_event",
                session_id=ctx.session_id or None,
                kind="grant",
                decision="proposed",
                path=str(target),
            )
        except Exception:
            log.debug("sandbox trace failed", exc_info=True)
    return Proposal(pending.token, target, why, pending.diff, holder.ttl)


def _store_from(ctx: ToolContext) -> ConfirmationStore:
    store = ctx.services.get("confirmations") if isinstance(ctx.services, Mapping) else None
    if store is None:
        raise GrantError("directory access approval is not available in this run")
    return store
