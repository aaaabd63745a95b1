"""Slack request signatures: ``X-Slack-Signature`` over ``v0:{timestamp}:{body}``.

Slack signs every Events API request with the app's signing secret: the header
``X-Slack-Signature`` holds ``v0=`` + hex HMAC-SHA256 of ``v0:<X-Slack-Request-Timestamp>:<raw
body>``. A request whose timestamp is more than five minutes away from our clock is refused
whatever its signature, so a captured request cannot be replayed later. The HMAC and the
constant-time compare are slack_sdk's :class:`~slack_sdk.signature.SignatureVerifier`; this
module adds the checks it folds into one ``False`` (or raises on), so each refusal says what
was wrong.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

from slack_sdk.signature import Clock, SignatureVerifier

__all__ = ["MAX_AGE_SECONDS", "SignatureError", "SlackVerifier"]

#: Slack's own replay window.
MAX_AGE_SECONDS = 300

_TIMESTAMP = "x-slack-request-timestamp"
_SIGNATURE = "x-slack-signature"


class SignatureError(Exception):
    """The request is not provably from Slack; the message names the reason (never a secret)."""


class _FixedClock(Clock):
    """Hands the SDK's verifier the same "now" our own age check used."""

    def __init__(self) -> None:
        self.value = 0.0

    def now(self) -> float:
        return self.value


class SlackVerifier:
    """Checks one request's headers and raw body against the signing secret."""

    def __init__(self, signing_secret: str, *, now: Callable[[], float] = time.time) -> None:
        if not signing_secret or not signing_secret.strip():
            raise ValueError("the Slack signing secret is empty")
        self._clock = _FixedClock()
        self._verifier = SignatureVerifier(signing_secret, clock=self._clock)
        self._now = now

    def verify(self, headers: Mapping[str, str], body: bytes) -> None:
        """Return quietly for a genuine request; raise :class:`SignatureError` otherwise.

        *headers* must have lower-cased names (the ingress delivers them so).
        """
        timestamp = headers.get(_TIMESTAMP)
        signature = headers.get(_SIGNATURE)
        if not timestamp or not signature:
            raise SignatureError(
                "missing X-Slack-Request-Timestamp or X-Slack-Signature header; only Slack "
                "may call this endpoint"
            )
        if not timestamp.isascii() or not timestamp.isdigit() or len(timestamp) > 12:
            raise SignatureError("malformed X-Slack-Request-Timestamp header")
        if not signature.startswith("v0="):
            raise SignatureError("X-Slack-Signature is not a v0 signature")
        now = self._now()
        age = now - int(timestamp)
        if abs(age) > MAX_AGE_SECONDS:
            raise SignatureError(
                f"request timestamp is {abs(age):.0f}s away from this machine's clock (limit "
                f"{MAX_AGE_SECONDS}s): a replay, or a clock that needs syncing"
            )
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError:
            # Slack sends UTF-8 JSON; the SDK's signer cannot even hash anything else.
            raise SignatureError("request body is not UTF-8 text") from None
        self._clock.value = now
        if not self._verifier.is_valid(body=text, timestamp=timestamp, signature=signature):
            raise SignatureError(
                "X-Slack-Signature does not match the body; check signing_secret in "
                "[fermix_channels.slack] against the app's Basic Information page"
            )
