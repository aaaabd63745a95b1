"""Secrets: where a credential named in config.toml actually comes from, and where it goes on save.

A secret slot in config.toml holds one of four forms: plaintext, the marker ``"@keyring"``,
``{ source = "env", env = "NAME" }`` or ``{ source = "command", command = [...] }``. The
slot's own environment variable (``OPENAI_API_KEY`` …) always wins, then any plugin's
``fermix_resolve_secret`` hook, then the stored form. Saving moves plaintext into the OS
keyring so config.toml can be shared, backed up or shown on screen without leaking.

Two rules hold everywhere in this module: a broken, locked or absent keyring never raises
out of resolution (it becomes a ``missing`` result with a ``problem`` that ``fermix doctor``
prints), and no secret value ever reaches a repr, a log line or an exception message.

``keyring`` is imported inside functions only: it costs tens of milliseconds to import and
the CLI's fast path (``fermix --help``) must not pay for it.
"""

from __future__ import annotations

from fermix_core.secrets.base import (
    DEFAULT_KEYRING_TIMEOUT,
    DEFAULT_PROFILES,
    KEYRING_ACCOUNT,
    KEYRING_MARKER,
    ResolvedSecret,
    SecretError,
    SecretMigration,
    SecretRequest,
    SecretStoreError,
    Source,
    backend_name,
    keyring_service,
    keyring_writer_available,
    keyring_writer_problem,
    profile_from_document,
)
from fermix_core.secrets.resolve import (
    DEFAULT_COMMAND_TIMEOUT,
    MAX_COMMAND_OUTPUT,
    MAX_COMMAND_TIMEOUT,
    SecretResolver,
    remember_configured_secrets,
    run_secret_command,
)
from fermix_core.secrets.store import migrate_secrets, store_plaintext_secrets

__all__ = [
    "DEFAULT_COMMAND_TIMEOUT",
    "DEFAULT_KEYRING_TIMEOUT",
    "DEFAULT_PROFILES",
    "KEYRING_ACCOUNT",
    "KEYRING_MARKER",
    "MAX_COMMAND_OUTPUT",
    "MAX_COMMAND_TIMEOUT",
    "ResolvedSecret",
    "SecretError",
    "SecretMigration",
    "SecretRequest",
    "SecretResolver",
    "SecretStoreError",
    "Source",
    "backend_name",
    "keyring_service",
    "keyring_writer_available",
    "keyring_writer_problem",
    "migrate_secrets",
    "profile_from_document",
    "remember_configured_secrets",
    "run_secret_command",
    "store_plaintext_secrets",
]
