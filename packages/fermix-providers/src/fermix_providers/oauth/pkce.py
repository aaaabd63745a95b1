"""PKCE (RFC 7636) values and the authorization URL built from them.

A public client such as a CLI cannot keep a secret, so the code it receives on the loopback
redirect is worthless without the verifier that only this process holds. ``state`` is the
CSRF guard: a callback that does not echo it was not started by this login.
"""

from __future__ import annotations

import base64
import hashlib
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from urllib.parse import urlencode

__all__ = ["PkcePair", "authorization_url", "challenge_for", "new_state"]

#: RFC 7636 §4.1 bounds on the verifier length.
VERIFIER_MIN = 43
VERIFIER_MAX = 128
_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")


def challenge_for(verifier: str) -> str:
    """The S256 challenge: base64url(SHA-256(verifier)) without padding."""
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


@dataclass(frozen=True)
class PkcePair:
    """A verifier kept by this process and the challenge sent in the authorization URL."""

    verifier: str = field(repr=False)
    challenge: str
    method: str = "S256"

    @classmethod
    def generate(cls, length: int = 64) -> PkcePair:
        """A fresh pair; *length* random bytes give a ``4/3 * length`` character verifier."""
        verifier = secrets.token_urlsafe(length)
        return cls.from_verifier(verifier)

    @classmethod
    def from_verifier(cls, verifier: str) -> PkcePair:
        if not VERIFIER_MIN <= len(verifier) <= VERIFIER_MAX or not set(verifier) <= _UNRESERVED:
            raise ValueError(
                f"a PKCE verifier is {VERIFIER_MIN}-{VERIFIER_MAX} unreserved characters "
                "(A-Z a-z 0-9 - . _ ~)"
            )
        return cls(verifier=verifier, challenge=challenge_for(verifier))


def new_state() -> str:
    """An unguessable value the callback must echo back."""
    return secrets.token_urlsafe(32)


def authorization_url(
    endpoint: str,
    *,
    client_id: str,
    redirect_uri: str,
    scopes: Sequence[str],
    pkce: PkcePair,
    state: str,
    extra: Mapping[str, str] | None = None,
) -> str:
    """The URL the user opens to approve the login (authorization code grant with PKCE)."""
    params = {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": redirect_uri,
        "scope": " ".join(scopes),
        "code_challenge": pkce.challenge,
        "code_challenge_method": pkce.method,
        "state": state,
        **dict(extra or {}),
    }
    separator = "&" if "?" in endpoint else "?"
    return f"{endpoint}{separator}{urlencode(params)}"
