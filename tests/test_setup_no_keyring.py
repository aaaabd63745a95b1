"""``fermix setup`` on a headless machine: no OS keyring writer, no D-Bus session.

Runs the installed script with ``PYTHON_KEYRING_BACKEND`` set to keyring's ``fail`` backend
and no ``DBUS_SESSION_BUS_ADDRESS``, which is what a server without a Secret Service looks
like to the keyring library.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

FERMIX = shutil.which("fermix", path=os.path.dirname(sys.executable)) or "fermix"
KEY = "sk-headless-test-4242"
#: What any command may leave in the home without having "written" anything: its log and
#: derived data it can rebuild (``cache/``: scans and schemas kept between processes).
NOT_SETTINGS = ("logs/", "cache/")
FULL = ["setup", "--non-interactive", "--provider", "openai", "--user-name", "Ada"]


def run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [FERMIX, *args],
        env=env,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=60,
    )


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    environ = {
        k: v for k, v in os.environ.items() if not k.startswith(("DBUS_", "OPENAI_", "FERMIX_"))
    }
    environ["FERMIX_HOME"] = str(tmp_path / "home")
    environ["PYTHON_KEYRING_BACKEND"] = "keyring.backends.fail.Keyring"
    return environ


def written_files(home: Path) -> list[str]:
    return sorted(str(p.relative_to(home)) for p in home.rglob("*") if p.is_file())


def test_a_new_key_without_a_keyring_is_refused_up_front_with_the_choices(env) -> None:
    home = Path(env["FERMIX_HOME"])
    result = run([*FULL, "--api-key", KEY], env)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr and "crash" not in result.stderr
    assert KEY not in result.stdout + result.stderr
    assert "no OS keyring can store the OpenAI API key" in result.stderr
    for choice in ("--secrets-in-config", "--api-key-env NAME", "--api-key-command"):
        assert choice in result.stderr
    # "nothing was written" is true: no config, no prompt files, no USER.md.
    assert "nothing was written" in result.stderr
    assert [f for f in written_files(home) if not f.startswith(NOT_SETTINGS)] == []


def test_secrets_in_config_keeps_the_key_in_a_private_config(env) -> None:
    home = Path(env["FERMIX_HOME"])
    result = run([*FULL, "--api-key", KEY, "--secrets-in-config"], env)
    assert result.returncode == 0, result.stderr
    assert "kept in plaintext in config.toml (mode 0600" in result.stdout
    config = home / "config.toml"
    assert stat.S_IMODE(config.stat().st_mode) == 0o600
    block = tomllib.loads(config.read_text())["fermix_core"]["providers"]["openai"]
    assert block["api_key"] == KEY
    assert (home / "memory" / "main" / "USER.md").exists()
    # The daemon side resolves it: `providers list` shows the key's source, never the key.
    listing = run(["providers", "list", "--json"], env)
    assert KEY not in listing.stdout + listing.stderr


def test_an_env_reference_needs_no_keyring(env) -> None:
    home = Path(env["FERMIX_HOME"])
    result = run([*FULL, "--api-key-env", "WORK_OPENAI_KEY"], env)
    assert result.returncode == 0, result.stderr
    assert "export it in the daemon's environment" in result.stdout
    block = tomllib.loads((home / "config.toml").read_text())["fermix_core"]["providers"]
    assert block["openai"]["api_key"] == {"source": "env", "env": "WORK_OPENAI_KEY"}


def test_a_command_helper_needs_no_keyring(env) -> None:
    home = Path(env["FERMIX_HOME"])
    result = run([*FULL, "--api-key-command", "pass show fermix/openai"], env)
    assert result.returncode == 0, result.stderr
    block = tomllib.loads((home / "config.toml").read_text())["fermix_core"]["providers"]
    assert block["openai"]["api_key"] == {
        "source": "command",
        "command": ["pass", "show", "fermix/openai"],
    }


def test_a_locked_keyring_fails_the_save_cleanly_and_writes_nothing(env) -> None:
    # A keyring that exists but refuses the write: the check before asking cannot know,
    # so the save fails, with exit 1, no traceback and nothing written.
    env["PYTHON_KEYRING_BACKEND"] = "fermix_core.keyring_backend.LockedKeyring"
    home = Path(env["FERMIX_HOME"])
    result = run([*FULL, "--api-key", KEY], env)
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr and "crash" not in result.stderr
    assert "Nothing was written" in result.stderr
    assert KEY not in result.stdout + result.stderr
    assert [f for f in written_files(home) if not f.startswith(NOT_SETTINGS)] == []


def test_config_set_of_another_key_warns_once_that_a_plaintext_secret_stays(env) -> None:
    """Setup warns when a plaintext secret stays for lack of a keyring; config set must too."""
    home = Path(env["FERMIX_HOME"])
    home.mkdir(mode=0o700)
    (home / "config.toml").write_text(
        f'[fermix_core.providers.openai]\nprimary = true\napi_key = "{KEY}"\n'
    )
    (home / "config.toml").chmod(0o600)
    result = run(["config", "set", "fermix_core.agent.name", "Robin"], env)
    assert result.returncode == 0, result.stderr
    assert KEY not in result.stdout + result.stderr
    warned = [line for line in result.stderr.splitlines() if "plaintext" in line]
    assert len(warned) == 1, result.stderr
    assert "fermix_core.providers.openai.api_key" in warned[0]
    assert "--migrate-secrets" in warned[0]
    text = (home / "config.toml").read_text()
    assert KEY in text and 'name = "Robin"' in text


def test_a_bot_token_that_cannot_be_stored_is_not_told_to_use_its_ignored_variable(env) -> None:
    token = "123456789:AAHeadlessTelegramTokenForTheTest01"
    result = run(["config", "set", "fermix_channels.telegram.bot_token", token], env)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr and token not in result.stdout + result.stderr
    assert "cannot store new secret(s) fermix_channels.telegram.bot_token" in result.stderr
    # TELEGRAM_BOT_TOKEN is deliberately never read, so it must not be the advice.
    assert "TELEGRAM_BOT_TOKEN" not in result.stderr
    assert 'source = "command"' in result.stderr
