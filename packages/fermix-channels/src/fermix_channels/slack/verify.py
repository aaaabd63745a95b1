"""Slack request signatures: ``X-Slack-Signature`` over ``v0:{timestamp}:{body}``.

Slack signs every Events API request with the app's signing secret: the header
``X-Slack-Signature`` holds ``v0=`` + hex HMAC-SHA256 of ``v0:<X-Slack-Request-Timestamp>:<raw
body>``. A request whose timestamp is more than five minutes away from our clock is refused
whatever its signature, so a captured request cannot be replayed later. The digest is
compared in constant time (:func:`hmac.compare_digest`) over the raw bytes as received.

The recipe is Slack's documented one, a few lines of the standard library; the tests sign
with slack_sdk's own ``SignatureVerifier`` and check both agree, so the two cannot drift.
Importing slack_sdk here would load its generated Web API clients (megabytes of resident
memory) for one HMAC.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Callable, Mapping

__all__ = ["MAX_AGE_SECONDS", "SignatureError", "SlackVerifier"]

#: Slack's own replay window.
MAX_AGE_SECONDS = 300

_TIMESTAMP = "x-slack-request-timestamp"
_SIGNATURE = "x-slack-signature"


class SignatureError(Exception):
    """The request is not provably from Slack; the message names the reason (never a secret)."""


class SlackVerifier:
    """Checks one request's headers and raw body against the signing secret."""

    def __init__(self, signing_secret: str, *, now: Callable[[], float] = time.time) -> None:
        if not signing_secret or not signing_secret.strip():
            raise ValueError("the Slack signing secret is empty")
        self._secret = signing_secret.encode()
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
        base = b"v0:" + timestamp.encode() + b":" + body
        expected = "v0=" + hmac.new(self._secret, base, hashlib.sha256).hexdigest()
        if not hmac.compare_digest(expected.encode(), signature.encode("utf-8", "replace")):
            raise SignatureError(
                "X-Slack-Signature does not match the body; check signing_secret in "
                "[fermix_channels.slack] against the app's Basic Information page"
            )
