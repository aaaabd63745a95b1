"""Who may talk to a channel, and as whom.

The gateway makes one decision per inbound message before it does any work for it:
operator, guest, or nobody. It is made here, from plain values, so that core never has to
import the channel packages whose config models hold those values. Each channel's policy is
built once at boot from its ``[fermix_channels.<name>]`` section (duck-typed: a channel
config model or a plain mapping) and is immutable afterwards — a config change needs a
restart, like every other channel setting.

Rules, in the order they are applied:

* a local surface (``cli``, ``acp``) authorizes by where it runs: every caller is the operator;
* the owner — ``owner_user_id``, or the only id in the allowlist when no owner is set — is
  the operator;
* any other allowlisted id is a guest: allowlisting authorizes chat and never promotes;
* anyone else is nobody and is dropped without a reply.

``command_allowlist`` does not authorize ingress on its own: it opens owner-only slash
commands to senders who are already allowed to talk, and never the sandbox mutations.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from fermix_core.tool import Trust

__all__ = ["TrustPolicy", "TrustPolicyError"]

#: Keys a channel section may use for its ingress allowlist, platform by platform.
_ALLOWLIST_KEYS = ("allowed_user_ids", "allowed_sender_ids", "allowed_ids")


class TrustPolicyError(ValueError):
    """A channel section's trust keys could not be read (wrong shape, not just empty)."""


def _ids(value: Any, what: str) -> tuple[str, ...]:
    """Normalize ids to stripped strings, dropping blanks and duplicates (first one kept).

    Platforms and TOML disagree about whether an id is a number or a string; comparing a
    sender against the allowlist must not depend on which one arrived.
    """
    if value is None:
        return ()
    if isinstance(value, str):
        items: Iterable[Any] = value.replace(",", " ").split()
    elif isinstance(value, int) and not isinstance(value, bool):
        items = [value]
    elif isinstance(value, Iterable):
        items = value
    else:
        raise TrustPolicyError(f"{what} must be a list of ids, not {type(value).__name__}")
    out: list[str] = []
    for item in items:
        if isinstance(item, bool) or not isinstance(item, str | int):
            raise TrustPolicyError(
                f"{what} entries must be strings or integers, not {type(item).__name__}"
            )
        text = str(item).strip()
        if text and text not in out:
            out.append(text)
    return tuple(out)


def _one_id(value: Any, what: str) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise TrustPolicyError(f"{what} must be a string or an integer id")
    return str(value).strip() or None


@dataclass(frozen=True)
class TrustPolicy:
    """One channel's authorization rules, as plain values.

    ``owner_id`` is the explicit owner; :attr:`effective_owner` adds the single-allowlist
    inference. ``channel`` only names the config section in messages to the operator.
    """

    owner_id: str | None = None
    allowed_ids: tuple[str, ...] = ()
    command_allowlist: tuple[str, ...] = ()
    local: bool = False
    channel: str | None = None
    _allowed: frozenset[str] = field(init=False, repr=False, compare=False)
    _commands: frozenset[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "owner_id", _one_id(self.owner_id, "owner_user_id"))
        object.__setattr__(self, "allowed_ids", _ids(self.allowed_ids, "allowed ids"))
        object.__setattr__(
            self, "command_allowlist", _ids(self.command_allowlist, "command_allowlist")
        )
        object.__setattr__(self, "_allowed", frozenset(self.allowed_ids))
        object.__setattr__(self, "_commands", frozenset(self.command_allowlist))

    # ------------------------------------------------------------------ building

    @classmethod
    def local_surface(cls, channel: str | None = None) -> TrustPolicy:
        """The policy of a local surface: whoever can reach it runs as the operator.

        Only the account running the daemon can open its sockets and there is no network
        path to them, so a sender id would add nothing.
        """
        return cls(local=True, channel=channel)

    @classmethod
    def from_section(
        cls, section: Any, *, local: bool = False, channel: str | None = None
    ) -> TrustPolicy:
        """Build a policy from a channel config model or a plain mapping.

        A model is read through ``effective_owner()``, ``allowed_ids()`` and
        ``command_allowlist`` (the shape of the channel config models); a mapping through
        the raw keys ``owner_user_id``, ``allowed_user_ids``/``allowed_sender_ids`` and
        ``command_allowlist``. ``None`` (no section at all) authorizes nobody remotely.
        """
        if local:
            return cls.local_surface(channel or _channel_of(section))
        if section is None:
            return cls(channel=channel)
        if isinstance(section, Mapping):
            owner = section.get("owner_user_id")
            allowed: Any = ()
            for key in _ALLOWLIST_KEYS:
                if section.get(key):
                    allowed = section[key]
                    break
            commands = section.get("command_allowlist")
            return cls(owner, allowed, commands, channel=channel or section.get("channel"))
        effective = getattr(section, "effective_owner", None)
        allowed_fn = getattr(section, "allowed_ids", None)
        if callable(effective) and callable(allowed_fn):
            owner = effective()
            allowed = allowed_fn()
        else:
            owner = getattr(section, "owner_user_id", None)
            allowed = ()
            for key in _ALLOWLIST_KEYS:
                if getattr(section, key, None):
                    allowed = getattr(section, key)
                    break
        commands = getattr(section, "command_allowlist", None)
        return cls(owner, allowed, commands, channel=channel or _channel_of(section))

    # ------------------------------------------------------------------ reading

    @property
    def effective_owner(self) -> str | None:
        """The operator's id: the explicit owner, else the single allowlisted id.

        With several allowlisted ids nobody is promoted: guessing would hand operator
        rights to a guest. Chat still works; owner-only commands need an explicit owner.
        """
        if self.owner_id:
            return self.owner_id
        if len(self.allowed_ids) == 1:
            return self.allowed_ids[0]
        return None

    def authorize(self, sender_id: str | int | None) -> Trust | None:
        """The trust a sender gets on this channel, or ``None`` to drop the message."""
        if self.local:
            return Trust.OPERATOR
        if sender_id is None or isinstance(sender_id, bool):
            return None
        sender = str(sender_id).strip()
        if not sender:
            return None
        if sender == self.effective_owner:
            return Trust.OPERATOR
        if sender in self._allowed:
            return Trust.GUEST
        return None

    def in_command_allowlist(self, sender_id: str | None) -> bool:
        return sender_id is not None and str(sender_id).strip() in self._commands

    def may_run_command(
        self, sender_id: str | None, trust: Trust, *, operator_only: bool, sandbox_mutation: bool
    ) -> bool:
        """Whether an already-authorized sender may run a command with this gate.

        ``command_allowlist`` opens owner-only commands to guests, except sandbox mutations:
        those decide what the agent may touch on this machine and stay with the operator.
        """
        if trust is Trust.OPERATOR:
            return True
        if sandbox_mutation:
            return False
        if not operator_only:
            return True
        return self.in_command_allowlist(sender_id)

    def startup_problem(self) -> str | None:
        """Why a remote channel would serve nobody, or ``None`` when someone is authorized.

        The runtime refuses to start such a channel's adapter; a webhook channel keeps its
        route and every sender is denied by :meth:`authorize`.
        """
        if self.local or self.owner_id or self.allowed_ids:
            return None
        name = self.channel or "<name>"
        return (
            f"[fermix_channels.{name}] sets neither owner_user_id nor an allowlist, so nobody "
            f"may use it; set owner_user_id to your own {name} id (send /whoami from that "
            "account once it is allowed, or read it from the platform) in config.toml, or run "
            "`fermix setup --reconfigure`"
        )

    def describe_owner_gap(self) -> str | None:
        """What to configure when the channel has no owner, for refusal replies."""
        if self.local or self.effective_owner:
            return None
        name = self.channel or "<name>"
        return (
            f"this channel has no owner configured: send /whoami from your own account and "
            f"set owner_user_id in [fermix_channels.{name}] (or run "
            "`fermix setup --reconfigure`)"
        )


def _channel_of(section: Any) -> str | None:
    name = getattr(section, "channel", None)
    return name if isinstance(name, str) and name else None


class LazyPolicies(Mapping[str, TrustPolicy]):
    """Policies by channel name, each built by *build* the first time it is looked up.

    Building a channel's policy validates that channel's config section (importing its
    config model), which a runtime that only ever sees one channel — a one-off ``fermix
    ask`` on ``cli`` — should not pay for every registered channel. *known* policies are
    used as given; *names* are the channels *build* can answer for.
    """

    def __init__(
        self,
        known: Mapping[str, TrustPolicy],
        names: Iterable[str],
        build: Any,
    ) -> None:
        self._built: dict[str, TrustPolicy] = dict(known)
        self._names = [*self._built, *(n for n in names if n not in self._built)]
        self._build = build

    def __getitem__(self, name: str) -> TrustPolicy:
        policy = self._built.get(name)
        if policy is None:
            if name not in self._names:
                raise KeyError(name)
            policy = self._built[name] = self._build(name)
        return policy

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)
