"""``[fermix_channels.whatsapp]``."""

from __future__ import annotations

import re
from typing import Any

from fermix_core.config import Secret
from pydantic import Field, field_validator

from fermix_channels.config import AlbumDebounceMs, SenderAllowlistConfig

_DIGITS = re.compile(r"^[0-9]+$")

#: Meta's Graph API, with the version every path is resolved under.
DEFAULT_API_BASE_URL = "https://graph.facebook.com/v21.0"


class WhatsAppConfig(SenderAllowlistConfig):
    """WhatsApp Cloud API: one business phone number, webhooks verified by the app secret."""

    channel = "whatsapp"

    access_token: Secret | None = Field(
        default=None,
        repr=False,
        description="Cloud API access token (a system-user token) used to send replies.",
    )
    phone_number_id: str | None = Field(
        default=None,
        description=(
            "Numeric Phone number ID of the business number, from the app's WhatsApp API "
            "setup page (not the phone number itself)."
        ),
    )
    verify_token: Secret | None = Field(
        default=None,
        repr=False,
        description=(
            "Any string you choose; Meta echoes it in the GET /webhook/whatsapp challenge "
            "when the webhook is registered."
        ),
    )
    app_secret: Secret | None = Field(
        default=None,
        repr=False,
        description=(
            "The Meta app secret; every POST /webhook/whatsapp must carry a valid "
            "X-Hub-Signature-256 HMAC made with it."
        ),
    )

    api_base_url: str = Field(
        default=DEFAULT_API_BASE_URL,
        description=(
            "Base URL of the Graph API including its version, for a proxy or a test double; "
            "replies are posted to <api_base_url>/<phone_number_id>/messages."
        ),
    )

    album_debounce_ms: AlbumDebounceMs = 3000

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

    @field_validator("phone_number_id", mode="before")
    @classmethod
    def _phone_number_id(cls, value: Any) -> Any:
        if isinstance(value, int) and not isinstance(value, bool):
            value = str(value)
        if isinstance(value, str):
            value = value.strip() or None
            if value is not None and not _DIGITS.match(value):
                raise ValueError(
                    f"phone_number_id must be the numeric Phone number ID from the WhatsApp "
                    f"API setup page, not {value!r}"
                )
        return value
