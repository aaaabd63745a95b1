"""``[fermix_channels.signal]``."""

from __future__ import annotations

import re
from typing import Any

from pydantic import Field, field_validator

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

    @field_validator("cli_path", mode="before")
    @classmethod
    def _cli_path(cls, value: Any) -> Any:
        if isinstance(value, str):
            return value.strip() or None
        return value
