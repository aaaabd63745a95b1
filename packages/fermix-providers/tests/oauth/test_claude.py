"""Claude subscription tokens: pasted setup tokens and Claude Code's stored login."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fermix_providers.oauth.claude import (
    claude_credentials_path,
    read_claude_code_login,
    setup_token_grant,
)
from fermix_providers.oauth.errors import LoginError

NOW = 1_700_000_000.0


def write(path: Path, data: object) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


def test_credentials_path_follows_claude_config_dir(tmp_path: Path) -> None:
    assert claude_credentials_path({}, home=tmp_path) == tmp_path / ".claude" / ".credentials.json"
    custom = tmp_path / "cc"
    assert claude_credentials_path({"CLAUDE_CONFIG_DIR": str(custom)}) == (
        custom / ".credentials.json"
    )


def test_a_setup_token_is_trimmed_and_never_refreshable() -> None:
    grant = setup_token_grant("  sk-ant-oat01-" + "x" * 30 + "\n")
    assert grant.access_token == "sk-ant-oat01-" + "x" * 30
    assert grant.refresh_token is None and grant.expires_at is None


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("", "is empty"),
        ("   ", "is empty"),
        ("sk-ant-api03-abcdefghijklmnopqrstuvwxyz", "is an Anthropic API key"),
        ("sk-ant-oat01-abc def-ghijklmnopqrstu", "contains spaces"),
        ("tooShortTok", "does not look like a token"),
    ],
)
def test_bad_setup_tokens_are_refused(value: str, message: str) -> None:
    with pytest.raises(LoginError, match=message) as info:
        setup_token_grant(value)
    if value.strip():
        assert value.strip() not in str(info.value)


def test_claude_code_login_is_read_with_millisecond_expiry(tmp_path: Path) -> None:
    path = write(
        tmp_path / ".credentials.json",
        {
            "claudeAiOauth": {
                "accessToken": "sk-ant-oat01-a",
                "refreshToken": "sk-ant-ort01-r",
                "expiresAt": int((NOW + 600) * 1000),
                "scopes": ["user:inference"],
                "subscriptionType": "pro",
            },
            "somethingElse": {"ignored": True},
        },
    )
    grant, extra = read_claude_code_login(path, now=NOW)
    assert grant.access_token == "sk-ant-oat01-a"
    assert grant.refresh_token == "sk-ant-ort01-r"
    assert grant.expires_at == NOW + 600
    assert grant.scope == "user:inference"
    assert extra == {"subscription": "pro"}


def test_an_expired_claude_code_login_with_a_refresh_token_is_still_importable(
    tmp_path: Path,
) -> None:
    path = write(
        tmp_path / "c.json",
        {"claudeAiOauth": {"accessToken": "a", "refreshToken": "r", "expiresAt": 1000}},
    )
    grant, _ = read_claude_code_login(path, now=NOW)
    assert grant.expires_at == 1000.0  # refreshed on first use


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "no Claude Code login was found"),
        ("{not json", "is not valid JSON"),
        ([1, 2], "holds no Claude subscription login"),
        ({"claudeAiOauth": "x"}, "holds no Claude subscription login"),
        ({"claudeAiOauth": {"refreshToken": "r"}}, "without an access token"),
        ({"claudeAiOauth": {"accessToken": "a", "expiresAt": 1000}}, "has expired"),
    ],
)
def test_unusable_claude_code_files_explain_the_alternative(
    tmp_path: Path, content: object, message: str
) -> None:
    path = tmp_path / ".credentials.json"
    if content is not None:
        write(path, content)
    with pytest.raises(LoginError, match=message) as info:
        read_claude_code_login(path, now=NOW)
    assert "--setup-token" in str(info.value)
