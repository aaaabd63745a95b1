from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path

import pytest
from fermix_core.hookspecs import hookimpl
from fermix_core.keyring_backend import LockedKeyring, MemoryKeyring
from fermix_core.logs import redact
from fermix_core.plugins.host import PluginHost
from fermix_core.secrets import (
    KEYRING_ACCOUNT,
    ResolvedSecret,
    SecretRequest,
    SecretResolver,
    keyring_service,
)
from keyring.backend import KeyringBackend
from keyring.backends import fail
from keyring.compat import properties

OPENAI = ("fermix_core", "providers", "openai", "api_key")

try:  # the error SecretService raises when the bus has no Secret Service (Linux only)
    from secretstorage.exceptions import SecretServiceNotAvailableException as BusError
except ImportError:  # pragma: no cover - macOS / Windows

    class BusError(Exception):  # type: ignore[no-redef]
        pass


@dataclass(frozen=True)
class Field:
    """Shaped like ``fermix_core.config.SecretField``."""

    path: tuple[str, ...]
    env: str
    value: object = None
    overridable: bool = True


def field(value: object = None, env: str = "OPENAI_API_KEY", **kw: object) -> Field:
    return Field(OPENAI, env, value, **kw)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- coordinates


@pytest.mark.parametrize(
    ("profile", "service"),
    [
        (None, "fermix:OPENAI_API_KEY"),
        ("general", "fermix:OPENAI_API_KEY"),
        ("", "fermix:OPENAI_API_KEY"),
        ("dev", "fermix:dev:OPENAI_API_KEY"),
        ("work-laptop", "fermix:work-laptop:OPENAI_API_KEY"),
    ],
)
def test_keyring_service_per_profile(profile: str | None, service: str) -> None:
    assert keyring_service("OPENAI_API_KEY", profile) == service


def test_keyring_service_needs_an_env_name() -> None:
    with pytest.raises(ValueError, match="environment variable"):
        keyring_service("", "general")


# --------------------------------------------------------------------------- order


def test_environment_wins_over_everything(memory_keyring: MemoryKeyring) -> None:
    memory_keyring.set_password("fermix:OPENAI_API_KEY", KEYRING_ACCOUNT, "from-keyring-1")
    resolver = SecretResolver({"OPENAI_API_KEY": "from-env-1"}, "general", None, memory_keyring)
    assert resolver.resolve(field("@keyring")) == ResolvedSecret("from-env-1", "env")
    assert resolver.resolve(field("plain-text-1")).source == "env"


def test_empty_environment_variable_counts_as_unset() -> None:
    resolver = SecretResolver({"OPENAI_API_KEY": ""}, "general", None)
    assert resolver.resolve(field("plain-text-1")) == ResolvedSecret("plain-text-1", "plaintext")


def test_not_overridable_slot_ignores_its_environment(memory_keyring: MemoryKeyring) -> None:
    memory_keyring.set_password("fermix:TELEGRAM_BOT_TOKEN", KEYRING_ACCOUNT, "stored-token-1")
    resolver = SecretResolver(
        {"TELEGRAM_BOT_TOKEN": "env-token-1"}, "general", None, memory_keyring
    )
    slot = field("@keyring", env="TELEGRAM_BOT_TOKEN", overridable=False)
    assert resolver.resolve(slot) == ResolvedSecret("stored-token-1", "keyring")


class VaultPlugin:
    def __init__(self) -> None:
        self.requests: list[SecretRequest] = []

    @hookimpl
    def fermix_resolve_secret(self, request: SecretRequest) -> str | None:
        self.requests.append(request)
        return "from-vault-1" if request.env == "OPENAI_API_KEY" else None


def test_plugin_hook_comes_after_environment_and_before_stored_value() -> None:
    host = PluginHost()
    vault = VaultPlugin()
    host.register(vault, "vault")

    resolver = SecretResolver({}, "dev", host)
    assert resolver.resolve(field("plain-text-1")) == ResolvedSecret("from-vault-1", "plugin")
    request = vault.requests[0]
    assert request.env == "OPENAI_API_KEY"
    assert request.path == OPENAI
    assert request.profile == "dev"
    assert request.value == "plain-text-1"

    env_first = SecretResolver({"OPENAI_API_KEY": "from-env-1"}, "dev", host)
    assert env_first.resolve(field("plain-text-1")).source == "env"
    assert len(vault.requests) == 1  # the hook is not asked when the environment answered

    other = Field(("fermix_core", "providers", "xai", "api_key"), "XAI_API_KEY", "xai-plain-1")
    assert resolver.resolve(other) == ResolvedSecret("xai-plain-1", "plaintext")


class BrokenPlugin:
    @hookimpl
    def fermix_resolve_secret(self, request: SecretRequest) -> str | None:
        raise RuntimeError("vault is down")


class WrongTypePlugin:
    @hookimpl
    def fermix_resolve_secret(self, request: SecretRequest) -> object:
        return 12345


@pytest.mark.parametrize("plugin", [BrokenPlugin(), WrongTypePlugin()])
def test_misbehaving_plugin_falls_through_to_stored_value(plugin: object) -> None:
    host = PluginHost()
    host.register(plugin, "bad")
    resolver = SecretResolver({}, "general", host)
    assert resolver.resolve(field("plain-text-1")) == ResolvedSecret("plain-text-1", "plaintext")


# --------------------------------------------------------------------------- stored forms


@pytest.mark.parametrize("value", [None, ""])
def test_unset_slot_is_missing_without_a_problem(value: object) -> None:
    assert SecretResolver({}, "general", None).resolve(field(value)) == ResolvedSecret(
        None, "missing", None
    )


def test_keyring_marker_reads_the_profile_coordinate(memory_keyring: MemoryKeyring) -> None:
    memory_keyring.set_password("fermix:OPENAI_API_KEY", KEYRING_ACCOUNT, "general-key-1")
    memory_keyring.set_password("fermix:dev:OPENAI_API_KEY", KEYRING_ACCOUNT, "dev-key-1")
    general = SecretResolver({}, "general", None, memory_keyring)
    dev = SecretResolver({}, "dev", None, memory_keyring)
    assert general.resolve(field("@keyring")) == ResolvedSecret("general-key-1", "keyring")
    assert dev.resolve(field("@keyring")) == ResolvedSecret("dev-key-1", "keyring")


def test_keyring_marker_uses_keyrings_default_backend(default_keyring: MemoryKeyring) -> None:
    default_keyring.set_password("fermix:OPENAI_API_KEY", KEYRING_ACCOUNT, "default-backend-1")
    resolved = SecretResolver({}, "general", None).resolve(field("@keyring"))
    assert resolved == ResolvedSecret("default-backend-1", "keyring")


def test_keyring_without_the_entry_names_the_coordinate(memory_keyring: MemoryKeyring) -> None:
    resolved = SecretResolver({}, "dev", None, memory_keyring).resolve(field("@keyring"))
    assert resolved.value is None
    assert resolved.source == "missing"
    assert "fermix:dev:OPENAI_API_KEY" in (resolved.problem or "")
    assert "OPENAI_API_KEY" in (resolved.problem or "")


class DBusDownKeyring(KeyringBackend):
    @properties.classproperty
    def priority(cls) -> float:
        return -10

    def get_password(self, service: str, username: str) -> str | None:
        raise BusError("no bus")

    def set_password(self, service: str, username: str, password: str) -> None:
        raise BusError("no bus")


@pytest.mark.parametrize(
    ("backend", "expected"),
    [
        (
            LockedKeyring(),
            "keyring unavailable: fermix_core.keyring_backend.LockedKeyring: KeyringLocked",
        ),
        (fail.Keyring(), "keyring unavailable: keyring.backends.fail.Keyring: NoKeyringError"),
        (DBusDownKeyring(), f"DBusDownKeyring: {BusError.__name__}"),
    ],
)
def test_broken_keyring_never_raises(backend: KeyringBackend, expected: str) -> None:
    resolved = SecretResolver({}, "general", None, backend).resolve(field("@keyring"))
    assert resolved.value is None
    assert resolved.source == "missing"
    assert expected in (resolved.problem or "")


class HangingKeyring(KeyringBackend):
    """A Secret Service stuck behind an unlock prompt nobody will answer."""

    @properties.classproperty
    def priority(cls) -> float:
        return -10

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()

    def get_password(self, service: str, username: str) -> str | None:
        self.release.wait()
        return "too-late-1"

    def set_password(self, service: str, username: str, password: str) -> None:
        self.release.wait()


def test_hanging_keyring_is_reported_after_its_deadline() -> None:
    backend = HangingKeyring()
    try:
        resolver = SecretResolver({}, "general", None, backend, keyring_timeout=0.2)
        resolved = resolver.resolve(field("@keyring"))
        assert resolved.value is None
        assert "HangingKeyring: TimeoutError" in (resolved.problem or "")
    finally:
        backend.release.set()


def test_env_reference_reads_the_named_variable() -> None:
    resolver = SecretResolver({"WORK_OPENAI_KEY": "work-key-1"}, "general", None)
    ref = {"source": "env", "env": "WORK_OPENAI_KEY"}
    assert resolver.resolve(field(ref)) == ResolvedSecret("work-key-1", "env")


def test_env_reference_to_an_unset_variable_names_it() -> None:
    resolved = SecretResolver({}, "general", None).resolve(
        field({"source": "env", "env": "WORK_OPENAI_KEY"})
    )
    assert resolved.value is None
    assert "WORK_OPENAI_KEY is not set" in (resolved.problem or "")


def test_config_models_are_accepted_as_references() -> None:
    config_secret = pytest.importorskip("fermix_core.config.secret")
    ref = config_secret.EnvSecret(source="env", env="WORK_OPENAI_KEY")
    resolver = SecretResolver({"WORK_OPENAI_KEY": "model-key-1"}, "general", None)
    assert resolver.resolve(field(ref)) == ResolvedSecret("model-key-1", "env")


@pytest.mark.parametrize("value", [{"source": "vault", "path": "x"}, {"env": "X"}, 42, ["a", "b"]])
def test_unknown_forms_are_missing_with_a_hint(value: object) -> None:
    resolved = SecretResolver({}, "general", None).resolve(field(value))
    assert resolved.value is None
    assert '"@keyring"' in (resolved.problem or "")


def test_tomlkit_inline_tables_are_references() -> None:
    import tomlkit

    doc = tomlkit.parse('api_key = { source = "env", env = "WORK_OPENAI_KEY" }\n')
    resolver = SecretResolver({"WORK_OPENAI_KEY": "toml-key-1"}, "general", None)
    assert resolver.resolve(field(doc["api_key"])) == ResolvedSecret("toml-key-1", "env")


# --------------------------------------------------------------------------- caching


def test_results_are_cached_per_resolver(tmp_path: Path, py: str) -> None:
    counter = tmp_path / "runs"
    script = f"open({str(counter)!r}, 'a').write('x'); print('counted-secret-1')"
    ref = {"source": "command", "command": [py, "-c", script]}
    first = SecretResolver({}, "general", None)
    assert first.resolve(field(ref)).value == "counted-secret-1"
    assert first.resolve(field(ref)).value == "counted-secret-1"
    assert counter.read_text() == "x"

    second = SecretResolver({}, "general", None)
    assert second.resolve(field(ref)).value == "counted-secret-1"
    assert counter.read_text() == "xx"

    first.clear()
    first.resolve(field(ref))
    assert counter.read_text() == "xxx"


def test_failures_are_cached_too(memory_keyring: MemoryKeyring) -> None:
    resolver = SecretResolver({}, "general", None, memory_keyring)
    assert resolver.resolve(field("@keyring")).value is None
    memory_keyring.set_password("fermix:OPENAI_API_KEY", KEYRING_ACCOUNT, "added-later-1")
    assert resolver.resolve(field("@keyring")).value is None  # one boot asks once
    resolver.clear()
    assert resolver.resolve(field("@keyring")).value == "added-later-1"


# --------------------------------------------------------------------------- secrecy


def test_resolved_secret_repr_masks_the_value() -> None:
    resolved = ResolvedSecret("sk-very-secret-value-1", "keyring")
    assert "sk-very-secret-value-1" not in repr(resolved)
    assert "sk-very-secret-value-1" not in str(resolved)
    assert "keyring" in repr(resolved)


def test_secret_request_repr_hides_plaintext() -> None:
    request = SecretRequest("OPENAI_API_KEY", OPENAI, "plain-secret-value-1", "general")
    assert "plain-secret-value-1" not in repr(request)
    assert "<plaintext>" in repr(request)
    marker = SecretRequest("OPENAI_API_KEY", OPENAI, "@keyring", "general")
    assert "'@keyring'" in repr(marker)


def test_resolved_values_are_redacted_from_logs_even_without_a_known_shape() -> None:
    shapeless = "q7Lw2VxN9pTz4KcR8mHb3JdF6sYg1AeU"  # e.g. a Mistral key: no vendor prefix
    assert redact(f"calling with {shapeless}") == f"calling with {shapeless}"
    SecretResolver({"MISTRAL_API_KEY": shapeless}, "general", None).resolve(
        field(None, env="MISTRAL_API_KEY")
    )
    assert redact(f"calling with {shapeless}") == "calling with [REDACTED:secret]"


def test_short_values_are_not_taught_to_the_redactor() -> None:
    SecretResolver({"X_TOKEN": "abc"}, "general", None).resolve(field(None, env="X_TOKEN"))
    assert redact("abc abcdef") == "abc abcdef"


def test_locked_keyring_problem_does_not_leak_the_env_value(memory_keyring: MemoryKeyring) -> None:
    resolved = SecretResolver({"OTHER": "unrelated-1"}, "general", None, LockedKeyring()).resolve(
        field("@keyring")
    )
    assert "unrelated-1" not in repr(resolved)
