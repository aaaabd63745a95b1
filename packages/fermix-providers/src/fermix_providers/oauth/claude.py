"""The three ways a Claude subscription login reaches Fermix.

Fermix does not run Anthropic's browser login itself. It takes a token the owner already
has: a ``claude setup-token`` value (long-lived, made for headless use, no refresh), Claude
Code's own stored login (refreshable — but see :func:`read_claude_code_login`), or the
``CLAUDE_CODE_OAUTH_TOKEN`` environment variable that Claude Code itself honours.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from fermix_providers.oauth.errors import LoginError
from fermix_providers.oauth.tokens import TokenGrant

__all__ = [
    "CLAUDE_TOKEN_ENV",
    "claude_credentials_path",
    "read_claude_code_login",
    "setup_token_grant",
]

CLAUDE_TOKEN_ENV = "CLAUDE_CODE_OAUTH_TOKEN"  # noqa: S105 - a variable name
#: Claude Code keeps its config (and, outside macOS, its login) here unless
#: ``CLAUDE_CONFIG_DIR`` says otherwise.
CLAUDE_CONFIG_ENV = "CLAUDE_CONFIG_DIR"
_CREDENTIALS_FILE = ".credentials.json"
_OAUTH_KEY = "claudeAiOauth"
#: Prefix of Anthropic API keys, which are not subscription tokens.
_API_KEY_PREFIX = "sk-ant-api"


def claude_credentials_path(
    environ: Mapping[str, str] | None = None, home: Path | None = None
) -> Path:
    """Where Claude Code stores its login on Linux and Windows (macOS uses the Keychain)."""
    env = os.environ if environ is None else environ
    base = env.get(CLAUDE_CONFIG_ENV)
    root = Path(base).expanduser() if base else (home or Path.home()) / ".claude"
    return root / _CREDENTIALS_FILE


def setup_token_grant(value: str, *, source: str = "a setup token") -> TokenGrant:
    """Check a pasted ``claude setup-token`` value and wrap it; it cannot be refreshed."""
    token = value.strip()
    if not token:
        raise LoginError(
            f"{source} is empty; run `claude setup-token` and paste the token it prints"
        )
    if token.startswith(_API_KEY_PREFIX):
        raise LoginError(
            f"{source} is an Anthropic API key, not a subscription token; store API keys with "
            "`fermix setup --provider anthropic --api-key KEY` instead"
        )
    if any(ch.isspace() for ch in token) or len(token) < 20:
        raise LoginError(
            f"{source} does not look like a token (it is short or contains spaces); paste only "
            "the token line `claude setup-token` prints"
        )
    return TokenGrant(access_token=token)


def read_claude_code_login(path: Path, *, now: float) -> tuple[TokenGrant, dict[str, Any]]:
    """Claude Code's stored login as a grant, plus facts worth keeping (plan, scopes).

    Importing copies the refresh token: from then on Fermix and Claude Code each refresh on
    their own, and since the issuer rotates refresh tokens, whichever refreshes second is
    logged out. That is why ``--setup-token`` is the better choice for a daemon.
    """
    hint = (
        "log in with `claude` first, or use --setup-token (on macOS Claude Code keeps its "
        "login in the Keychain, not in a file, so use --setup-token there)"
    )
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise LoginError(f"no Claude Code login was found at {path}; {hint}") from None
    except OSError as exc:
        raise LoginError(f"{path} cannot be read ({exc.strerror}); {hint}") from None
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise LoginError(f"{path} is not valid JSON; {hint}") from None
    entry = data.get(_OAUTH_KEY) if isinstance(data, dict) else None
    if not isinstance(entry, dict):
        raise LoginError(f"{path} holds no Claude subscription login ({_OAUTH_KEY}); {hint}")
    access = entry.get("accessToken")
    if not isinstance(access, str) or not access.strip():
        raise LoginError(f"{path} holds a Claude login without an access token; {hint}")
    refresh = entry.get("refreshToken")
    refresh = refresh if isinstance(refresh, str) and refresh else None
    expires_at: float | None = None
    raw_expiry = entry.get("expiresAt")
    if isinstance(raw_expiry, int | float) and not isinstance(raw_expiry, bool):
        # Claude Code writes milliseconds since the epoch.
        expires_at = raw_expiry / 1000.0 if raw_expiry > 10**11 else float(raw_expiry)
    if expires_at is not None and expires_at <= now and refresh is None:
        raise LoginError(f"the Claude Code login in {path} has expired; {hint}")
    extra: dict[str, Any] = {}
    if isinstance(entry.get("subscriptionType"), str):
        extra["subscription"] = entry["subscriptionType"]
    scopes = entry.get("scopes")
    scope = None
    if isinstance(scopes, list):
        scope = " ".join(s for s in scopes if isinstance(s, str)) or None
    grant = TokenGrant(
        access_token=access.strip(),
        refresh_token=refresh,
        expires_at=expires_at,
        scope=scope,
    )
    return grant, extra
