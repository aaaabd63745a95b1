"""Issuers, the PKCE loopback login, and the token endpoint calls (code exchange, refresh).

Each subscription login is a public OAuth client some vendor registered for its own CLI;
Fermix signs in the same way those CLIs do. The endpoints are constants below. Where the
vendor does not publish them as API documentation they are what its public CLI uses, noted
as such, and every issuer can be pointed elsewhere with ``FERMIX_OAUTH_ISSUER_<PROVIDER>``
(``FERMIX_OAUTH_ISSUER_OPENAI_CODEX``, ``…_XAI``, ``…_ANTHROPIC``) — tests aim it at a
loopback fake issuer; nobody should need it otherwise.

Redirect ports: the Codex and Grok clients are registered with one fixed loopback redirect
(``localhost:1455`` and ``127.0.0.1:56121``), so the listener binds that port; a random port
(``port=0``) only works with an issuer that accepts any loopback port as RFC 8252 §7.3
allows, such as the fake issuer in the tests.
"""

from __future__ import annotations

import inspect
import logging
import os
import time
import webbrowser
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal
from urllib.parse import urlsplit

import anyio
import httpx
from fermix_core.provider import ErrorKind, ProviderError

from fermix_providers.oauth.errors import LoginError
from fermix_providers.oauth.listener import RedirectListener
from fermix_providers.oauth.pkce import PkcePair, authorization_url, new_state
from fermix_providers.oauth.tokens import PROFILE_PROVIDERS, Refresher, TokenGrant, jwt_claims

__all__ = [
    "ISSUERS",
    "Issuer",
    "Opener",
    "default_opener",
    "default_refresher",
    "exchange_code",
    "issuer_for",
    "pkce_login",
    "refresh_grant",
    "refresher_for",
]

log = logging.getLogger(__name__)

ISSUER_ENV_PREFIX = "FERMIX_OAUTH_ISSUER_"
#: How long a login waits for the browser to come back.
LOGIN_TIMEOUT_SECONDS = 300.0
#: Token endpoint calls are small; a slow answer is a broken issuer.
TOKEN_TIMEOUT = httpx.Timeout(30.0, connect=10.0)
#: How long the browser opener may keep running after the code arrived.
_OPENER_GRACE_SECONDS = 5.0


def _codex_account(claims: Mapping[str, Any]) -> str | None:
    auth = claims.get("https://api.openai.com/auth")
    if isinstance(auth, Mapping):
        value = auth.get("chatgpt_account_id")
        if isinstance(value, str) and value:
            return value
    value = claims.get("chatgpt_account_id")
    return value if isinstance(value, str) and value else None


def _subject(claims: Mapping[str, Any]) -> str | None:
    value = claims.get("sub")
    return value if isinstance(value, str) and value else None


@dataclass(frozen=True)
class Issuer:
    """One OAuth authorization server and the public client Fermix uses with it."""

    provider: str
    label: str
    base_url: str
    client_id: str
    grant_path: str
    authorize_path: str | None = None
    scopes: tuple[str, ...] = ()
    #: Host written into the redirect URI (the listener always binds 127.0.0.1).
    redirect_host: str = "127.0.0.1"
    redirect_port: int = 0
    redirect_path: str = "/callback"
    extra_authorize: Mapping[str, str] = field(default_factory=dict)
    #: How the token endpoint wants its body: the RFC's form encoding, or JSON.
    grant_encoding: Literal["form", "json"] = "form"
    #: Reads the account id out of the id token's (or access token's) claims.
    account_from: Callable[[Mapping[str, Any]], str | None] = _subject

    @property
    def token_url(self) -> str:
        return self.base_url.rstrip("/") + self.grant_path

    @property
    def authorize_url(self) -> str | None:
        if self.authorize_path is None:
            return None
        return self.base_url.rstrip("/") + self.authorize_path


#: OpenAI's auth issuer as used by the Codex CLI (ChatGPT subscription login). The client id,
#: scopes, fixed redirect and the two extra authorize parameters are the Codex CLI's own.
CODEX_ISSUER = Issuer(
    provider="openai_codex",
    label="ChatGPT (Codex)",
    base_url="https://auth.openai.com",
    client_id="app_EMoamEEZ73f0CkXaXp7hrann",
    authorize_path="/oauth/authorize",
    grant_path="/oauth/token",
    scopes=("openid", "profile", "email", "offline_access"),
    redirect_host="localhost",
    redirect_port=1455,
    redirect_path="/auth/callback",
    extra_authorize={"id_token_add_organizations": "true", "codex_cli_simplified_flow": "true"},
    account_from=_codex_account,
)

#: xAI's Grok subscription login. xAI does not document these as a public API; they are what
#: its Grok CLI client uses (issuer ``auth.x.ai``, fixed loopback redirect on port 56121).
XAI_ISSUER = Issuer(
    provider="xai",
    label="Grok (xAI)",
    base_url="https://auth.x.ai",
    client_id="b1a00492-073a-47ea-816f-4c329264a828",
    authorize_path="/oauth2/authorize",
    grant_path="/oauth2/token",
    scopes=("openid", "profile", "email", "offline_access", "grok-cli:access", "api:access"),
    redirect_host="127.0.0.1",
    redirect_port=56121,
    redirect_path="/callback",
)

#: Claude subscription tokens. Fermix never runs this login itself (it takes a
#: ``claude setup-token`` value or imports Claude Code's login); the issuer is only used to
#: refresh an imported Claude Code login. Undocumented as a public API: the token endpoint
#: and client id are the Claude Code CLI's, and that endpoint takes a JSON body.
ANTHROPIC_ISSUER = Issuer(
    provider="anthropic",
    label="Claude (Anthropic)",
    base_url="https://console.anthropic.com",
    client_id="9d1c250a-e61b-44d9-88ed-5944d1962f5e",
    grant_path="/v1/oauth/token",
    grant_encoding="json",
)

ISSUERS: dict[str, Issuer] = {i.provider: i for i in (CODEX_ISSUER, XAI_ISSUER, ANTHROPIC_ISSUER)}


def issuer_for(provider: str, environ: Mapping[str, str] | None = None) -> Issuer:
    """The issuer for *provider*, with its ``FERMIX_OAUTH_ISSUER_<PROVIDER>`` override applied.

    The override must be HTTPS, or plain HTTP on a loopback address: tokens are sent there.
    """
    try:
        issuer = ISSUERS[provider]
    except KeyError:
        known = ", ".join(sorted(ISSUERS))
        raise LoginError(f"no OAuth login exists for {provider!r}; use one of: {known}") from None
    env = os.environ if environ is None else environ
    name = ISSUER_ENV_PREFIX + provider.upper()
    override = (env.get(name) or "").strip()
    if not override:
        return issuer
    parts = urlsplit(override)
    loopback = parts.hostname in ("127.0.0.1", "localhost", "::1")
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise LoginError(
            f"{name} must be an http(s) URL such as https://issuer.example (got {override!r})"
        )
    if parts.scheme == "http" and not loopback:
        raise LoginError(
            f"{name} must use https unless it points at this machine (127.0.0.1/localhost); "
            "tokens would otherwise cross the network in clear text"
        )
    return replace(issuer, base_url=override.rstrip("/"))


# --------------------------------------------------------------------------- token endpoint


async def exchange_code(
    issuer: Issuer,
    *,
    code: str,
    verifier: str,
    redirect_uri: str,
    http: httpx.AsyncClient | None = None,
    clock: Callable[[], float] = time.time,
) -> TokenGrant:
    """Trade the authorization code (and the PKCE verifier) for tokens."""
    fields = {
        "grant_type": "authorization_code",
        "code": code,
        "redirect_uri": redirect_uri,
        "client_id": issuer.client_id,
        "code_verifier": verifier,
    }
    return await _token_request(issuer, fields, http, clock)


async def refresh_grant(
    issuer: Issuer,
    refresh_token: str,
    *,
    http: httpx.AsyncClient | None = None,
    clock: Callable[[], float] = time.time,
) -> TokenGrant:
    """Spend *refresh_token* once for a new grant (which usually rotates it)."""
    fields = {
        "grant_type": "refresh_token",
        "refresh_token": refresh_token,
        "client_id": issuer.client_id,
    }
    return await _token_request(issuer, fields, http, clock)


async def _token_request(
    issuer: Issuer,
    fields: dict[str, str],
    http: httpx.AsyncClient | None,
    clock: Callable[[], float],
) -> TokenGrant:
    client = http or httpx.AsyncClient(follow_redirects=False)
    try:
        kwargs: dict[str, Any] = (
            {"json": fields} if issuer.grant_encoding == "json" else {"data": fields}
        )
        response = await client.post(
            issuer.token_url,
            headers={"accept": "application/json"},
            timeout=TOKEN_TIMEOUT,
            **kwargs,
        )
    except httpx.HTTPError as exc:
        from fermix_providers.http.errors import error_from_exception

        error = error_from_exception(issuer.provider, exc, chunks_seen=0, counts_chunks=False)
        error.message = f"the {issuer.label} sign-in service: {error.message}"
        raise error from None
    finally:
        if http is None:
            await client.aclose()
    return _grant_from(issuer, response, clock)


def _grant_from(issuer: Issuer, response: httpx.Response, clock: Callable[[], float]) -> TokenGrant:
    try:
        data = response.json()
    except ValueError:
        data = None
    if response.status_code >= 500:
        from fermix_providers.http.errors import error_from_response

        raise error_from_response(
            issuer.provider, response.status_code, response.headers, response.text
        )
    if response.status_code != 200 or not isinstance(data, dict):
        reason = ""
        if isinstance(data, dict):
            code = data.get("error")
            if isinstance(code, Mapping):  # some issuers nest {"error": {"message": …}}
                code = code.get("type") or code.get("message")
            desc = data.get("error_description")
            reason = ": ".join(str(p)[:200] for p in (code, desc) if isinstance(p, str) and p)
        raise ProviderError(
            ErrorKind.OAUTH,
            f"the {issuer.label} sign-in service refused the token request "
            f"(HTTP {response.status_code}{': ' + reason if reason else ''})",
            provider=issuer.provider,
            status=response.status_code,
        )
    access = data.get("access_token")
    if not isinstance(access, str) or not access:
        raise ProviderError(
            ErrorKind.OAUTH,
            f"the {issuer.label} sign-in service answered without an access token",
            provider=issuer.provider,
            status=response.status_code,
        )
    expires_at: float | None = None
    expires_in = data.get("expires_in")
    if isinstance(expires_in, int | float) and not isinstance(expires_in, bool):
        expires_at = clock() + float(expires_in)
    id_token = data.get("id_token") if isinstance(data.get("id_token"), str) else None
    account = issuer.account_from(jwt_claims(id_token)) or issuer.account_from(jwt_claims(access))
    refresh = data.get("refresh_token")
    scope = data.get("scope")
    token_type = data.get("token_type")
    return TokenGrant(
        access_token=access,
        refresh_token=refresh if isinstance(refresh, str) and refresh else None,
        expires_at=expires_at,
        id_token=id_token,
        account_id=account,
        scope=scope if isinstance(scope, str) else None,
        token_type=token_type if isinstance(token_type, str) else None,
    )


# --------------------------------------------------------------------------- refreshers


def refresher_for(
    provider: str,
    *,
    http: httpx.AsyncClient | None = None,
    environ: Mapping[str, str] | None = None,
) -> Refresher:
    """A :data:`~fermix_providers.oauth.tokens.Refresher` for *provider*'s issuer.

    Adapters pass their shared client as *http*; the issuer (and its override) is looked up
    on each refresh so an override set after start-up is honoured.
    """

    async def refresh(profile: Mapping[str, Any]) -> TokenGrant:
        try:
            issuer = issuer_for(provider, environ)
        except LoginError as exc:
            raise ProviderError(ErrorKind.OAUTH, str(exc), provider=provider) from None
        token = profile.get("refresh_token")
        if not isinstance(token, str) or not token:
            raise ProviderError(
                ErrorKind.OAUTH, "the stored login has no refresh token", provider=provider
            )
        return await refresh_grant(issuer, token, http=http)

    return refresh


def default_refresher(profile: str) -> Refresher | None:
    """The refresher :class:`~fermix_providers.oauth.tokens.TokenSource` uses by default."""
    provider = PROFILE_PROVIDERS.get(profile)
    return refresher_for(provider) if provider in ISSUERS else None


# --------------------------------------------------------------------------- PKCE login

#: Opens the authorization URL; may be sync (run in a worker thread) or async.
Opener = Callable[[str], Awaitable[Any] | Any]


def default_opener(url: str) -> bool:
    """Open *url* in the user's browser when there is one; ``False`` when there is not."""
    if os.name == "posix" and not _has_display():
        return False
    try:
        return bool(webbrowser.open(url, new=2))
    except webbrowser.Error:
        return False


def _has_display() -> bool:
    import sys

    if sys.platform == "darwin" or os.environ.get("BROWSER"):
        return True
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


async def pkce_login(
    issuer: Issuer,
    *,
    opener: Opener | None = default_opener,
    echo: Callable[[str], None] = print,
    port: int | None = None,
    timeout: float = LOGIN_TIMEOUT_SECONDS,
    http: httpx.AsyncClient | None = None,
    clock: Callable[[], float] = time.time,
) -> TokenGrant:
    """Run the authorization code flow with PKCE through a loopback redirect.

    *port* ``None`` uses the issuer's registered redirect port, ``0`` a free one. The URL
    is always printed (for a browser on another machine, forward the port: ``ssh -L``), and
    opened with *opener* when given.
    """
    if issuer.authorize_url is None:
        raise LoginError(f"{issuer.label} has no browser login; see `fermix auth login --help`")
    pkce = PkcePair.generate()
    state = new_state()
    listen_port = issuer.redirect_port if port is None else port
    refused: LoginError | None = None
    async with RedirectListener(path=issuer.redirect_path, state=state, port=listen_port) as lis:
        redirect_uri = f"http://{issuer.redirect_host}:{lis.port}{issuer.redirect_path}"
        url = authorization_url(
            issuer.authorize_url,
            client_id=issuer.client_id,
            redirect_uri=redirect_uri,
            scopes=issuer.scopes,
            pkce=pkce,
            state=state,
            extra=issuer.extra_authorize,
        )
        echo(f"Sign in to {issuer.label} by opening this URL:\n\n  {url}\n")
        echo(f"Waiting for the browser on {redirect_uri} …")
        code: str | None = None
        async with anyio.create_task_group() as group:
            if opener is not None:
                group.start_soon(_run_opener, opener, url, echo)
            # Errors are raised after the group closes, so callers see them unwrapped.
            with anyio.move_on_after(timeout):
                try:
                    code = await lis.wait()
                except LoginError as exc:
                    refused = exc
            if code is None and refused is None:
                group.cancel_scope.cancel()
            else:
                # Let a browser that is still reading our answer page finish, briefly.
                group.cancel_scope.deadline = anyio.current_time() + _OPENER_GRACE_SECONDS
    if code is None:
        if refused is not None:
            raise refused
        waited = f"{timeout / 60:g} minutes" if timeout >= 60 else f"{timeout:g} seconds"
        raise LoginError(f"no sign-in came back within {waited}; run the login again")
    try:
        return await exchange_code(
            issuer,
            code=code,
            verifier=pkce.verifier,
            redirect_uri=redirect_uri,
            http=http,
            clock=clock,
        )
    except ProviderError as exc:
        raise LoginError(f"signing in to {issuer.label} failed: {exc.message}") from None


async def _run_opener(opener: Opener, url: str, echo: Callable[[str], None]) -> None:
    try:
        if _is_async(opener):
            opened = await opener(url)
        else:
            opened = await anyio.to_thread.run_sync(opener, url, abandon_on_cancel=True)
            if inspect.isawaitable(opened):
                opened = await opened
    except Exception as exc:  # a broken browser must not break the login
        log.info("opening a browser failed: %s", type(exc).__name__)
        opened = False
    if opened is False:
        echo("(No browser could be opened here; open the URL above yourself.)")


def _is_async(func: Any) -> bool:
    """A coroutine function, or an object whose ``__call__`` is one (a class-based opener)."""
    call = type(func).__call__ if not inspect.isfunction(func) else None
    return inspect.iscoroutinefunction(func) or inspect.iscoroutinefunction(call)
