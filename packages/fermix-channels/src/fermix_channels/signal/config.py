"""``[fermix_channels.signal]``."""

from __future__ import annotations

import re
from typing import Any

from pydantic import Field, StrictInt, field_validator

from fermix_channels.config import SenderAllowlistConfig

_E164 = re.compile(r"^\+[1-9][0-9]{6,14}$")


class SignalConfig(SenderAllowlistConfig):
    """Signal through ``signal-cli``: the account is an identifier, not a secret."""

    channel = "signal"

    account: str | None = Field(
        default=None,
        description=(
            "The phone number signal-cli is registered with, in international format "
            "(e.g. +15551234567)."
        ),
    )
    cli_path: str | None = Field(
        default=None,
        description="Path to the signal-cli executable; unset looks it up on PATH.",
    )
    config_dir: str | None = Field(
        default=None,
        description=(
            "signal-cli's data directory (its --config option), where the registered "
            "account and received attachments live; unset uses signal-cli's default, "
            "$XDG_DATA_HOME/signal-cli or ~/.local/share/signal-cli."
        ),
    )
    request_timeout: StrictInt = Field(
        default=60,
        ge=1,
        le=3600,
        description=(
            "Seconds signal-cli may take to answer one JSON-RPC request (a send, a health "
            "probe) before it counts as hung: a probe left unanswered this long restarts "
            "signal-cli. Sends with attachments get ten times as long for the upload."
        ),
    )

    @field_validator("account", mode="before")
    @classmethod
    def _account(cls, value: Any) -> Any:
        if isinstance(value, str):
            value = value.strip() or None
            if value is not None and not _E164.match(value):
                raise ValueError(
                    "account must be the phone number signal-cli is registered with, in "
                    f"international format like +15551234567, not {value!r}"
                )
        return value

    @field_validator("cli_path", "config_dir", mode="before")
    @classmethod
    def _cli_path(cls, value: Any) -> Any:
        if isinstance(value, str):
            return value.strip() or None
        return value
