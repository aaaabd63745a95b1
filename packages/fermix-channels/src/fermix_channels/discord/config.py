"""``[fermix_channels.discord]``."""

from __future__ import annotations

import re
from typing import Any

from fermix_core.config import Secret
from pydantic import Field, field_validator

from fermix_channels.config import UserAllowlistConfig

_SNOWFLAKE = re.compile(r"^[0-9]+$")


class DiscordConfig(UserAllowlistConfig):
    """Discord gateway bot. ``bot_user_id`` lets the adapter ignore its own messages."""

    channel = "discord"

    bot_token: Secret | None = Field(
        default=None,
        repr=False,
        description="Bot token from the Discord developer portal (Bot → Token).",
    )
    bot_user_id: str | None = Field(
        default=None,
        description=(
            "The bot's own user id (a numeric snowflake), used to recognise mentions of the "
            "bot and to ignore its own messages."
        ),
    )

    @field_validator("bot_user_id", mode="before")
    @classmethod
    def _bot_user_id(cls, value: Any) -> Any:
        if isinstance(value, int) and not isinstance(value, bool):
            value = str(value)
        if isinstance(value, str):
            value = value.strip() or None
            if value is not None and not _SNOWFLAKE.match(value):
                raise ValueError(
                    f"bot_user_id must be the bot's numeric Discord user id, not {value!r}"
                )
        return value
