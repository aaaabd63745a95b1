"""Login bookkeeping: provider names, the stored record, status rows, auth_mode writes."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest
import tomlkit
from fermix_core.authfile import AuthStore
from fermix_core.boot import assemble
from fermix_providers import catalog
from fermix_providers.oauth.accounts import (
    auth_mode_in,
    login_status,
    normalize_provider,
    profile_record,
    set_auth_mode,
)
from fermix_providers.oauth.errors import LoginError
from fermix_providers.oauth.tokens import TokenGrant


def test_provider_names_and_aliases() -> None:
    assert normalize_provider(None) == "openai_codex"
    assert normalize_provider(" Codex ") == "openai_codex"
    assert normalize_provider("grok") == "xai"
    assert normalize_provider("claude") == "anthropic"
    with pytest.raises(LoginError, match="has no subscription login"):
        normalize_provider("openai")


def test_profile_record_leaves_out_unknowns_and_reads_the_email() -> None:
    import base64
    import json

    claims = base64.urlsafe_b64encode(json.dumps({"email": "a@b.c"}).encode()).decode()
    grant = TokenGrant(access_token="at", id_token=f"h.{claims.rstrip('=')}.s")
    record = profile_record("xai", grant, source="browser", now=5.0)
    assert record == {
        "provider": "xai",
        "source": "browser",
        "obtained_at": 5.0,
        "access_token": "at",
        "id_token": grant.id_token,
        "email": "a@b.c",
    }


def test_status_of_an_expired_unrefreshable_login_says_log_in_again(tmp_path: Path) -> None:
    store = AuthStore(tmp_path / "auth.json")
    store.put("anthropic_oauth", {"access_token": "t", "expires_at": 10.0})
    doc = tomlkit.parse('[fermix_core.providers.anthropic]\nauth_mode = "oauth"\n')
    (row,) = login_status(store, doc, ("anthropic",), now=100.0)
    assert row["expired"] and not row["refreshable"] and not row["usable"]
    assert row["auth_mode"] == "oauth"
    assert row["active"] is False


def test_auth_mode_in_tolerates_odd_documents() -> None:
    assert auth_mode_in(None, "xai") is None
    assert auth_mode_in(tomlkit.parse("fermix_core = 3"), "xai") is None
    numeric = tomlkit.parse("[fermix_core.providers.xai]\nauth_mode = 1\n")
    assert auth_mode_in(numeric, "xai") is None


def _assembly(tmp_path: Path):
    from fermix_core.home import FermixHome

    home = FermixHome(tmp_path / "home")
    home.ensure()
    plugins = [
        (f"providers.{n}", importlib.import_module(m)) for n, m in catalog.PLUGIN_MODULES.items()
    ]
    return home, plugins


def test_set_auth_mode_refuses_what_would_not_validate(tmp_path: Path) -> None:
    home, plugins = _assembly(tmp_path)
    home.config_file.write_text("[fermix_core.providers.xai]\nbogus_key = 1\n")
    home.config_file.chmod(0o600)
    assembly = assemble(home, environ={}, plugins=plugins, entry_points=False)
    # The file is already invalid; the change adds no new problem, so it is written.
    effect = set_auth_mode(assembly, "xai", "oauth")
    assert effect.changed and effect.error is None
    # Openai_codex has no auth_mode key: the writer refuses and the error says what to run.
    refused = set_auth_mode(assembly, "openai_codex", "oauth")
    assert refused.error is not None
    assert "fermix config set fermix_core.providers.openai_codex.auth_mode" in refused.error


def test_set_auth_mode_with_an_unreadable_config(tmp_path: Path) -> None:
    home, plugins = _assembly(tmp_path)
    home.config_file.write_text("[[[ not toml")
    home.config_file.chmod(0o600)
    assembly = assemble(home, environ={}, plugins=plugins, entry_points=False)
    effect = set_auth_mode(assembly, "anthropic", "oauth")
    assert effect.error is not None and "cannot be read" in effect.error
    assert home.config_file.read_text() == "[[[ not toml"
