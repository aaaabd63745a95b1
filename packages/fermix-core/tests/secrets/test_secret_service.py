"""Against a real freedesktop Secret Service: gnome-keyring on a private D-Bus session.

Each test starts its own ``dbus-run-session`` with HOME and XDG dirs inside tmp_path, so the
keyring it creates (unlocked with a throwaway password) is thrown away with the test and the
developer's own keyring is never touched.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.secret_service

REQUIRED = ("dbus-run-session", "gnome-keyring-daemon")
MISSING = [name for name in REQUIRED if shutil.which(name) is None]
if MISSING:
    pytest.skip(
        f"Secret Service cannot start: {', '.join(MISSING)} not installed "
        "(apt-get install gnome-keyring dbus-daemon libsecret-tools)",
        allow_module_level=True,
    )

SECRET = "sk-proj-FAKE0secret0service0test0000000000000001"
FIELD = '(("fermix_core", "providers", "openai", "api_key"), "OPENAI_API_KEY")'

STORE = f"""
import json, keyring
from fermix_core.secrets import keyring_writer_available, store_plaintext_secrets
backend = keyring.get_keyring()
doc = {{"fermix_core": {{"providers": {{"openai": {{"api_key": {SECRET!r}}}}}}}}}
report = store_plaintext_secrets(doc, [{FIELD}], profile="ci")
print(json.dumps({{
    "backend": type(backend).__module__ + "." + type(backend).__name__,
    "writer": keyring_writer_available(backend),
    "moved": report.moved,
    "stored_as": doc["fermix_core"]["providers"]["openai"]["api_key"],
}}))
"""

RESOLVE = f"""
import json
from fermix_core.secrets import SecretResolver
resolved = SecretResolver({{}}, "ci", None).resolve({FIELD[:-1]}, "@keyring"))
print(json.dumps({{"value": resolved.value, "source": resolved.source,
                  "problem": resolved.problem}}))
"""

LOCK_THEN_RESOLVE = f"""
import json, secretstorage
from fermix_core.secrets import SecretResolver
connection = secretstorage.dbus_init()
secretstorage.get_default_collection(connection).lock()
resolved = SecretResolver({{}}, "ci", None, keyring_timeout=30).resolve({FIELD[:-1]}, "@keyring"))
print(json.dumps({{"value": resolved.value, "source": resolved.source,
                  "problem": resolved.problem}}))
"""


def run_in_session(tmp_path: Path, *scripts: str, lookup: bool = False) -> list[dict[str, object]]:
    """Start a private bus and an unlocked gnome-keyring, run each script in turn on it."""
    home = tmp_path / "home"
    runtime = home / "run"
    runtime.mkdir(parents=True, mode=0o700)
    commands = [
        "printf throwaway-pw | gnome-keyring-daemon --unlock --components=secrets >/dev/null"
    ]
    for n, script in enumerate(scripts):
        path = tmp_path / f"step{n}.py"
        path.write_text(script)
        commands.append(f'"{sys.executable}" "{path}"')
    if lookup:
        commands.append(
            "printf 'LOOKUP:'; secret-tool lookup service fermix:ci:OPENAI_API_KEY username fermix"
        )
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("DBUS_", "XDG_", "PYTHON_KEYRING"))
    }
    env.update(
        HOME=str(home),
        XDG_RUNTIME_DIR=str(runtime),
        XDG_DATA_HOME=str(home / "share"),
        XDG_CONFIG_HOME=str(home / "config"),
        PYTHON_KEYRING_BACKEND="keyring.backends.SecretService.Keyring",
    )
    proc = subprocess.run(
        ["dbus-run-session", "--", "sh", "-ec", " && ".join(commands)],
        env=env,
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )
    assert proc.returncode == 0, (
        f"session failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
    )
    lines = proc.stdout.splitlines()
    results: list[dict[str, object]] = [json.loads(line) for line in lines if line.startswith("{")]
    if lookup:
        results.append({"lookup": next(line for line in lines if line.startswith("LOOKUP:"))[7:]})
    return results


def test_store_and_resolve_through_a_real_secret_service(tmp_path: Path) -> None:
    lookup = shutil.which("secret-tool") is not None
    results = run_in_session(tmp_path, STORE, RESOLVE, lookup=lookup)
    stored, resolved = results[0], results[1]
    assert stored == {
        "backend": "keyring.backends.SecretService.Keyring",
        "writer": True,
        "moved": ["fermix_core.providers.openai.api_key"],
        "stored_as": "@keyring",
    }
    # Read back by a second process: the secret lives in the service, not in our memory.
    assert resolved == {"value": SECRET, "source": "keyring", "problem": None}
    if lookup:
        # libsecret's own client finds it at the documented coordinate.
        assert results[2] == {"lookup": SECRET}


def test_a_locked_secret_service_is_reported_not_raised(tmp_path: Path) -> None:
    stored, locked = run_in_session(tmp_path, STORE, LOCK_THEN_RESOLVE)
    assert stored["moved"] == ["fermix_core.providers.openai.api_key"]
    assert locked["value"] is None
    assert locked["source"] == "missing"
    problem = str(locked["problem"])
    assert problem.startswith("keyring unavailable: keyring.backends.SecretService.Keyring: ")
    assert SECRET not in problem
