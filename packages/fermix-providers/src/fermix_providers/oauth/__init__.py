"""OAuth logins for subscription-backed providers (Codex, Grok, Claude) and their tokens.

Adapters only ever touch :class:`~fermix_providers.oauth.tokens.TokenSource`; the login
flows, issuers and the CLI live in sibling modules that the request path never imports.
"""

from __future__ import annotations

from fermix_providers.oauth.tokens import (
    PROFILE_PROVIDERS,
    PROVIDER_PROFILES,
    Refresher,
    TokenGrant,
    TokenSource,
)

__all__ = ["PROFILE_PROVIDERS", "PROVIDER_PROFILES", "Refresher", "TokenGrant", "TokenSource"]
