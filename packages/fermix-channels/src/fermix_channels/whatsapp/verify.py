"""WhatsApp webhook authenticity: the ``X-Hub-Signature-256`` HMAC and the verify-token GET.

Meta signs every POST with ``sha256=<hex HMAC-SHA256(app secret, raw body)>``. The check
runs over the exact bytes received, before anything is parsed, and compares in constant
time. The subscription handshake (``GET`` with ``hub.mode=subscribe``, ``hub.verify_token``
and ``hub.challenge``) echoes the challenge only when the token matches, also compared in
constant time.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping

__all__ = ["SIGNATURE_HEADER", "SignatureError", "challenge_answer", "sign", "verify_signature"]

SIGNATURE_HEADER = "x-hub-signature-256"
_PREFIX = "sha256="


class SignatureError(Exception):
    """The request is not signed by the app secret. ``missing`` when there was no header."""

    def __init__(self, message: str, *, missing: bool = False) -> None:
        super().__init__(message)
        self.missing = missing


def sign(app_secret: str, body: bytes) -> str:
    """The header value Meta sends for *body* (also what tests sign with)."""
    digest = hmac.new(app_secret.encode("utf-8"), body, hashlib.sha256).hexdigest()
    return _PREFIX + digest


def verify_signature(app_secret: str, headers: Mapping[str, str], body: bytes) -> None:
    """Raise :class:`SignatureError` unless *body* carries a valid signature."""
    header = headers.get(SIGNATURE_HEADER)
    if not header:
        raise SignatureError("no X-Hub-Signature-256 header", missing=True)
    header = header.strip()
    if not header.isascii() or not header.startswith(_PREFIX) or len(header) != len(_PREFIX) + 64:
        raise SignatureError("X-Hub-Signature-256 is not of the form sha256=<64 hex digits>")
    expected = sign(app_secret, body)
    if not hmac.compare_digest(expected.encode("ascii"), header.lower().encode("ascii")):
        raise SignatureError("X-Hub-Signature-256 does not match the body")


def challenge_answer(verify_token: str, query: Mapping[str, str]) -> str | None:
    """The challenge to echo for a valid subscription handshake, else ``None``."""
    if query.get("hub.mode") != "subscribe":
        return None
    offered = query.get("hub.verify_token") or ""
    if not hmac.compare_digest(offered.encode("utf-8"), verify_token.encode("utf-8")):
        return None
    challenge = query.get("hub.challenge")
    if not challenge or len(challenge) > 256 or not challenge.isprintable():
        return None
    return challenge
