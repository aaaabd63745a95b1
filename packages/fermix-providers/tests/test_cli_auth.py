"""``fermix auth`` on a real home: real auth.json, real config.toml, real fake issuer."""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import sys
import time
from pathlib import Path

import httpx
import pytest
import tomlkit
import typer
from fermix_core.authfile import AuthStore
from fermix_providers import core_plugin
from fermix_providers.cli_auth import build_app
from typer.testing import CliRunner

runner = CliRunner()


def load_fake_issuer():
    """The OAuth tests' fake issuer module, loaded by path (shared with tests/oauth)."""
    name = "fermix_providers_tests_fake_issuer"
    if name not in sys.modules:
        path = Path(__file__).parent / "oauth" / "fake_issuer.py"
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


@pytest.fixture
def fake_issuer():
    with load_fake_issuer().running() as issuer:
        yield issuer


@pytest.fixture
def xai_issuer(fake_issuer):
    fake_issuer.authorize_path = "/oauth2/authorize"
    fake_issuer.token_path = "/oauth2/token"
    return fake_issuer


def browser(url: str) -> bool:
    """A synchronous browser: follows the issuer's redirect back to the login listener."""
    with httpx.Client(follow_redirects=True) as client:
        page = client.get(url)
    assert page.status_code == 200, page.text
    return True


@pytest.fixture
def cli(fermix_home, monkeypatch):
    monkeypatch.setenv("FERMIX_LOAD_PLUGINS", "fermix-providers")
    monkeypatch.delenv("CLAUDE_CODE_OAUTH_TOKEN", raising=False)
    monkeypatch.delenv("XAI_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)

    def invoke(*args: str, input: str | None = None, opener=browser, login_timeout=None):
        app = build_app(opener=opener, login_timeout=login_timeout)
        return runner.invoke(app, list(args), input=input)

    return invoke


def write_config(home, text: str) -> None:
    home.config_file.write_text(text)
    home.config_file.chmod(0o600)


def blocks(home) -> dict:
    if not home.config_file.exists():
        return {}
    data = tomlkit.parse(home.config_file.read_text()).unwrap()
    return data.get("fermix_core", {}).get("providers", {})


def store(home) -> AuthStore:
    return AuthStore(home.auth_file)


PRIMARY_ANTHROPIC = '[fermix_core.providers.anthropic]\nprimary = true\napi_key = "@keyring"\n'


# --------------------------------------------------------------------------- registration


def test_the_plugin_adds_the_auth_group() -> None:
    app = typer.Typer()

    @app.callback()
    def root() -> None:
        """root"""

    core_plugin.fermix_cli(app)
    group = typer.main.get_group(app)
    auth = group.commands["auth"]
    assert set(auth.commands) == {"login", "status", "logout"}


def test_the_plugin_host_wires_auth_and_the_setup_step() -> None:
    from fermix_core.plugins.host import PluginHost
    from fermix_core.specs import SetupStepSpec

    host = PluginHost()
    host.register(core_plugin, "providers.setup")
    registry = host.collect()
    assert registry.errors == []
    assert "provider" in registry.typed(SetupStepSpec)
    app = typer.Typer()

    @app.callback()
    def root() -> None:
        """root"""

    host.extend_cli(app)
    result = runner.invoke(app, ["auth", "--help"])
    assert result.exit_code == 0
    for command in ("login", "status", "logout"):
        assert command in result.stdout


# --------------------------------------------------------------------------- Codex


def test_codex_login_stores_the_profile_and_leaves_config_alone(
    cli, fermix_home, fake_issuer, monkeypatch
) -> None:
    monkeypatch.setenv("FERMIX_OAUTH_ISSUER_OPENAI_CODEX", fake_issuer.url)
    write_config(fermix_home, PRIMARY_ANTHROPIC)
    before = fermix_home.config_file.read_text()
    result = cli("login", "--port", "0")
    assert result.exit_code == 0, result.output
    profile = store(fermix_home).get("codex")
    assert profile is not None
    assert profile["access_token"].startswith("at-")
    assert profile["refresh_token"].startswith("rt-")
    assert profile["account_id"] == "acct-123"
    assert profile["email"] == "owner@example.com"
    assert profile["provider"] == "openai_codex"
    assert profile["source"] == "browser"
    assert (fermix_home.auth_file.stat().st_mode & 0o777) == 0o600
    assert fermix_home.config_file.read_text() == before
    assert "Signed in to openai_codex as owner@example.com" in result.stdout
    assert "primary provider was not changed" in result.stdout
    assert "takes effect at the next daemon start" in result.stdout
    assert profile["access_token"] not in result.output
    assert profile["refresh_token"] not in result.output


def test_no_browser_prints_the_url_only(cli, fermix_home, fake_issuer, monkeypatch) -> None:
    """With --no-browser nothing is opened; the URL is printed and the listener waits."""
    monkeypatch.setenv("FERMIX_OAUTH_ISSUER_OPENAI_CODEX", fake_issuer.url)
    result = cli("login", "--port", "0", "--no-browser", login_timeout=0.3)
    assert result.exit_code == 1
    assert fake_issuer.authorize_requests == []  # nobody followed the URL
    assert "/oauth/authorize?" in result.stdout
    assert "no sign-in came back" in result.stderr
    assert store(fermix_home).get("codex") is None


def test_a_refused_sign_in_stores_nothing(cli, fermix_home, fake_issuer, monkeypatch) -> None:
    monkeypatch.setenv("FERMIX_OAUTH_ISSUER_OPENAI_CODEX", fake_issuer.url)
    fake_issuer.deny = True

    def denied_browser(url: str) -> bool:
        with httpx.Client(follow_redirects=True) as client:
            client.get(url)
        return True

    result = cli("login", "--port", "0", opener=denied_browser)
    assert result.exit_code == 1
    assert "not approved (access_denied" in result.stderr
    assert not fermix_home.auth_file.exists()


def test_an_unsafe_auth_file_stops_the_login_before_any_browser(
    cli, fermix_home, fake_issuer, monkeypatch
) -> None:
    monkeypatch.setenv("FERMIX_OAUTH_ISSUER_OPENAI_CODEX", fake_issuer.url)
    fermix_home.auth_file.write_text("{}")
    os.chmod(fermix_home.auth_file, 0o644)
    result = cli("login", "--port", "0")
    assert result.exit_code == 1
    assert "chmod 600" in result.stderr
    assert fake_issuer.authorize_requests == []


# --------------------------------------------------------------------------- xAI


def test_xai_login_sets_oauth_mode_but_never_primary(
    cli, fermix_home, xai_issuer, monkeypatch
) -> None:
    monkeypatch.setenv("FERMIX_OAUTH_ISSUER_XAI", xai_issuer.url)
    write_config(
        fermix_home,
        PRIMARY_ANTHROPIC + f'\n[fermix_core.providers.xai]\nbase_url = "{xai_issuer.url}/v1"\n',
    )
    result = cli("login", "--provider", "grok", "--port", "0")
    assert result.exit_code == 0, result.output
    profile = store(fermix_home).get("xai_oauth")
    assert profile is not None and profile["provider"] == "xai"
    assert xai_issuer.models_auth == [f"Bearer {profile['access_token']}"]
    config = blocks(fermix_home)
    assert config["xai"]["auth_mode"] == "oauth"
    assert "primary" not in config["xai"]
    assert config["anthropic"]["primary"] is True
    assert 'set fermix_core.providers.xai.auth_mode = "oauth"' in result.stdout
    authorize = xai_issuer.authorize_requests[0]
    assert "api:access" in authorize["scope"].split()
    assert authorize["redirect_uri"].endswith("/callback")


def test_xai_403_means_the_plan_lacks_api_access(cli, fermix_home, xai_issuer, monkeypatch) -> None:
    monkeypatch.setenv("FERMIX_OAUTH_ISSUER_XAI", xai_issuer.url)
    write_config(fermix_home, f'[fermix_core.providers.xai]\nbase_url = "{xai_issuer.url}/v1"\n')
    before = fermix_home.config_file.read_text()
    xai_issuer.models_status = 403
    result = cli("login", "--provider", "xai", "--port", "0")
    assert result.exit_code == 1
    assert "Grok plan does not include API access" in result.stderr
    assert "not a stale token" in result.stderr
    assert store(fermix_home).get("xai_oauth") is None
    assert fermix_home.config_file.read_text() == before


def test_xai_login_when_the_api_check_cannot_be_made_keeps_the_login(
    cli, fermix_home, xai_issuer, monkeypatch
) -> None:
    monkeypatch.setenv("FERMIX_OAUTH_ISSUER_XAI", xai_issuer.url)
    write_config(fermix_home, f'[fermix_core.providers.xai]\nbase_url = "{xai_issuer.url}/v1"\n')
    xai_issuer.models_status = 500
    result = cli("login", "--provider", "xai", "--port", "0")
    assert result.exit_code == 0, result.output
    assert "could not confirm Grok API access (HTTP 500)" in result.stderr
    assert store(fermix_home).get("xai_oauth") is not None


# --------------------------------------------------------------------------- Anthropic


SETUP_TOKEN = "sk-ant-oat01-" + "a" * 40


def test_anthropic_setup_token_is_pasted_hidden(cli, fermix_home) -> None:
    write_config(fermix_home, PRIMARY_ANTHROPIC)
    result = cli("login", "--provider", "anthropic", "--setup-token", input=SETUP_TOKEN + "\n")
    assert result.exit_code == 0, result.output
    profile = store(fermix_home).get("anthropic_oauth")
    assert profile == {
        "access_token": SETUP_TOKEN,
        "obtained_at": profile["obtained_at"],
        "provider": "anthropic",
        "source": "setup_token",
    }
    assert SETUP_TOKEN not in result.stdout
    config = blocks(fermix_home)["anthropic"]
    assert config["auth_mode"] == "oauth"
    assert config["primary"] is True  # untouched, not set by the login


def test_anthropic_setup_token_refuses_an_api_key(cli, fermix_home) -> None:
    result = cli(
        "login", "--provider", "anthropic", "--setup-token", input="sk-ant-api03-xyz-abcdefghij\n"
    )
    assert result.exit_code == 1
    assert "is an Anthropic API key" in result.stderr
    assert "sk-ant-api03" not in result.output.replace("sk-ant-api", "")  # never echoed back
    assert not fermix_home.auth_file.exists()


def test_anthropic_from_the_environment(cli, fermix_home, monkeypatch) -> None:
    monkeypatch.setenv("CLAUDE_CODE_OAUTH_TOKEN", SETUP_TOKEN)
    result = cli("login", "--provider", "claude")
    assert result.exit_code == 0, result.output
    profile = store(fermix_home).get("anthropic_oauth")
    assert profile is not None
    assert (profile["source"], profile["access_token"]) == ("env", SETUP_TOKEN)


def test_anthropic_without_a_source_explains_the_three_ways(cli, fermix_home) -> None:
    result = cli("login", "--provider", "anthropic")
    assert result.exit_code == 1
    for way in ("--setup-token", "--import-claude-code", "CLAUDE_CODE_OAUTH_TOKEN"):
        assert way in result.stderr


def test_anthropic_import_from_claude_code(cli, fermix_home, tmp_path: Path) -> None:
    credentials = tmp_path / "claude" / ".credentials.json"
    credentials.parent.mkdir()
    expires_ms = int((time.time() + 3600) * 1000)
    credentials.write_text(
        json.dumps(
            {
                "claudeAiOauth": {
                    "accessToken": "sk-ant-oat01-imported",
                    "refreshToken": "sk-ant-ort01-imported",
                    "expiresAt": expires_ms,
                    "scopes": ["user:inference", "user:profile"],
                    "subscriptionType": "max",
                }
            }
        )
    )
    result = cli(
        "login",
        "--provider",
        "anthropic",
        "--import-claude-code",
        "--claude-credentials",
        str(credentials),
    )
    assert result.exit_code == 0, result.output
    profile = store(fermix_home).get("anthropic_oauth")
    assert profile is not None
    assert profile["access_token"] == "sk-ant-oat01-imported"
    assert profile["refresh_token"] == "sk-ant-ort01-imported"
    assert profile["expires_at"] == expires_ms / 1000
    assert profile["subscription"] == "max"
    assert profile["scope"] == "user:inference user:profile"
    assert profile["source"] == "claude_code"
    assert "refresh it separately" in result.stdout


def test_anthropic_flags_are_for_anthropic_only(cli, fermix_home) -> None:
    result = cli("login", "--provider", "xai", "--setup-token")
    assert result.exit_code == 1
    assert "are for --provider anthropic" in result.stderr


def test_an_unknown_provider_is_named(cli) -> None:
    result = cli("login", "--provider", "mistral")
    assert result.exit_code == 1
    assert "'mistral' has no subscription login" in result.stderr
    assert "fermix setup --provider NAME --api-key KEY" in result.stderr


# --------------------------------------------------------------------------- status


def test_status_json_reports_facts_not_tokens(cli, fermix_home) -> None:
    write_config(fermix_home, '[fermix_core.providers.xai]\nauth_mode = "api_key"\n')
    auth = store(fermix_home)
    auth.put(
        "codex",
        {
            "access_token": "at-secret",
            "refresh_token": "rt-secret",
            "expires_at": time.time() - 10,
            "account_id": "acct-1",
            "source": "browser",
        },
    )
    auth.put("xai_oauth", {"access_token": "xai-secret", "source": "browser"})
    result = cli("status", "--json")
    assert result.exit_code == 0, result.output
    assert "secret" not in result.stdout
    rows = {row["provider"]: row for row in json.loads(result.stdout)}
    assert list(rows) == ["openai_codex", "anthropic", "xai"]
    codex = rows["openai_codex"]
    assert codex["logged_in"] and codex["expired"] and codex["refreshable"]
    assert codex["active"] and codex["account_id"] == "acct-1"
    assert rows["anthropic"] == {
        "provider": "anthropic",
        "profile": "anthropic_oauth",
        "logged_in": False,
        "auth_mode": "api_key",
        "active": False,
    }
    # A stored Grok login is inert while auth_mode is api_key.
    assert rows["xai"]["logged_in"] and not rows["xai"]["active"]


def test_status_text_and_single_provider(cli, fermix_home) -> None:
    store(fermix_home).put("anthropic_oauth", {"access_token": "tok", "source": "setup_token"})
    result = cli("status")
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert lines[0].startswith("openai_codex  not logged in")
    assert "logged in (source setup_token; no expiry known)" in lines[1]
    assert 'inactive: auth_mode is "api_key"' in lines[1]
    one = cli("status", "--provider", "xai")
    assert one.stdout.splitlines() == ["xai  not logged in (`fermix auth login --provider xai`)"]


# --------------------------------------------------------------------------- logout


def test_logout_removes_the_login_and_reverts_auth_mode(cli, fermix_home) -> None:
    write_config(
        fermix_home,
        '[fermix_core.providers.anthropic]\nprimary = true\nauth_mode = "oauth"\n',
    )
    store(fermix_home).put("anthropic_oauth", {"access_token": "tok"})
    store(fermix_home).put("codex", {"access_token": "other"})
    result = cli("logout", "--provider", "anthropic")
    assert result.exit_code == 0, result.output
    assert store(fermix_home).profiles() == ["codex"]
    config = blocks(fermix_home)["anthropic"]
    assert config == {"primary": True, "auth_mode": "api_key"}
    assert "has no API key yet" in result.stdout
    assert "takes effect at the next daemon start" in result.stdout
    again = cli("logout", "--provider", "anthropic")
    assert "No anthropic login was stored." in again.stdout


def test_logout_tells_a_running_daemon_to_restart(cli, fermix_home) -> None:
    store(fermix_home).put("codex", {"access_token": "tok"})
    daemon = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    daemon.bind(str(fermix_home.daemon_sock))
    daemon.listen()
    try:
        result = cli("logout")
    finally:
        daemon.close()
    assert result.exit_code == 0, result.output
    assert "A daemon is running: run `fermix restart`" in result.stdout
    assert store(fermix_home).get("codex") is None


def test_a_stale_daemon_socket_is_not_a_running_daemon(cli, fermix_home) -> None:
    store(fermix_home).put("codex", {"access_token": "tok"})
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(fermix_home.daemon_sock))
    stale.close()  # the file stays, nobody listens
    result = cli("logout")
    assert "next daemon start" in result.stdout
