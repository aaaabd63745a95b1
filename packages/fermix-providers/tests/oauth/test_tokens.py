"""TokenSource against a real auth.json and the fake issuer: refresh, rotation, coalescing."""

from __future__ import annotations

import json
import logging
import os
import sys
import textwrap
import time
from pathlib import Path

import anyio
import pytest
from fermix_core.authfile import AuthStore
from fermix_core.provider import ErrorKind, ProviderError
from fermix_providers.oauth.flows import refresher_for
from fermix_providers.oauth.tokens import TokenGrant, TokenSource, jwt_claims

pytestmark = pytest.mark.anyio


def make_jwt(claims: dict) -> str:
    import base64

    def part(data: dict) -> str:
        return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()

    return f"{part({'alg': 'none'})}.{part(claims)}.sig"


#: The issuer stamps expiries from the real clock, so the tests' fixed "now" starts there.
NOW = float(int(time.time()))


def clock() -> float:
    return NOW


@pytest.fixture
def store(tmp_path: Path) -> AuthStore:
    return AuthStore(tmp_path / "home" / "auth.json")


def env_for(issuer_url: str) -> dict[str, str]:
    return {"FERMIX_OAUTH_ISSUER_OPENAI_CODEX": issuer_url}


def seed(store: AuthStore, fake_issuer, *, expires_at: float = NOW + 3600, **extra) -> str:
    refresh = fake_issuer.issue_refresh_token()
    store.put(
        "codex",
        {
            "access_token": "at-old",
            "refresh_token": refresh,
            "expires_at": expires_at,
            "account_id": "acct-9",
            **extra,
        },
    )
    return refresh


def source(store: AuthStore, fake_issuer, **kwargs) -> TokenSource:
    refresher = refresher_for("openai_codex", environ=env_for(fake_issuer.url))
    return TokenSource(store, "codex", refresher, clock=clock, **kwargs)


# --------------------------------------------------------------------------- reading


async def test_no_stored_login_says_how_to_log_in(store: AuthStore) -> None:
    tokens = TokenSource(store, "codex")
    with pytest.raises(ProviderError) as info:
        await tokens.access_token()
    assert info.value.kind is ErrorKind.OAUTH
    assert "run `fermix auth login --provider openai_codex`" in info.value.message
    assert info.value.provider == "openai_codex"
    store.put("xai_oauth", {"access_token": ""})
    with pytest.raises(ProviderError, match="--provider xai"):
        await TokenSource(store, "xai_oauth").access_token()


async def test_a_live_token_is_handed_out_without_touching_the_issuer(
    store: AuthStore, fake_issuer
) -> None:
    seed(store, fake_issuer)
    tokens = source(store, fake_issuer)
    assert await tokens.access_token() == "at-old"
    assert tokens.account_id == "acct-9"
    assert tokens.expires_at == NOW + 3600
    assert fake_issuer.token_requests == []


async def test_a_new_login_written_while_running_is_picked_up(
    store: AuthStore, fake_issuer
) -> None:
    seed(store, fake_issuer)
    tokens = source(store, fake_issuer)
    assert await tokens.access_token() == "at-old"
    store.put("codex", {"access_token": "at-from-new-login", "expires_at": NOW + 3600})
    assert await tokens.access_token() == "at-from-new-login"
    store.delete("codex")
    with pytest.raises(ProviderError, match="no 'codex' login is stored"):
        await tokens.access_token()


async def test_an_unsafe_auth_file_is_an_oauth_error_naming_the_fix(
    store: AuthStore, fake_issuer
) -> None:
    seed(store, fake_issuer)
    os.chmod(store.path, 0o644)
    with pytest.raises(ProviderError) as info:
        await source(store, fake_issuer).access_token()
    assert info.value.kind is ErrorKind.OAUTH
    assert "chmod 600" in info.value.message


async def test_expiry_falls_back_to_the_jwt_exp_claim(store: AuthStore, fake_issuer) -> None:
    refresh = fake_issuer.issue_refresh_token()
    expired_jwt = make_jwt({"exp": int(NOW) - 10})
    store.put("codex", {"access_token": expired_jwt, "refresh_token": refresh})
    token = await source(store, fake_issuer).access_token()
    assert token.startswith("at-")
    assert fake_issuer.refresh_calls == 1
    assert jwt_claims("not-a-jwt") == {}
    assert jwt_claims("a.!!!.c") == {}


# --------------------------------------------------------------------------- refreshing


async def test_an_expiring_token_is_refreshed_and_persisted(store: AuthStore, fake_issuer) -> None:
    old_refresh = seed(store, fake_issuer, expires_at=NOW + 30)  # inside the skew
    tokens = source(store, fake_issuer)
    token = await tokens.access_token()
    assert token.startswith("at-") and token != "at-old"
    stored = store.get("codex")
    assert stored is not None
    assert stored["access_token"] == token
    assert stored["refresh_token"] not in (old_refresh, None)
    assert abs(stored["expires_at"] - (time.time() + 3600)) < 120
    assert stored["refreshed_at"] == NOW
    assert stored["account_id"] == "acct-123"  # from the new id token
    assert (store.path.stat().st_mode & 0o777) == 0o600
    assert fake_issuer.token_requests[0]["refresh_token"] == old_refresh


async def test_successive_refreshes_always_spend_the_newest_refresh_token(
    store: AuthStore, fake_issuer
) -> None:
    seed(store, fake_issuer)
    tokens = source(store, fake_issuer)
    seen = [await tokens.access_token()]
    for _ in range(3):
        seen.append(await tokens.refresh())
    assert len(set(seen)) == 4
    assert fake_issuer.refresh_calls == 3
    assert fake_issuer.reuse_detected == 0
    spent = [r["refresh_token"] for r in fake_issuer.token_requests]
    assert len(set(spent)) == 3


async def test_concurrent_refreshes_coalesce_into_one_grant(store: AuthStore, fake_issuer) -> None:
    seed(store, fake_issuer)
    fake_issuer.hold_refresh = True
    tokens = [source(store, fake_issuer) for _ in range(3)]  # e.g. several routes
    for t in tokens:
        await t.access_token()
    results: list[str] = []

    async def refresh(t: TokenSource) -> None:
        results.append(await t.refresh())

    async with anyio.create_task_group() as group:
        for t in tokens * 3:
            group.start_soon(refresh, t)
        await anyio.wait_all_tasks_blocked()
        fake_issuer.gate.set()
    assert len(results) == 9
    assert len(set(results)) == 1
    assert fake_issuer.refresh_calls == 1
    assert fake_issuer.reuse_detected == 0


async def test_a_refused_refresh_says_to_log_in_again_and_keeps_the_file(
    store: AuthStore, fake_issuer
) -> None:
    store.put("codex", {"access_token": "at-old", "refresh_token": "rt-revoked"})
    before = store.path.read_bytes()
    tokens = source(store, fake_issuer)
    await tokens.access_token()
    with pytest.raises(ProviderError) as info:
        await tokens.refresh()
    assert info.value.kind is ErrorKind.OAUTH
    assert "fermix auth login --provider openai_codex" in info.value.message
    assert "rt-revoked" not in str(info.value)
    assert store.path.read_bytes() == before


async def test_waiters_of_a_failed_refresh_all_get_the_error(store: AuthStore, fake_issuer) -> None:
    store.put("codex", {"access_token": "at-old", "refresh_token": "rt-revoked"})
    fake_issuer.hold_refresh = True
    tokens = source(store, fake_issuer)
    await tokens.access_token()
    errors: list[ProviderError] = []

    async def refresh() -> None:
        try:
            await tokens.refresh()
        except ProviderError as exc:
            errors.append(exc)

    async with anyio.create_task_group() as group:
        for _ in range(4):
            group.start_soon(refresh)
        await anyio.wait_all_tasks_blocked()
        fake_issuer.gate.set()
    assert len(errors) == 4
    assert {e.kind for e in errors} == {ErrorKind.OAUTH}
    assert fake_issuer.refresh_calls == 1


async def test_a_login_without_a_refresh_token_cannot_refresh(store: AuthStore) -> None:
    store.put("anthropic_oauth", {"access_token": "sk-ant-oat01-abc"})
    tokens = TokenSource(store, "anthropic_oauth")
    assert await tokens.access_token() == "sk-ant-oat01-abc"
    with pytest.raises(ProviderError, match=r"cannot be refreshed.*--provider anthropic"):
        await tokens.refresh()
    store.put("anthropic_oauth", {"access_token": "sk-ant-oat01-abc", "expires_at": NOW - 1})
    with pytest.raises(ProviderError, match="expired and cannot be refreshed"):
        await TokenSource(store, "anthropic_oauth", clock=clock).access_token()


async def test_an_unreachable_issuer_stays_a_transport_error(store: AuthStore, fake_issuer) -> None:
    seed(store, fake_issuer)
    dead = "http://127.0.0.1:9"  # discard port: nothing listens
    tokens = TokenSource(
        store,
        "codex",
        refresher_for("openai_codex", environ=env_for(dead)),
        clock=clock,
    )
    await tokens.access_token()
    with pytest.raises(ProviderError) as info:
        await tokens.refresh()
    assert info.value.kind is ErrorKind.TRANSPORT


async def test_a_token_refreshed_by_another_process_is_adopted(
    store: AuthStore, fake_issuer
) -> None:
    seed(store, fake_issuer)
    ours = source(store, fake_issuer)
    assert await ours.access_token() == "at-old"
    script = textwrap.dedent(
        f"""
        import anyio
        from fermix_core.authfile import AuthStore
        from fermix_providers.oauth.flows import refresher_for
        from fermix_providers.oauth.tokens import TokenSource

        async def main():
            store = AuthStore({str(store.path)!r})
            refresher = refresher_for(
                "openai_codex", environ={{"FERMIX_OAUTH_ISSUER_OPENAI_CODEX": {fake_issuer.url!r}}}
            )
            tokens = TokenSource(store, "codex", refresher)
            await tokens.access_token()
            print(await tokens.refresh())

        anyio.run(main)
        """
    )
    done = await anyio.run_process([sys.executable, "-c", script], check=True)
    theirs = done.stdout.decode().strip()
    assert theirs.startswith("at-")
    # Our 401 path: the file already holds a newer token, so no refresh token is spent.
    assert await ours.refresh() == theirs
    assert fake_issuer.refresh_calls == 1
    assert fake_issuer.reuse_detected == 0


async def test_a_refresh_waits_for_another_process_holding_the_refresh_lock(
    store: AuthStore, fake_issuer
) -> None:
    import fcntl

    seed(store, fake_issuer)
    tokens = source(store, fake_issuer)
    await tokens.access_token()
    lock_path = store.path.with_name("auth.json.refresh.lock")
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)  # "another process" is refreshing
    results: list[str] = []

    async def refresh() -> None:
        results.append(await tokens.refresh())

    try:
        async with anyio.create_task_group() as group:
            group.start_soon(refresh)
            await anyio.wait_all_tasks_blocked()
            assert results == []
            # The other process finishes: it wrote its new tokens, then unlocks.
            store.update("codex", access_token="at-other-process", expires_at=NOW + 3600)
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
    assert results == ["at-other-process"]
    assert fake_issuer.refresh_calls == 0


async def test_a_refresh_that_cannot_be_saved_still_serves_this_process(
    store: AuthStore, fake_issuer, caplog: pytest.LogCaptureFixture
) -> None:
    seed(store, fake_issuer)
    tokens = source(store, fake_issuer)
    await tokens.access_token()
    # Saving takes a lock on auth.json.lock; a directory in its place makes saving fail.
    lock = store.path.with_name("auth.json.lock")
    lock.unlink()
    lock.mkdir()
    with caplog.at_level(logging.WARNING):
        new = await tokens.refresh()
    assert new.startswith("at-")
    assert await tokens.access_token() == new
    assert "could not save refreshed codex tokens" in caplog.text
    assert new not in caplog.text
    assert json.loads(store.path.read_text())["codex"]["access_token"] == "at-old"


async def test_the_default_refresher_follows_the_issuer_override(
    store: AuthStore, fake_issuer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FERMIX_OAUTH_ISSUER_OPENAI_CODEX", fake_issuer.url)
    seed(store, fake_issuer, expires_at=NOW - 5)
    token = await TokenSource(store, "codex", clock=clock).access_token()
    assert token.startswith("at-")
    assert fake_issuer.refresh_calls == 1


async def test_an_unknown_profile_has_no_refresher(store: AuthStore) -> None:
    store.put("mystery", {"access_token": "x", "refresh_token": "y"})
    tokens = TokenSource(store, "mystery")
    await tokens.access_token()
    with pytest.raises(ProviderError, match="no refresh is known"):
        await tokens.refresh()


def test_a_grant_never_prints_its_tokens() -> None:
    grant = TokenGrant(access_token="at-secret", refresh_token="rt-secret", id_token="id-secret")
    text = repr(grant)
    assert "secret" not in text
    assert grant.profile_changes() == {
        "access_token": "at-secret",
        "refresh_token": "rt-secret",
        "id_token": "id-secret",
    }


def test_a_source_without_a_store_is_a_clear_error() -> None:
    with pytest.raises(ProviderError, match=r"no auth\.json store"):
        TokenSource(None, "codex")  # type: ignore[arg-type]
