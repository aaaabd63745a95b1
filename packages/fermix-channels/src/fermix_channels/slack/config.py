"""``[fermix_channels.slack]``."""

from __future__ import annotations

from fermix_core.config import Secret
from pydantic import Field

from fermix_channels.config import UserAllowlistConfig


class SlackConfig(UserAllowlistConfig):
    """Slack Events API: replies with the bot token, requests verified by the signing secret."""

    channel = "slack"

    bot_token: Secret | None = Field(
        default=None,
        repr=False,
        description="Bot User OAuth Token (xoxb-…) from the Slack app's OAuth & Permissions page.",
    )
    signing_secret: Secret | None = Field(
        default=None,
        repr=False,
        description=(
            "Signing secret from the app's Basic Information page; each POST /webhook/slack "
            "must carry a valid X-Slack-Signature no older than 300 seconds."
        ),
    )
