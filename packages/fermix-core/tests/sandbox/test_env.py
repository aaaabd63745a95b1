"""child_env: a minimal base, [sandbox.env] allow/deny/set, secrets only by explicit request."""

from __future__ import annotations

import keyring
import pytest
from fermix_core.config.secret import CommandSecret, EnvSecret
from fermix_core.keyring_backend import MemoryKeyring
from fermix_core.secrets import KEYRING_ACCOUNT, SecretResolver, keyring_service

HOST = {
    "PATH": "/opt/bin:/usr/bin",
    "HOME": "/somewhere/else",
    "LANG": "en_US.UTF-8",
    "TERM": "xterm",
    "TMPDIR": "/tmp/x",
    "USER": "me",
    "OPENAI_API_KEY": "sk-daemon-secret",
    "TELEGRAM_BOT_TOKEN": "123:abc",
    "AWS_SECRET_ACCESS_KEY": "aws-secret",
    "AWS_REGION": "eu-west-1",
    "NODE_ENV": "development",
    "NODE_AUTH_TOKEN": "npm-token",
    "NODE_DEBUG": "http",
    "EDITOR": "vim",
}


def test_the_base_is_minimal_and_home_is_the_os_home(layout) -> None:
    env = layout.policy(environ=HOST).child_env()
    assert env == {
        "PATH": "/opt/bin:/usr/bin",
        "HOME": str(layout.home),
        "LANG": "en_US.UTF-8",
        "TERM": "xterm",
        "TMPDIR": "/tmp/x",
        "USER": "me",
    }


def test_defaults_fill_a_bare_host(layout) -> None:
    env = layout.policy(environ={}).child_env()
    assert env["PATH"] and env["LANG"] == "C.UTF-8" and env["HOME"] == str(layout.home)
    assert set(env) == {"PATH", "HOME", "LANG"}


def test_daemon_secrets_never_leak_through_a_glob(layout) -> None:
    policy = layout.policy(environ=HOST, env_allow=("*",))
    env = policy.child_env()
    for secret in (
        "OPENAI_API_KEY",
        "TELEGRAM_BOT_TOKEN",
        "AWS_SECRET_ACCESS_KEY",
        "NODE_AUTH_TOKEN",
    ):
        assert secret not in env
    assert env["EDITOR"] == "vim" and env["AWS_REGION"] == "eu-west-1"
    assert "sk-daemon-secret" not in repr(env)


def test_an_exact_name_passes_a_credential_the_owner_chose(layout) -> None:
    policy = layout.policy(environ=HOST, env_allow=("NODE_*", "NODE_AUTH_TOKEN"))
    env = policy.child_env()
    assert env["NODE_ENV"] == "development" and env["NODE_AUTH_TOKEN"] == "npm-token"


def test_deny_wins_over_allow_but_cannot_remove_path_or_home(layout) -> None:
    policy = layout.policy(
        environ=HOST, env_allow=("NODE_*",), env_deny=("NODE_D*", "PATH", "HOME", "TERM")
    )
    env = policy.child_env()
    assert "NODE_DEBUG" not in env and "TERM" not in env
    assert env["PATH"] and env["HOME"] == str(layout.home)


def test_set_values_and_extra(layout) -> None:
    policy = layout.policy(environ=HOST, env_set={"PAGER": "cat", "LANG": "C"})
    env = policy.child_env({"GIT_TERMINAL_PROMPT": "0", "PAGER": "less"})
    assert env["LANG"] == "C" and env["GIT_TERMINAL_PROMPT"] == "0" and env["PAGER"] == "less"


@pytest.fixture
def memory_keyring():
    previous = keyring.get_keyring()
    backend = MemoryKeyring()
    keyring.set_keyring(backend)
    try:
        yield backend
    finally:
        keyring.set_keyring(previous)


def test_set_secrets_are_resolved_from_the_keyring(layout, memory_keyring) -> None:
    memory_keyring.set_password(
        keyring_service("GITHUB_TOKEN", "general"), KEYRING_ACCOUNT, "ghp-x"
    )
    resolver = SecretResolver(environ={}, keyring_backend=memory_keyring)
    policy = layout.policy(environ={}, env_set={"GITHUB_TOKEN": "@keyring"}, resolver=resolver)
    assert policy.child_env()["GITHUB_TOKEN"] == "ghp-x"
    assert "ghp-x" not in repr(policy.describe())


def test_env_and_command_secret_forms_resolve(layout) -> None:
    resolver = SecretResolver(environ={"WORK_TOKEN": "from-env"})
    policy = layout.policy(
        environ={},
        resolver=resolver,
        env_set={
            "A_TOKEN": EnvSecret(source="env", env="WORK_TOKEN"),
            "B_TOKEN": CommandSecret(source="command", command=["printf", "from-helper"]),
        },
    )
    env = policy.child_env()
    assert env["A_TOKEN"] == "from-env" and env["B_TOKEN"] == "from-helper"


def test_an_unresolvable_secret_is_left_out_and_logged_without_its_value(
    layout, memory_keyring, caplog
) -> None:
    resolver = SecretResolver(environ={}, keyring_backend=memory_keyring)
    policy = layout.policy(environ={}, env_set={"MISSING_TOKEN": "@keyring"}, resolver=resolver)
    with caplog.at_level("WARNING", logger="fermix.sandbox"):
        env = policy.child_env()
    assert "MISSING_TOKEN" not in env
    assert "sandbox.env.set.MISSING_TOKEN" in caplog.text


def test_describe_masks_credential_like_plain_values(layout) -> None:
    policy = layout.policy(environ={}, env_set={"PAGER": "cat", "API_TOKEN": "plain-secret"})
    shown = policy.describe()["env"]["set"]
    assert shown == {"PAGER": "cat", "API_TOKEN": "********"}


def test_a_star_glob_withholds_credentials_by_name_and_by_value(layout) -> None:
    """Each of these passed `allow = ["*"]` before."""
    host = {
        "PATH": "/usr/bin",
        "MYSQL_PWD": "hunter2",
        "DOCKER_PASS": "hunter2",
        "DATABASE_URL": "postgres://app:hunter2@db.internal:5432/app",
        "SENTRY_DSN": "https://0123456789abcdef0123456789abcdef@o1.ingest.sentry.io/42",
        "SLACK_WEBHOOK_URL": "https://hooks.slack.com/services/T000/B000/XXXXXXXX",
        # No telling name at all: caught by the value.
        "BACKEND": "redis://default:s3cret-pass@cache:6379/0",
        "HOOK": "https://hooks.slack.com/services/T111/B111/YYYYYYYY",
        "OPAQUE": "ghp_" + "a1" * 18,
        # Not credentials: these still pass.
        "PWD": "/home/me",
        "API_BASE": "https://api.example.com/v1",
        "PUBLIC_URL": "https://user@example.com/",
        "EDITOR": "vim",
    }
    env = layout.policy(environ=host, env_allow=("*",)).child_env()
    for name in (
        "MYSQL_PWD",
        "DOCKER_PASS",
        "DATABASE_URL",
        "SENTRY_DSN",
        "SLACK_WEBHOOK_URL",
        "BACKEND",
        "HOOK",
        "OPAQUE",
    ):
        assert name not in env, name
    assert "hunter2" not in repr(env) and "s3cret" not in repr(env)
    for name in ("PWD", "API_BASE", "PUBLIC_URL", "EDITOR"):
        assert env[name] == host[name], name
    exact = layout.policy(environ=host, env_allow=("*", "DATABASE_URL")).child_env()
    assert exact["DATABASE_URL"] == host["DATABASE_URL"]  # named exactly: the owner's choice
