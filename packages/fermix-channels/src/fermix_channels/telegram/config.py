"""``[fermix_channels.telegram]``."""

from __future__ import annotations

from fermix_core.config import Secret
from pydantic import Field, StrictInt, field_validator

from fermix_channels.config import AlbumDebounceMs, UserAllowlistConfig

DEFAULT_API_BASE_URL = "https://api.telegram.org"


class TelegramConfig(UserAllowlistConfig):
    """Telegram is the default chat channel, so it is the one enabled out of the box."""

    channel = "telegram"

    enabled: bool = Field(
        default=True,
        description="Run the Telegram bot. On by default; it still needs bot_token and an owner.",
    )
    bot_token: Secret | None = Field(
        default=None,
        repr=False,
        description=(
            "Bot token from @BotFather. Read only from config or the keyring, never from the "
            "environment, so a stray shell variable cannot point two installs at one bot."
        ),
    )
    album_debounce_ms: AlbumDebounceMs = 3000
    api_base_url: str = Field(
        default=DEFAULT_API_BASE_URL,
        description=(
            "Base URL of the Bot API, for a self-hosted Bot API server (telegram-bot-api) or a "
            "test double. Methods are called as <api_base_url>/bot<token>/<method>."
        ),
    )
    poll_timeout: StrictInt = Field(
        default=30,
        ge=1,
        le=50,
        description=(
            "Seconds one getUpdates long poll waits for updates before Telegram answers "
            "empty; longer means fewer idle requests."
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
