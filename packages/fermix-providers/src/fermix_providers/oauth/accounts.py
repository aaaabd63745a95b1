"""What ``fermix auth`` does, apart from talking to a terminal: store, switch, report.

A login writes one profile into ``auth.json``; for Grok and Claude it also sets
``auth_mode = "oauth"`` in that provider's config block, because a stored token is inert
until the config says to use it (an owner with both a key and a login picks one there).
Logout removes the profile and puts ``auth_mode`` back to ``api_key``. Neither ever touches
``primary``: which provider answers is a setup decision, not a side effect of signing in.
Config changes go through :func:`fermix_core.config.writer.set_value`, so they are validated
and written atomically like any ``fermix config set``.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import httpx
from fermix_core.authfile import AuthStore

from fermix_providers.oauth.errors import LoginError
from fermix_providers.oauth.tokens import PROVIDER_PROFILES, TokenGrant, jwt_claims

__all__ = [
    "ALIASES",
    "LOGIN_PROVIDERS",
    "MODE_SWITCHED",
    "ConfigEffect",
    "auth_mode_in",
    "daemon_running",
    "login_status",
    "normalize_provider",
    "profile_record",
    "restart_note",
    "set_auth_mode",
    "validate_xai_access",
]

#: Providers with an OAuth login, in catalog order; the first is ``fermix auth login``'s default.
LOGIN_PROVIDERS: tuple[str, ...] = ("openai_codex", "anthropic", "xai")
DEFAULT_PROVIDER = "openai_codex"
ALIASES: dict[str, str] = {"codex": "openai_codex", "grok": "xai", "claude": "anthropic"}
#: Providers where the login only counts once ``auth_mode = "oauth"`` (Codex has no other mode).
MODE_SWITCHED: tuple[str, ...] = ("anthropic", "xai")


def normalize_provider(name: str | None) -> str:
    """A provider name from the command line (``codex``/``grok``/``claude`` accepted)."""
    value = (name or DEFAULT_PROVIDER).strip().lower()
    value = ALIASES.get(value, value)
    if value not in LOGIN_PROVIDERS:
        raise LoginError(
            f"{name!r} has no subscription login; choose one of: {', '.join(LOGIN_PROVIDERS)} "
            "(other providers use an API key: `fermix setup --provider NAME --api-key KEY`)"
        )
    return value


def profile_record(
    provider: str,
    grant: TokenGrant,
    *,
    source: str,
    now: float | None = None,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The auth.json profile for a fresh login (``None`` values are left out)."""
    record: dict[str, Any] = {
        "provider": provider,
        "source": source,
        "obtained_at": time.time() if now is None else now,
        **grant.profile_changes(),
        **dict(extra or {}),
    }
    email = jwt_claims(grant.id_token).get("email")
    if isinstance(email, str) and email:
        record["email"] = email
    return {k: v for k, v in record.items() if v is not None}


# --------------------------------------------------------------------------- config


@dataclass(frozen=True)
class ConfigEffect:
    """What a login/logout did to config.toml, for the user (``error`` when it could not)."""

    changed: bool = False
    message: str | None = None
    error: str | None = None


def auth_mode_in(document: Any, provider: str) -> str | None:
    """``auth_mode`` as written in the document, ``None`` when absent or unreadable."""
    if document is None:
        return None
    try:
        block = document.get("fermix_core", {}).get("providers", {}).get(provider, {})
        mode = block.get("auth_mode")
    except AttributeError:
        return None
    return str(mode) if isinstance(mode, str) else None


def set_auth_mode(assembly: Any, provider: str, mode: str) -> ConfigEffect:
    """Write ``[fermix_core.providers.<provider>] auth_mode = <mode>`` through the config writer."""
    from fermix_core.config import ConfigError
    from fermix_core.config.writer import set_value

    key = f"fermix_core.providers.{provider}.auth_mode"
    if assembly.document_error is not None:
        return ConfigEffect(
            error=f"config.toml cannot be read, so {key} was not set to {mode!r}: fix the file, "
            f'then run `fermix config set {key} "{mode}"`'
        )
    try:
        change = set_value(
            assembly.home,
            key,
            f'"{mode}"',
            assembly.registry,
            unavailable=assembly.unavailable,
            environ=assembly.environ,
        )
    except ConfigError as exc:
        return ConfigEffect(
            error=f"{key} was not set to {mode!r} because config.toml would not validate:\n"
            f'{exc}\nfix that, then run `fermix config set {key} "{mode}"`'
        )
    if not change.changed:
        return ConfigEffect(False, f'{key} is already "{mode}"')
    return ConfigEffect(True, f'set {key} = "{mode}"')


# --------------------------------------------------------------------------- status


def login_status(
    store: AuthStore,
    document: Any,
    providers: tuple[str, ...] = LOGIN_PROVIDERS,
    *,
    now: float | None = None,
) -> list[dict[str, Any]]:
    """One row per provider; tokens never appear, only facts about them."""
    now = time.time() if now is None else now
    profiles = store.read()
    rows = []
    for provider in providers:
        profile_name = PROVIDER_PROFILES[provider]
        profile = profiles.get(profile_name)
        mode = (
            "oauth"
            if provider not in MODE_SWITCHED
            else (auth_mode_in(document, provider) or "api_key")
        )
        row: dict[str, Any] = {
            "provider": provider,
            "profile": profile_name,
            "logged_in": isinstance(profile, dict) and bool(profile.get("access_token")),
            "auth_mode": mode,
        }
        if row["logged_in"]:
            assert isinstance(profile, dict)
            expires = profile.get("expires_at")
            if not isinstance(expires, int | float) or isinstance(expires, bool):
                exp = jwt_claims(profile.get("access_token")).get("exp")
                expires = (
                    exp if isinstance(exp, int | float) and not isinstance(exp, bool) else None
                )
            refreshable = bool(profile.get("refresh_token"))
            row.update(
                source=profile.get("source"),
                account_id=profile.get("account_id"),
                email=profile.get("email"),
                subscription=profile.get("subscription"),
                expires_at=expires,
                expired=expires is not None and expires <= now,
                refreshable=refreshable,
            )
            row["usable"] = not row["expired"] or refreshable
        row["active"] = bool(row["logged_in"] and row.get("usable") and mode == "oauth")
        rows.append(row)
    return rows


def _expiry(profile: Mapping[str, Any]) -> float | None:
    for value in (profile.get("expires_at"), jwt_claims(profile.get("access_token")).get("exp")):
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
    return None


# --------------------------------------------------------------------------- daemon


def daemon_running(home: Any) -> bool:
    """Whether a daemon answers on ``daemon.sock`` (a stale socket file does not count)."""
    path = getattr(home, "daemon_sock", None)
    if path is None or not hasattr(socket, "AF_UNIX"):
        return False
    try:
        if not path.exists():
            return False
    except OSError:
        return False
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(0.5)
    try:
        probe.connect(str(path))
    except OSError:
        return False
    finally:
        probe.close()
    return True


def restart_note(home: Any) -> str:
    if daemon_running(home):
        return "A daemon is running: run `fermix restart` for it to use this change."
    return "This takes effect at the next daemon start."


# --------------------------------------------------------------------------- xAI check


async def validate_xai_access(
    access_token: str, base_url: str, *, http: httpx.AsyncClient | None = None
) -> str | None:
    """Ask the xAI API whether the new token may use it.

    A 403 here means the Grok plan has no API access — the login itself worked, so saying
    "log in again" would send the owner in circles. Returns a warning when the check could
    not be made; raises :class:`LoginError` when the answer is no.
    """
    client = http or httpx.AsyncClient(follow_redirects=False)
    url = base_url.rstrip("/") + "/models"
    try:
        response = await client.get(
            url,
            headers={"authorization": f"Bearer {access_token}", "accept": "application/json"},
            timeout=httpx.Timeout(20.0, connect=10.0),
        )
    except httpx.HTTPError as exc:
        return f"could not confirm Grok API access ({type(exc).__name__}); the login was kept"
    finally:
        if http is None:
            await client.aclose()
    if response.status_code == 403:
        raise LoginError(
            "the Grok sign-in worked, but xAI refused API access (HTTP 403): your Grok plan does "
            "not include API access. This is not a stale token — logging in again will not "
            "help. Upgrade the plan, or use an xAI API key "
            "(`fermix setup --provider xai --api-key KEY`)"
        )
    if response.status_code == 401:
        raise LoginError(
            "xAI rejected the new Grok token (HTTP 401); run `fermix auth login --provider xai` "
            "again"
        )
    if response.status_code >= 400:
        return (
            f"could not confirm Grok API access (HTTP {response.status_code}); the login was kept"
        )
    return None
