"""Saving: plaintext secrets move into the keyring, or the save refuses new ones."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import tomlkit
from fermix_core.keyring_backend import LockedKeyring, MemoryKeyring
from fermix_core.secrets import (
    KEYRING_ACCOUNT,
    SecretResolver,
    SecretStoreError,
    keyring_writer_available,
    store_plaintext_secrets,
)
from keyring.backend import KeyringBackend
from keyring.backends import chainer, fail, null
from keyring.compat import properties

OPENAI_KEY = "sk-proj-FAKE0openai0key0for0tests0123456789"
XAI_KEY = "xai-FAKE0xai0key0for0tests0000000000000000000000001"
CONFIG = f"""\
[fermix_core]
profile = "general"

[fermix_core.providers.openai]
api_key = "{OPENAI_KEY}"  # pasted during setup
primary = true

[fermix_core.providers.xai]
api_key = "{XAI_KEY}"

[fermix_core.providers.anthropic]
api_key = "@keyring"

[fermix_core.providers.mistral]
api_key = {{ source = "env", env = "WORK_MISTRAL_KEY" }}

[fermix_core.providers.openrouter]
api_key = {{ source = "command", command = ["pass", "show", "openrouter"] }}
"""

OPENAI = ("fermix_core", "providers", "openai", "api_key")
XAI = ("fermix_core", "providers", "xai", "api_key")
ANTHROPIC = ("fermix_core", "providers", "anthropic", "api_key")
MISTRAL = ("fermix_core", "providers", "mistral", "api_key")
OPENROUTER = ("fermix_core", "providers", "openrouter", "api_key")
GEMINI = ("fermix_core", "providers", "gemini", "api_key")  # slot not present in the file


@dataclass(frozen=True)
class Field:
    path: tuple[str, ...]
    env: str
    value: object = None


FIELDS = [
    Field(OPENAI, "OPENAI_API_KEY"),
    Field(XAI, "XAI_API_KEY"),
    Field(ANTHROPIC, "ANTHROPIC_API_KEY"),
    Field(MISTRAL, "MISTRAL_API_KEY"),
    Field(OPENROUTER, "OPENROUTER_API_KEY"),
    Field(GEMINI, "GEMINI_API_KEY"),
]


def doc() -> tomlkit.TOMLDocument:
    return tomlkit.parse(CONFIG)


def at(document: object, path: tuple[str, ...]) -> object:
    node = document
    for key in path:
        node = node[key]  # type: ignore[index]
    return node


# --------------------------------------------------------------------------- with a writer


def test_plaintext_moves_to_the_keyring(memory_keyring: MemoryKeyring) -> None:
    document = doc()
    report = store_plaintext_secrets(document, FIELDS, profile="general", backend=memory_keyring)

    assert report.moved == [
        "fermix_core.providers.openai.api_key",
        "fermix_core.providers.xai.api_key",
    ]
    assert report.kept == []
    assert report.warnings == []
    assert report.backend == "fermix_core.keyring_backend.MemoryKeyring"
    assert memory_keyring.get_password("fermix:OPENAI_API_KEY", KEYRING_ACCOUNT) == OPENAI_KEY
    assert memory_keyring.get_password("fermix:XAI_API_KEY", KEYRING_ACCOUNT) == XAI_KEY

    text = tomlkit.dumps(document)
    assert OPENAI_KEY not in text
    assert XAI_KEY not in text
    assert 'api_key = "@keyring"  # pasted during setup' in text  # comments survive
    # References and markers are left exactly as they were.
    assert 'api_key = { source = "env", env = "WORK_MISTRAL_KEY" }' in text
    assert 'command = ["pass", "show", "openrouter"]' in text
    assert memory_keyring.services() == [
        ("fermix:OPENAI_API_KEY", "fermix"),
        ("fermix:XAI_API_KEY", "fermix"),
    ]


def test_stored_secrets_resolve_back(memory_keyring: MemoryKeyring) -> None:
    document = doc()
    store_plaintext_secrets(document, FIELDS, profile="dev", backend=memory_keyring)
    resolver = SecretResolver({}, "dev", None, memory_keyring)
    resolved = resolver.resolve(Field(OPENAI, "OPENAI_API_KEY", at(document, OPENAI)))
    assert (resolved.value, resolved.source) == (OPENAI_KEY, "keyring")
    # A different profile does not see them: the coordinate is namespaced.
    other = SecretResolver({}, "general", None, memory_keyring)
    assert other.resolve(Field(OPENAI, "OPENAI_API_KEY", "@keyring")).value is None


def test_profile_namespaces_the_coordinate(memory_keyring: MemoryKeyring) -> None:
    store_plaintext_secrets(doc(), FIELDS[:1], profile="work", backend=memory_keyring)
    assert memory_keyring.services() == [("fermix:work:OPENAI_API_KEY", "fermix")]


def test_default_backend_is_keyrings_choice(default_keyring: MemoryKeyring) -> None:
    report = store_plaintext_secrets(doc(), FIELDS[:1], profile="general")
    assert report.moved == ["fermix_core.providers.openai.api_key"]
    assert default_keyring.get_password("fermix:OPENAI_API_KEY", KEYRING_ACCOUNT) == OPENAI_KEY


def test_tuple_fields_are_accepted(memory_keyring: MemoryKeyring) -> None:
    report = store_plaintext_secrets(
        doc(), [(OPENAI, "OPENAI_API_KEY")], profile=None, backend=memory_keyring
    )
    assert report.moved == ["fermix_core.providers.openai.api_key"]


def test_nothing_to_do_touches_no_keyring() -> None:
    document = tomlkit.parse('[fermix_core.providers.openai]\napi_key = "@keyring"\n')
    # A locked keyring would fail any call; with no plaintext there is no call at all.
    report = store_plaintext_secrets(document, FIELDS, profile="general", backend=LockedKeyring())
    assert report.moved == []
    assert report.warnings == []


def test_plain_dicts_work_as_documents(memory_keyring: MemoryKeyring) -> None:
    document = {"fermix_core": {"providers": {"openai": {"api_key": OPENAI_KEY}}}}
    store_plaintext_secrets(document, FIELDS, profile="general", backend=memory_keyring)
    assert document["fermix_core"]["providers"]["openai"]["api_key"] == "@keyring"


# --------------------------------------------------------------------------- without a writer


NO_WRITERS = [
    pytest.param(fail.Keyring(), id="fail"),
    pytest.param(null.Keyring(), id="null"),
    pytest.param(LockedKeyring(), id="locked"),
]


@pytest.mark.parametrize("backend", NO_WRITERS)
def test_unchanged_plaintext_is_kept_with_a_warning(backend: KeyringBackend) -> None:
    previous = doc()
    document = doc()
    report = store_plaintext_secrets(
        document, FIELDS, profile="general", previous_document=previous, backend=backend
    )
    assert report.moved == []
    assert report.kept == [
        "fermix_core.providers.openai.api_key",
        "fermix_core.providers.xai.api_key",
    ]
    assert len(report.warnings) == 2
    for warning in report.warnings:
        assert "plaintext" in warning
        assert "--migrate-secrets" in warning
        assert OPENAI_KEY not in warning
        assert XAI_KEY not in warning
    assert tomlkit.dumps(document) == CONFIG


@pytest.mark.parametrize("backend", NO_WRITERS)
def test_new_plaintext_refuses_the_save(backend: KeyringBackend) -> None:
    previous = doc()
    previous["fermix_core"]["providers"]["xai"]["api_key"] = "@keyring"  # type: ignore[index]
    document = doc()
    with pytest.raises(SecretStoreError) as caught:
        store_plaintext_secrets(
            document, FIELDS, profile="general", previous_document=previous, backend=backend
        )
    message = str(caught.value)
    assert "fermix_core.providers.xai.api_key" in message
    assert "fermix_core.providers.openai.api_key" not in message  # unchanged one is fine
    assert "gnome-keyring" in message
    assert 'source = "env"' in message
    assert 'source = "command"' in message
    assert XAI_KEY not in message
    assert OPENAI_KEY not in message
    assert tomlkit.dumps(document) == CONFIG  # nothing touched


def test_changed_plaintext_counts_as_new() -> None:
    previous = tomlkit.parse(
        CONFIG.replace(OPENAI_KEY, "sk-proj-FAKE0older0key0000000000000000001")
    )
    with pytest.raises(SecretStoreError, match=r"openai\.api_key"):
        store_plaintext_secrets(
            doc(), FIELDS[:1], profile="general", previous_document=previous, backend=fail.Keyring()
        )


def test_without_a_previous_document_everything_is_new() -> None:
    with pytest.raises(SecretStoreError):
        store_plaintext_secrets(doc(), FIELDS, profile="general", backend=null.Keyring())


class DroppingKeyring(KeyringBackend):
    """Accepts writes and forgets them: a backend that would silently lose the secret."""

    @properties.classproperty
    def priority(cls) -> float:
        return -10

    def get_password(self, service: str, username: str) -> str | None:
        return None

    def set_password(self, service: str, username: str, password: str) -> None:
        return None


def test_a_write_that_does_not_stick_is_not_trusted() -> None:
    document = doc()
    with pytest.raises(SecretStoreError, match="did not keep the value"):
        store_plaintext_secrets(document, FIELDS[:1], profile="general", backend=DroppingKeyring())
    assert tomlkit.dumps(document) == CONFIG


# --------------------------------------------------------------------------- writer detection


class EmptyChainer(chainer.ChainerBackend):
    @properties.classproperty
    def backends(cls) -> list[KeyringBackend]:
        return []


class MemoryChainer(chainer.ChainerBackend):
    @properties.classproperty
    def backends(cls) -> list[KeyringBackend]:
        return [MemoryKeyring()]


@pytest.mark.parametrize(
    ("backend", "available"),
    [
        (MemoryKeyring(), True),
        (fail.Keyring(), False),
        (null.Keyring(), False),
        (EmptyChainer(), False),
        (MemoryChainer(), True),
    ],
)
def test_keyring_writer_available(backend: KeyringBackend, available: bool) -> None:
    assert keyring_writer_available(backend) is available


def test_keyring_writer_available_defaults_to_keyrings_choice(
    default_keyring: MemoryKeyring,
) -> None:
    assert keyring_writer_available() is True
