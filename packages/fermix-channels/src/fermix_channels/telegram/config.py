"""``[fermix_channels.telegram]``."""

from __future__ import annotations

from fermix_core.config import Secret
from pydantic import Field

from fermix_channels.config import AlbumDebounceMs, UserAllowlistConfig


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
