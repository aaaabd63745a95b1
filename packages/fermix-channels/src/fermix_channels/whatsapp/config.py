"""``[fermix_channels.whatsapp]``."""

from __future__ import annotations

import re
from typing import Any

from fermix_core.config import Secret
from pydantic import Field, field_validator

from fermix_channels.config import AlbumDebounceMs, SenderAllowlistConfig

_DIGITS = re.compile(r"^[0-9]+$")


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

    album_debounce_ms: AlbumDebounceMs = 3000

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
