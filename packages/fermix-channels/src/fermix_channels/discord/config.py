"""``[fermix_channels.discord]``."""

from __future__ import annotations

import re
from typing import Any

from fermix_core.config import Secret
from pydantic import Field, field_validator

from fermix_channels.config import UserAllowlistConfig

DEFAULT_API_BASE_URL = "https://discord.com/api/v10"

_SNOWFLAKE = re.compile(r"^[0-9]+$")


class DiscordConfig(UserAllowlistConfig):
    """Discord gateway bot. ``bot_user_id`` lets the adapter ignore its own messages (the
    gateway's READY names the bot too, and wins when the two differ)."""

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

    api_base_url: str = Field(
        default=DEFAULT_API_BASE_URL,
        description=(
            "Base URL of Discord's REST API (a test double or a proxy). The gateway's "
            "websocket URL is not configured: it comes from GET <api_base_url>/gateway/bot, "
            "as on the real API."
        ),
    )

    @field_validator("api_base_url")
    @classmethod
    def _check_base_url(cls, value: str) -> str:
        value = value.strip().rstrip("/")
        if not value.startswith(("https://", "http://")):
            raise ValueError(
                f"api_base_url must be an http(s) URL such as {DEFAULT_API_BASE_URL!r}, "
                f"not {value!r}"
            )
        return value

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
