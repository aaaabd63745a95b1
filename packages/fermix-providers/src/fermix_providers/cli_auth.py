"""``fermix auth``: sign in to subscription providers, see the logins, sign out.

Added to the CLI through ``fermix_cli``; only typer is imported up front, everything else
when a command actually runs. :func:`build_app` exists so tests (and embedders) can hand the
login a different browser opener — the tests' one is a simulated browser.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

import typer
from fermix_core.cli.app import HelpfulGroup

__all__ = ["app", "build_app"]

_SETTINGS: dict[str, Any] = {
    # Core's group class: whole help lines, "did you mean" for a mistyped subcommand.
    "cls": HelpfulGroup,
    "add_completion": False,
    "rich_markup_mode": None,
    "pretty_exceptions_enable": False,
    "no_args_is_help": True,
    "context_settings": {"help_option_names": ["-h", "--help"]},
}

_PROVIDER_HELP = "openai_codex (default; alias codex), anthropic (claude) or xai (grok)."


def _fail(message: str) -> NoReturn:
    typer.echo(f"Error: {message}", err=True)
    raise typer.Exit(1)


def _note(message: str) -> None:
    typer.echo(message)


def build_app(
    *,
    opener: Any = "default",
    clock: Callable[[], float] = time.time,
    login_timeout: float | None = None,
) -> typer.Typer:
    """The ``auth`` command group; *opener* opens the login URL (``None``: print it only).

    *login_timeout* bounds the wait for the browser (default: the flows' five minutes).
    """
    app = typer.Typer(
        help="Sign in to subscription providers (ChatGPT/Codex, Claude, Grok).", **_SETTINGS
    )

    @app.command()
    def login(
        provider: str | None = typer.Option(None, "--provider", "-p", help=_PROVIDER_HELP),
        setup_token: bool = typer.Option(
            False, "--setup-token", help="Anthropic: paste a token made by `claude setup-token`."
        ),
        import_claude_code: bool = typer.Option(
            False, "--import-claude-code", help="Anthropic: copy Claude Code's stored login."
        ),
        claude_credentials: Path | None = typer.Option(
            None,
            "--claude-credentials",
            help="Anthropic: Claude Code's credentials file, if not in the usual place.",
        ),
        no_browser: bool = typer.Option(
            False, "--no-browser", help="Only print the sign-in URL (e.g. over SSH)."
        ),
        port: int | None = typer.Option(
            None,
            "--port",
            help="Listen for the redirect on this port (only for issuers that accept any port).",
        ),
    ) -> None:
        """Sign in and store the login in auth.json (never changes the primary provider)."""
        _login(
            provider,
            setup_token=setup_token,
            import_claude_code=import_claude_code,
            claude_credentials=claude_credentials,
            opener=None if no_browser else opener,
            port=port,
            clock=clock,
            timeout=login_timeout,
        )

    @app.command()
    def status(
        provider: str | None = typer.Option(None, "--provider", "-p", help=_PROVIDER_HELP),
        as_json: bool = typer.Option(False, "--json", help="Print machine-readable JSON."),
    ) -> None:
        """Show which logins are stored and whether config uses them (tokens are never shown)."""
        _status(provider, as_json=as_json, clock=clock)

    @app.command()
    def logout(
        provider: str | None = typer.Option(None, "--provider", "-p", help=_PROVIDER_HELP),
    ) -> None:
        """Remove a stored login; Claude and Grok go back to auth_mode = "api_key"."""
        _logout(provider)

    return app


# --------------------------------------------------------------------------- commands


def _context() -> tuple[Any, Any]:
    from fermix_core.authfile import AuthFileError, AuthStore
    from fermix_core.cli.context import load_for_cli

    context = load_for_cli()
    store = AuthStore(context.home.auth_file)
    try:
        store.read()
    except AuthFileError as exc:
        _fail(str(exc))
    return context, store


def _provider(name: str | None) -> str:
    from fermix_providers.oauth.accounts import normalize_provider
    from fermix_providers.oauth.errors import LoginError

    try:
        return normalize_provider(name)
    except LoginError as exc:
        _fail(str(exc))


def _login(
    provider_name: str | None,
    *,
    setup_token: bool,
    import_claude_code: bool,
    claude_credentials: Path | None,
    opener: Any,
    port: int | None,
    clock: Callable[[], float],
    timeout: float | None,
) -> None:
    from fermix_providers.oauth import accounts
    from fermix_providers.oauth.errors import LoginError
    from fermix_providers.oauth.tokens import PROVIDER_PROFILES

    provider = _provider(provider_name)
    if provider != "anthropic" and (setup_token or import_claude_code or claude_credentials):
        _fail(
            "--setup-token, --import-claude-code and --claude-credentials are for "
            "--provider anthropic"
        )
    context, store = _context()
    warnings: list[str] = []
    try:
        if provider == "anthropic":
            grant, source, extra = _anthropic_grant(
                setup_token, import_claude_code, claude_credentials, clock()
            )
        else:
            grant, warning = _browser_login(context, provider, opener, port, clock, timeout)
            source, extra = "browser", {}
            if warning:
                warnings.append(warning)
    except LoginError as exc:
        _fail(str(exc))
    record = accounts.profile_record(provider, grant, source=source, now=clock(), extra=extra)
    profile = PROVIDER_PROFILES[provider]
    from fermix_core.authfile import AuthFileError

    try:
        context.home.ensure()
        store.put(profile, record)
    except (AuthFileError, OSError) as exc:
        _fail(f"the login worked but could not be saved to {store.path}: {exc}")
    who = record.get("email") or record.get("account_id")
    _note(
        f"Signed in to {provider}{f' as {who}' if who else ''}; the login is stored in "
        f"{store.path} (profile {profile!r})."
    )
    for warning in warnings:
        typer.echo(f"Warning: {warning}", err=True)
    if provider in accounts.MODE_SWITCHED:
        effect = accounts.set_auth_mode(context.assembly, provider, "oauth")
        if effect.error:
            typer.echo(
                f'Warning: the login is stored but stays unused until auth_mode = "oauth": '
                f"{effect.error}",
                err=True,
            )
        elif effect.message:
            _note(f"Config: {effect.message}.")
    _note("The primary provider was not changed (`fermix setup` chooses it).")
    _note(accounts.restart_note(context.home))


def _anthropic_grant(
    setup_token: bool, import_claude_code: bool, credentials: Path | None, now: float
) -> tuple[Any, str, dict[str, Any]]:
    from fermix_providers.oauth.claude import (
        CLAUDE_TOKEN_ENV,
        claude_credentials_path,
        read_claude_code_login,
        setup_token_grant,
    )
    from fermix_providers.oauth.errors import LoginError

    if setup_token and (import_claude_code or credentials):
        raise LoginError("choose one of --setup-token and --import-claude-code")
    if import_claude_code or credentials:
        path = credentials or claude_credentials_path()
        grant, extra = read_claude_code_login(path, now=now)
        _note(
            "Imported Claude Code's login. Fermix and Claude Code now refresh it separately; if "
            "one of them gets logged out later, prefer `--setup-token` for Fermix."
        )
        return grant, "claude_code", extra
    if setup_token:
        value = typer.prompt(
            "Paste the token printed by `claude setup-token`", hide_input=True, default=""
        )
        return setup_token_grant(value), "setup_token", {}
    env_value = os.environ.get(CLAUDE_TOKEN_ENV)
    if env_value:
        return setup_token_grant(env_value, source=f"${CLAUDE_TOKEN_ENV}"), "env", {}
    raise LoginError(
        "say where the Claude login comes from: --setup-token (paste a `claude setup-token` "
        f"value), --import-claude-code (Claude Code's stored login), or set {CLAUDE_TOKEN_ENV}"
    )


def _browser_login(
    context: Any,
    provider: str,
    opener: Any,
    port: int | None,
    clock: Callable[[], float],
    timeout: float | None,
) -> tuple[Any, str | None]:
    import anyio

    from fermix_providers.oauth.accounts import validate_xai_access
    from fermix_providers.oauth.flows import (
        LOGIN_TIMEOUT_SECONDS,
        default_opener,
        issuer_for,
        pkce_login,
    )

    issuer = issuer_for(provider)
    chosen = default_opener if opener == "default" else opener

    async def run() -> tuple[Any, str | None]:
        grant = await pkce_login(
            issuer,
            opener=chosen,
            echo=_note,
            port=port,
            clock=clock,
            timeout=LOGIN_TIMEOUT_SECONDS if timeout is None else timeout,
        )
        warning = None
        if provider == "xai":
            warning = await validate_xai_access(grant.access_token, _xai_base_url(context))
        return grant, warning

    return anyio.run(run)


def _xai_base_url(context: Any) -> str:
    from fermix_providers.xai.plugin import SPEC

    document = context.assembly.document
    try:
        value = document["fermix_core"]["providers"]["xai"]["base_url"]
    except (KeyError, TypeError):
        value = None
    return str(value) if value else str(SPEC.default_base_url)


def _status(provider_name: str | None, *, as_json: bool, clock: Callable[[], float]) -> None:
    from fermix_providers.oauth.accounts import LOGIN_PROVIDERS, login_status

    providers = (_provider(provider_name),) if provider_name else LOGIN_PROVIDERS
    context, store = _context()
    rows = login_status(store, context.assembly.document, providers, now=clock())
    if as_json:
        typer.echo(json.dumps(rows, indent=2, sort_keys=True))
        return
    width = max(len(r["provider"]) for r in rows)
    for row in rows:
        typer.echo(f"{row['provider'].ljust(width)}  {_describe(row, clock())}")


def _describe(row: dict[str, Any], now: float) -> str:
    if not row["logged_in"]:
        return f"not logged in (`fermix auth login --provider {row['provider']}`)"
    facts = [f"source {row.get('source') or 'unknown'}"]
    who = row.get("email") or row.get("account_id")
    if who:
        facts.append(f"account {who}")
    expires = row.get("expires_at")
    if expires is None:
        facts.append("no expiry known")
    elif row.get("expired"):
        facts.append("expired" + (", will refresh" if row.get("refreshable") else ""))
    else:
        facts.append(f"expires {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime(expires))}")
    if row.get("refreshable"):
        facts.append("refreshable")
    text = f"logged in ({'; '.join(facts)})"
    if not row.get("usable", True):
        text += f" — log in again: `fermix auth login --provider {row['provider']}`"
    elif row["auth_mode"] != "oauth":
        text += (
            f' — inactive: auth_mode is "{row["auth_mode"]}"; a stored login is used only '
            f'with auth_mode = "oauth"'
        )
    return text


def _logout(provider_name: str | None) -> None:
    from fermix_providers.oauth import accounts
    from fermix_providers.oauth.tokens import PROVIDER_PROFILES

    provider = _provider(provider_name)
    context, store = _context()
    profile = PROVIDER_PROFILES[provider]
    removed = store.delete(profile)
    if removed:
        _note(f"Removed the {provider} login (profile {profile!r}) from {store.path}.")
    else:
        _note(f"No {provider} login was stored.")
    changed = False
    document = context.assembly.document
    if provider in accounts.MODE_SWITCHED and accounts.auth_mode_in(document, provider) == "oauth":
        effect = accounts.set_auth_mode(context.assembly, provider, "api_key")
        if effect.error:
            typer.echo(f"Warning: {effect.error}", err=True)
        elif effect.message:
            changed = effect.changed
            _note(f"Config: {effect.message}.")
            if not _has_api_key(context, provider):
                _note(
                    f"{provider} has no API key yet; add one with "
                    f"`fermix setup --provider {provider} --api-key KEY`."
                )
    if removed or changed:
        _note(accounts.restart_note(context.home))


def _has_api_key(context: Any, provider: str) -> bool:
    from fermix_core.specs import ProviderSpec

    spec = context.registry.typed(ProviderSpec).get(provider)
    env_var = getattr(spec, "env_var", None)
    if env_var and context.environ.get(env_var):
        return True
    try:
        return bool(context.assembly.document["fermix_core"]["providers"][provider]["api_key"])
    except (KeyError, TypeError):
        return False


app = build_app()
