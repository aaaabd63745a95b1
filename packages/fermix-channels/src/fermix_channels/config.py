"""Shared shape of a ``[fermix_channels.<name>]`` section.

Every remote channel (Telegram, WhatsApp, Slack, Discord, Signal) answers the same three
questions in its section — is it on, how does it stream, and who may talk to it — so the
keys for those live here once. The per-channel modules add only credentials and
platform-specific knobs. Unknown keys fail config load: a misspelt ``allowed_user_id``
silently ignored would leave a channel serving no one, or the wrong people.

Ids are kept as strings whatever the platform calls them: TOML may hold a Telegram id as an
integer and an environment overlay (``TELEGRAM_ALLOWED_USER_IDS=1,2``) arrives as one string,
and comparing a sender against an allowlist must not depend on which of those it came from.

This module imports pydantic; registration modules never import it, they name the config
models by import path instead.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt, field_validator

StreamingMode = Literal["off", "draft", "block"]
STREAMING_MODES: tuple[str, ...] = ("off", "draft", "block")

_SPLIT = re.compile(r"[,\s]+")
_BAD_IN_ID = re.compile(r"[,\s]")


def _one_id(value: Any, key: str) -> str | None:
    """Normalize one id; ``None`` for a blank entry (a trailing comma, an empty string)."""
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise ValueError(f"{key}: ids must be strings or integers, not {type(value).__name__}")
    text = str(value).strip()
    if not text:
        return None
    if _BAD_IN_ID.search(text):
        raise ValueError(
            f"{key} entry {text!r} contains a comma or whitespace; "
            'write one id per list entry, e.g. ["123", "456"]'
        )
    return text


def parse_ids(value: Any, key: str) -> list[str]:
    """Accept a list of ids, or one string of ids separated by commas or whitespace.

    The string form is what an environment overlay delivers. Duplicates are dropped, first
    occurrence kept, so the list reads back the way the operator wrote it.
    """
    if value is None:
        return []
    if isinstance(value, str):
        items: list[Any] = [part for part in _SPLIT.split(value) if part]
    elif isinstance(value, int) and not isinstance(value, bool):
        items = [value]
    elif isinstance(value, list | tuple):
        items = list(value)
    else:
        raise ValueError(f"{key} must be a list of ids, not {type(value).__name__}")
    ids: list[str] = []
    for item in items:
        normalized = _one_id(item, key)
        if normalized is not None and normalized not in ids:
            ids.append(normalized)
    return ids


def parse_single_id(value: Any, key: str) -> str | None:
    if value is None:
        return None
    return _one_id(value, key)


class ChannelConfig(BaseModel):
    """Keys every channel section has: whether the channel runs."""

    # Inputs stay out of validation errors: a token pasted under a misspelt key would
    # otherwise be echoed into the log by the "unknown key" error.
    model_config = ConfigDict(
        extra="forbid", validate_assignment=True, hide_input_in_errors=True, defer_build=True
    )

    #: Channel name, i.e. the ``<name>`` in ``[fermix_channels.<name>]``.
    channel: ClassVar[str] = ""

    enabled: bool = Field(
        default=False,
        description=(
            "Run this channel. Enablement decides both readiness reporting and which "
            "long-running client processes are supervised."
        ),
    )


class RemoteChannelConfig(ChannelConfig):
    """A chat channel reached over the network, which must know who may talk to it.

    Subclasses add the allowlist field under the name the platform's environment variable
    uses (``allowed_user_ids`` or ``allowed_sender_ids``) and set ``allowlist_key`` to it.
    """

    allowlist_key: ClassVar[str]

    streaming: StreamingMode | None = Field(
        default=None,
        description=(
            'Live streaming of replies: "off" (final message only), "draft" (one message '
            'edited in place; needs a channel that can edit its messages) or "block" (each '
            "completed thought as its own message). Unset derives it from the channel: "
            '"draft" where the channel can edit messages, "block" elsewhere.'
        ),
    )
    owner_user_id: str | None = Field(
        default=None,
        description=(
            "The operator's platform id on this channel: full tool surface and owner-only "
            "slash commands. Send /whoami from that account to read it. May be left unset "
            "when the allowlist holds exactly one id, which is then the owner."
        ),
    )
    command_allowlist: list[str] = Field(
        default_factory=list,
        description=(
            "Ids of non-owner senders who may also run owner-only slash commands (they stay "
            "guests otherwise). Sandbox mutations (/grant, /revoke, /confirm) stay "
            "owner-only whatever this list says."
        ),
    )

    @field_validator("streaming", mode="before")
    @classmethod
    def _check_streaming(cls, value: Any) -> Any:
        if value is None or value in STREAMING_MODES:
            return value
        raise ValueError(
            f'streaming must be "off", "draft" or "block" (or left unset to derive it from '
            f"the channel), not {value!r}"
        )

    @field_validator("owner_user_id", mode="before")
    @classmethod
    def _owner(cls, value: Any) -> str | None:
        return parse_single_id(value, "owner_user_id")

    @field_validator("command_allowlist", mode="before")
    @classmethod
    def _command_allowlist(cls, value: Any) -> list[str]:
        return parse_ids(value, "command_allowlist")

    # ------------------------------------------------------------------ derived trust

    def allowed_ids(self) -> list[str]:
        """The ingress allowlist, whatever this channel calls it."""
        return list(getattr(self, self.allowlist_key))

    def effective_owner(self) -> str | None:
        """The owner: ``owner_user_id``, else the single allowlisted id, else ``None``.

        A single allowlist entry can only be the operator's own account, so it is promoted;
        with several allowed ids nobody is, because guessing would hand operator rights to a
        guest. Such a channel still chats, but owner-only commands need an explicit
        ``owner_user_id`` (or ``command_allowlist``). Computed on each call rather than at
        validation so it stays right after ``model_copy(update=...)``.
        """
        if self.owner_user_id:
            return self.owner_user_id
        allowed = self.allowed_ids()
        return allowed[0] if len(allowed) == 1 else None

    def trust_gap(self) -> str | None:
        """Why an enabled channel would serve nobody, or ``None`` when someone is authorized.

        The channel refuses to start in that state rather than answering strangers; this is
        the sentence logged and shown by ``fermix doctor``.
        """
        if not self.enabled or self.owner_user_id or self.allowed_ids():
            return None
        return (
            f"[fermix_channels.{self.channel}] is enabled but sets neither owner_user_id nor "
            f"{self.allowlist_key}, so nobody may use it; set owner_user_id to your own "
            f"{self.channel} id (or list ids in {self.allowlist_key}) in config.toml, or run "
            "`fermix setup --reconfigure`"
        )

    def effective_streaming(self, *, supports_draft: bool) -> StreamingMode:
        """The streaming mode a turn on this channel actually uses.

        An explicit ``"draft"`` on a channel that cannot edit messages does not fall back to
        ``"block"``: the turn simply does not stream (``fermix doctor`` flags the mismatch).
        """
        if self.streaming is None:
            return "draft" if supports_draft else "block"
        if self.streaming == "draft" and not supports_draft:
            return "off"
        return self.streaming


class UserAllowlistConfig(RemoteChannelConfig):
    """A remote channel whose allowlist holds platform user ids (Telegram, Slack, Discord)."""

    allowlist_key: ClassVar[str] = "allowed_user_ids"

    allowed_user_ids: list[str] = Field(
        default_factory=list,
        description=(
            "Platform user ids allowed to chat (as guests: read-only chat, no operator "
            "promotion). A single entry with no owner_user_id is treated as the owner; "
            "several need an explicit owner_user_id or command_allowlist for owner-only "
            "commands."
        ),
    )

    @field_validator("allowed_user_ids", mode="before")
    @classmethod
    def _allowed_user_ids(cls, value: Any) -> list[str]:
        return parse_ids(value, "allowed_user_ids")


class SenderAllowlistConfig(RemoteChannelConfig):
    """A remote channel whose allowlist holds sender ids, mostly phone numbers (WhatsApp/Signal)."""

    allowlist_key: ClassVar[str] = "allowed_sender_ids"

    allowed_sender_ids: list[str] = Field(
        default_factory=list,
        description=(
            "Sender ids (phone numbers in international format, or platform ids) allowed to "
            "chat, as guests. A single entry with no owner_user_id is treated as the owner; "
            "several need an explicit owner_user_id or command_allowlist for owner-only "
            "commands."
        ),
    )

    @field_validator("allowed_sender_ids", mode="before")
    @classmethod
    def _allowed_sender_ids(cls, value: Any) -> list[str]:
        return parse_ids(value, "allowed_sender_ids")


#: ``album_debounce_ms`` on the channels that deliver each image of an album as its own
#: update (Telegram, WhatsApp); the others get every attachment in one message.
AlbumDebounceMs = Annotated[
    StrictInt,
    Field(
        ge=0,
        description=(
            "Milliseconds to hold an image that arrives as its own update, waiting for the "
            "rest of its album, so a multi-image message becomes one turn. 0 turns merging "
            "off."
        ),
    ),
]
