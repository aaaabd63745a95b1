"""``migrate_secrets`` and ``fermix setup --migrate-secrets`` on a real FERMIX_HOME."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import keyring
import pytest
from fermix_core.secrets import (
    KEYRING_ACCOUNT,
    SecretResolver,
    SecretStoreError,
    migrate_secrets,
)
from keyring.backends import fail

config = pytest.importorskip("fermix_core.config")
boot = pytest.importorskip("fermix_core.boot")

DEEPGRAM = "dg-FAKE0plaintext0key0123456789abcdef"
GOOGLE = "GOCSPX-FAKE0clientsecret000000000001"
CONFIG = f"""\
[fermix_core]
profile = "dev"

[fermix_core.transcription]
backend = "deepgram"
deepgram_api_key = "{DEEPGRAM}"  # pasted from the console

[fermix_core.oauth.google]
client_id = "fermix-test.apps.googleusercontent.com"
client_secret = "{GOOGLE}"

[fermix_core.oauth.github]
client_secret = {{ source = "env", env = "GH_CLIENT_SECRET" }}
"""


def write_config(home: object, text: str = CONFIG) -> Path:
    path: Path = home.config_file  # type: ignore[attr-defined]
    path.write_text(text)
    path.chmod(0o600)
    return path


def test_migrates_every_plaintext_secret_in_place(fermix_home: object) -> None:
    path = write_config(fermix_home)
    ring = keyring.get_keyring()
    assembly = boot.assemble(fermix_home, environ={}, entry_points=False)

    report = migrate_secrets(assembly)

    assert sorted(report.moved) == [
        "fermix_core.oauth.google.client_secret",
        "fermix_core.transcription.deepgram_api_key",
    ]
    text = path.read_text()
    assert DEEPGRAM not in text
    assert GOOGLE not in text
    assert 'deepgram_api_key = "@keyring"  # pasted from the console' in text
    assert 'client_secret = { source = "env", env = "GH_CLIENT_SECRET" }' in text
    assert stat.S_IMODE(path.stat().st_mode) == 0o600

    # Stored under the profile's coordinates, and they resolve back through the config.
    loaded = boot.assemble(fermix_home, environ={}, entry_points=False).load_config()
    resolver = SecretResolver({}, loaded.core.fermix_core.profile, None)
    by_path = {f.path: f for f in config.secret_fields(loaded, assembly.registry)}
    deepgram = by_path[("fermix_core", "transcription", "deepgram_api_key")]
    assert ring.get_password(f"fermix:dev:{deepgram.env}", KEYRING_ACCOUNT) == DEEPGRAM
    assert resolver.resolve(deepgram).value == DEEPGRAM
    google = by_path[("fermix_core", "oauth", "google", "client_secret")]
    assert resolver.resolve(google).value == GOOGLE


def test_second_run_has_nothing_to_do(fermix_home: object) -> None:
    path = write_config(fermix_home)
    assembly = boot.assemble(fermix_home, environ={}, entry_points=False)
    migrate_secrets(assembly)
    after_first = path.read_bytes()
    report = migrate_secrets(fermix_home, assembly.registry, environ={})
    assert report.moved == []
    assert path.read_bytes() == after_first


def test_without_a_keyring_writer_nothing_changes(fermix_home: object) -> None:
    path = write_config(fermix_home)
    keyring.set_keyring(fail.Keyring())  # fermix_home restores the previous backend
    assembly = boot.assemble(fermix_home, environ={}, entry_points=False)
    with pytest.raises(SecretStoreError) as caught:
        migrate_secrets(assembly)
    assert "deepgram_api_key" in str(caught.value)
    assert DEEPGRAM not in str(caught.value)
    assert path.read_text() == CONFIG


def test_an_invalid_config_is_refused_without_echoing_it(fermix_home: object) -> None:
    bad = CONFIG + f'\n[fermix_core.no_such_section]\nleaked = "{DEEPGRAM}"\n'
    path = write_config(fermix_home, bad)
    assembly = boot.assemble(fermix_home, environ={}, entry_points=False)
    with pytest.raises(SecretStoreError, match="fermix config validate") as caught:
        migrate_secrets(assembly)
    assert DEEPGRAM not in str(caught.value)
    assert path.read_text() == bad


def test_no_config_file_is_nothing_to_migrate(fermix_home: object) -> None:
    assembly = boot.assemble(fermix_home, environ={}, entry_points=False)
    assert migrate_secrets(assembly).moved == []
    assert not fermix_home.config_file.exists()  # type: ignore[attr-defined]


def run_cli(home: object, backend: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "FERMIX_HOME": str(home.path), "PYTHON_KEYRING_BACKEND": backend}  # type: ignore[attr-defined]
    return subprocess.run(
        [sys.executable, "-m", "fermix_core.cli", "setup", "--migrate-secrets"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_cli_migrate_secrets(fermix_home: object) -> None:
    path = write_config(fermix_home)
    proc = run_cli(fermix_home, "fermix_core.keyring_backend.MemoryKeyring")
    assert proc.returncode == 0, proc.stderr
    assert "moved fermix_core.transcription.deepgram_api_key to the keyring" in proc.stdout
    assert DEEPGRAM not in proc.stdout + proc.stderr
    assert DEEPGRAM not in path.read_text()


def test_cli_migrate_secrets_without_keyring_fails_with_the_fix(fermix_home: object) -> None:
    path = write_config(fermix_home)
    proc = run_cli(fermix_home, "keyring.backends.fail.Keyring")
    assert proc.returncode == 1
    assert "gnome-keyring" in proc.stderr
    assert DEEPGRAM not in proc.stdout + proc.stderr
    assert path.read_text() == CONFIG
