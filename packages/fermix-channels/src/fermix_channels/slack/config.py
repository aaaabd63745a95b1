"""``[fermix_channels.slack]``."""

from __future__ import annotations

from typing import Any, Literal

from fermix_core.config import Secret
from pydantic import Field, field_validator

from fermix_channels.config import UserAllowlistConfig, parse_single_id

DEFAULT_API_BASE_URL = "https://slack.com/api/"


class SlackConfig(UserAllowlistConfig):
    """Slack: Events API webhooks (or Socket Mode); replies through the Web API."""

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
            "must carry a valid X-Slack-Signature no older than 300 seconds. Needed in "
            '"events" mode only.'
        ),
    )
    app_token: Secret | None = Field(
        default=None,
        repr=False,
        description=(
            "App-level token (xapp-…) with the connections:write scope, from the app's Basic "
            'Information page. Needed in "socket" mode only.'
        ),
    )
    mode: Literal["events", "socket"] = Field(
        default="events",
        description=(
            '"events": Slack POSTs events to /webhook/slack (needs a public HTTPS URL). '
            '"socket": Fermix opens a Socket Mode websocket to Slack with the app-level '
            "token, so no public URL is needed (a laptop behind NAT)."
        ),
    )
    api_base_url: str = Field(
        default=DEFAULT_API_BASE_URL,
        description=(
            "Base URL of Slack's Web API, for a proxy or a test double. Every method is "
            "called as <api_base_url><method>, e.g. …/chat.postMessage."
        ),
    )
    bot_user_id: str | None = Field(
        default=None,
        description=(
            "The bot's own Slack user id (U…), used to recognise mentions and skip its own "
            "messages. Unset asks auth.test once at start."
        ),
    )

    @field_validator("mode", mode="before")
    @classmethod
    def _check_mode(cls, value: Any) -> Any:
        if value in ("events", "socket"):
            return value
        raise ValueError(f'mode must be "events" or "socket", not {value!r}')

    @field_validator("api_base_url")
    @classmethod
    def _check_base_url(cls, value: str) -> str:
        value = value.strip()
        if not value.startswith(("https://", "http://")):
            raise ValueError(
                f"api_base_url must be an http(s) URL such as {DEFAULT_API_BASE_URL!r}, "
                f"not {value!r}"
            )
        return value if value.endswith("/") else value + "/"

    @field_validator("bot_user_id", mode="before")
    @classmethod
    def _bot_user_id(cls, value: Any) -> str | None:
        return parse_single_id(value, "bot_user_id")
