"""The PKCE loopback login end to end: real listener, real fake issuer, simulated browser."""

from __future__ import annotations

import base64
import hashlib
import socket
from urllib.parse import parse_qs, urlsplit

import anyio
import httpx
import pytest
from fermix_core.provider import ErrorKind, ProviderError
from fermix_providers.oauth.errors import LoginError
from fermix_providers.oauth.flows import (
    CODEX_ISSUER,
    exchange_code,
    issuer_for,
    pkce_login,
    refresh_grant,
)
from fermix_providers.oauth.listener import RedirectListener
from fermix_providers.oauth.pkce import PkcePair, authorization_url, challenge_for, new_state

pytestmark = pytest.mark.anyio


def codex_issuer(url: str):
    return issuer_for("openai_codex", {"FERMIX_OAUTH_ISSUER_OPENAI_CODEX": url})


class Browser:
    """Follows the authorization URL like a browser would, recording what it saw."""

    def __init__(self) -> None:
        self.pages: list[httpx.Response] = []
        self.urls: list[str] = []

    async def __call__(self, url: str) -> bool:
        self.urls.append(url)
        async with httpx.AsyncClient(follow_redirects=True) as client:
            self.pages.append(await client.get(url))
        return True


# --------------------------------------------------------------------------- pkce values


def test_challenge_is_s256_of_the_verifier() -> None:
    pair = PkcePair.generate()
    digest = hashlib.sha256(pair.verifier.encode()).digest()
    assert pair.challenge == base64.urlsafe_b64encode(digest).rstrip(b"=").decode()
    assert 43 <= len(pair.verifier) <= 128
    assert "=" not in pair.challenge
    assert pair.verifier not in repr(pair)
    assert PkcePair.generate().verifier != pair.verifier
    assert new_state() != new_state()


def test_rfc7636_appendix_b_vector() -> None:
    verifier = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"
    assert challenge_for(verifier) == "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"


@pytest.mark.parametrize("bad", ["short", "x" * 129, "a" * 42 + "!", "a" * 50 + " "])
def test_verifier_outside_the_rfc_is_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="unreserved"):
        PkcePair.from_verifier(bad)


def test_authorization_url_carries_every_pkce_parameter() -> None:
    pair = PkcePair.generate()
    url = authorization_url(
        "https://issuer.example/authorize",
        client_id="cid",
        redirect_uri="http://127.0.0.1:9/cb",
        scopes=("openid", "offline_access"),
        pkce=pair,
        state="st",
        extra={"prompt": "login"},
    )
    query = {k: v[0] for k, v in parse_qs(urlsplit(url).query).items()}
    assert query == {
        "response_type": "code",
        "client_id": "cid",
        "redirect_uri": "http://127.0.0.1:9/cb",
        "scope": "openid offline_access",
        "code_challenge": pair.challenge,
        "code_challenge_method": "S256",
        "state": "st",
        "prompt": "login",
    }
    assert pair.verifier not in url


# --------------------------------------------------------------------------- issuer config


def test_issuer_override_must_be_https_or_loopback() -> None:
    env = "FERMIX_OAUTH_ISSUER_XAI"
    assert issuer_for("xai", {env: "https://auth.example/"}).token_url == (
        "https://auth.example/oauth2/token"
    )
    assert issuer_for("xai", {env: "http://127.0.0.1:8080"}).authorize_url == (
        "http://127.0.0.1:8080/oauth2/authorize"
    )
    with pytest.raises(LoginError, match="must use https"):
        issuer_for("xai", {env: "http://auth.example"})
    with pytest.raises(LoginError, match="http\\(s\\) URL"):
        issuer_for("xai", {env: "ftp://auth.example"})
    with pytest.raises(LoginError, match="no OAuth login exists"):
        issuer_for("mistral", {})
    assert issuer_for("openai_codex", {}) == CODEX_ISSUER


# --------------------------------------------------------------------------- the whole flow


async def test_codex_login_end_to_end(fake_issuer) -> None:
    browser = Browser()
    lines: list[str] = []
    grant = await pkce_login(
        codex_issuer(fake_issuer.url),
        opener=browser,
        echo=lines.append,
        port=0,
        clock=lambda: 1_000.0,
    )
    # The browser landed on our listener's success page.
    assert browser.pages[0].status_code == 200
    assert "You can close this tab" in browser.pages[0].text
    # What the issuer saw: S256 PKCE, Codex's extra parameters, a loopback redirect.
    authorize = fake_issuer.authorize_requests[0]
    assert authorize["code_challenge_method"] == "S256"
    assert authorize["codex_cli_simplified_flow"] == "true"
    assert authorize["scope"] == "openid profile email offline_access"
    assert authorize["redirect_uri"].startswith("http://localhost:")
    assert authorize["redirect_uri"].endswith("/auth/callback")
    exchange = fake_issuer.token_requests[0]
    assert exchange["grant_type"] == "authorization_code"
    assert challenge_for(exchange["code_verifier"]) == authorize["code_challenge"]
    assert exchange["redirect_uri"] == authorize["redirect_uri"]
    assert fake_issuer.token_content_types[0].startswith("application/x-www-form-urlencoded")
    # The grant, normalized.
    assert grant.access_token.startswith("at-")
    assert grant.refresh_token is not None and grant.refresh_token.startswith("rt-")
    assert grant.account_id == "acct-123"
    assert grant.expires_at == 4_600.0
    assert grant.access_token not in repr(grant)
    # The URL was printed for the user (and is the one the browser opened).
    assert any(browser.urls[0] in line for line in lines)


async def test_hostile_callbacks_do_not_end_or_hijack_the_login(fake_issuer) -> None:
    seen: list[tuple[str, int]] = []

    async def poking_browser(url: str) -> bool:
        query = {k: v[0] for k, v in parse_qs(urlsplit(url).query).items()}
        redirect = query["redirect_uri"]
        async with httpx.AsyncClient() as client:
            attempts = [
                ("forged state", client.get(redirect, params={"code": "evil", "state": "nope"})),
                ("no state", client.get(redirect, params={"code": "evil"})),
                ("wrong path", client.get(redirect.replace("/auth/callback", "/x"))),
                ("post", client.post(redirect, content=b"code=evil")),
            ]
            for label, request in attempts:
                seen.append((label, (await request).status_code))
            async with httpx.AsyncClient(follow_redirects=True) as browser:
                real = await browser.get(url)
            seen.append(("real", real.status_code))
            late = await client.get(redirect, params={"code": "late", "state": query["state"]})
            seen.append(("late", late.status_code))
        return True

    grant = await pkce_login(
        codex_issuer(fake_issuer.url), opener=poking_browser, echo=lambda _: None, port=0
    )
    assert seen == [
        ("forged state", 400),
        ("no state", 400),
        ("wrong path", 404),
        ("post", 405),
        ("real", 200),
        ("late", 409),
    ]
    # Only the real code was exchanged.
    assert [r["code"] for r in fake_issuer.token_requests] == ["code-1"]
    assert grant.access_token.startswith("at-")


async def test_a_redirect_with_a_foreign_state_is_not_accepted(fake_issuer) -> None:
    fake_issuer.wrong_state = True
    pages: list[httpx.Response] = []

    async def browser(url: str) -> bool:
        state = parse_qs(urlsplit(url).query)["state"][0]
        async with httpx.AsyncClient(follow_redirects=True) as client:
            forged = await client.get(url)  # the issuer answers with someone else's state
            pages.append(forged)
            code = parse_qs(urlsplit(str(forged.url)).query)["code"][0]
            # Only a callback carrying this login's state is accepted.
            redirect = str(forged.url).split("?")[0]
            pages.append(await client.get(redirect, params={"code": code, "state": state}))
        return True

    grant = await pkce_login(
        codex_issuer(fake_issuer.url), opener=browser, echo=lambda _: None, port=0
    )
    assert [p.status_code for p in pages] == [400, 200]
    assert "Login not recognised" in pages[0].text
    assert len(fake_issuer.token_requests) == 1
    assert grant.access_token.startswith("at-")


async def test_a_denied_sign_in_fails_with_the_issuers_reason(fake_issuer) -> None:
    fake_issuer.deny = True
    browser = Browser()
    with pytest.raises(LoginError, match="not approved \\(access_denied: user said no\\)"):
        await pkce_login(codex_issuer(fake_issuer.url), opener=browser, echo=lambda _: None, port=0)
    assert browser.pages[0].status_code == 400
    assert "user said no" in browser.pages[0].text


async def test_a_browser_that_cannot_open_still_lets_the_user_paste_the_url(fake_issuer) -> None:
    lines: list[str] = []
    captured: list[str] = []
    tried = anyio.Event()

    def broken_opener(url: str) -> bool:  # runs in a worker thread, like webbrowser.open
        captured.append(url)
        anyio.from_thread.run_sync(tried.set)
        raise OSError("no display")

    async def user_opens_it_by_hand() -> None:
        await tried.wait()
        await Browser()(captured[0])

    async with anyio.create_task_group() as group:
        group.start_soon(user_opens_it_by_hand)
        grant = await pkce_login(
            codex_issuer(fake_issuer.url), opener=broken_opener, echo=lines.append, port=0
        )
    assert grant.access_token.startswith("at-")
    assert any("open the URL above yourself" in line for line in lines)


async def test_a_busy_registered_port_is_reported_plainly() -> None:
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    port = holder.getsockname()[1]
    try:
        with pytest.raises(LoginError, match=f"port {port} .* already in use"):
            async with RedirectListener(path="/cb", state="s", port=port):
                pass
    finally:
        holder.close()


async def test_the_listener_refuses_an_oversized_request() -> None:
    async with RedirectListener(path="/cb", state="s", port=0) as listener:
        async with httpx.AsyncClient() as client:
            response = await client.get(
                f"http://127.0.0.1:{listener.port}/cb",
                params={"state": "s", "code": "c"},
                headers={"x-junk": "a" * 20_000},
            )
        assert response.status_code == 431
        assert not listener._settled.is_set()


# --------------------------------------------------------------------------- token endpoint


async def _code_for(issuer_url: str, pair: PkcePair, redirect: str) -> str:
    url = authorization_url(
        issuer_url + "/oauth/authorize",
        client_id=CODEX_ISSUER.client_id,
        redirect_uri=redirect,
        scopes=("openid",),
        pkce=pair,
        state="s",
    )
    async with httpx.AsyncClient() as client:
        response = await client.get(url)
    assert response.status_code == 302
    return parse_qs(urlsplit(response.headers["location"]).query)["code"][0]


async def test_exchange_with_the_wrong_verifier_is_refused(fake_issuer) -> None:
    issuer = codex_issuer(fake_issuer.url)
    redirect = "http://127.0.0.1:1/cb"
    code = await _code_for(fake_issuer.url, PkcePair.generate(), redirect)
    with pytest.raises(ProviderError) as info:
        await exchange_code(
            issuer, code=code, verifier=PkcePair.generate().verifier, redirect_uri=redirect
        )
    assert info.value.kind is ErrorKind.OAUTH
    assert "PKCE verification failed" in info.value.message


async def test_a_code_works_once(fake_issuer) -> None:
    issuer = codex_issuer(fake_issuer.url)
    pair = PkcePair.generate()
    redirect = "http://127.0.0.1:1/cb"
    code = await _code_for(fake_issuer.url, pair, redirect)
    grant = await exchange_code(issuer, code=code, verifier=pair.verifier, redirect_uri=redirect)
    assert grant.access_token
    with pytest.raises(ProviderError, match="unknown or used code"):
        await exchange_code(issuer, code=code, verifier=pair.verifier, redirect_uri=redirect)


async def test_refresh_rotates_and_a_rotated_token_is_rejected(fake_issuer) -> None:
    issuer = codex_issuer(fake_issuer.url)
    first = fake_issuer.issue_refresh_token()
    grant = await refresh_grant(issuer, first)
    assert grant.refresh_token not in (None, first)
    with pytest.raises(ProviderError) as info:
        await refresh_grant(issuer, first)
    assert info.value.kind is ErrorKind.OAUTH
    assert "already used" in info.value.message
    assert fake_issuer.reuse_detected == 1
    # The issuer revoked the family, so even the newest token is dead now.
    with pytest.raises(ProviderError, match="unknown token"):
        await refresh_grant(issuer, grant.refresh_token)


async def test_anthropic_refresh_uses_a_json_body(fake_issuer) -> None:
    fake_issuer.token_path = "/v1/oauth/token"
    issuer = issuer_for("anthropic", {"FERMIX_OAUTH_ISSUER_ANTHROPIC": fake_issuer.url})
    grant = await refresh_grant(issuer, fake_issuer.issue_refresh_token())
    assert grant.access_token.startswith("at-")
    assert fake_issuer.token_content_types == ["application/json"]


async def test_an_unreachable_issuer_is_a_transport_error_not_a_login_error() -> None:
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    port = holder.getsockname()[1]
    holder.close()  # nothing listens there now
    issuer = issuer_for("xai", {"FERMIX_OAUTH_ISSUER_XAI": f"http://127.0.0.1:{port}"})
    with pytest.raises(ProviderError) as info:
        await refresh_grant(issuer, "rt-secret-value")
    assert info.value.kind is ErrorKind.TRANSPORT
    assert "rt-secret-value" not in str(info.value)


async def test_a_token_answer_without_an_access_token_is_refused(fake_issuer) -> None:
    issuer = codex_issuer(fake_issuer.url)
    fake_issuer._tokens = lambda: {"token_type": "Bearer"}  # type: ignore[method-assign]
    with pytest.raises(ProviderError, match="without an access token"):
        await refresh_grant(issuer, fake_issuer.issue_refresh_token())
