"""Storage: moving plaintext secrets out of config.toml and into the OS keyring on save."""

from __future__ import annotations

import os
from collections.abc import Container, Iterable, Mapping, MutableMapping
from typing import Any

from fermix_core.secrets.base import (
    DEFAULT_KEYRING_TIMEOUT,
    KEYRING_ACCOUNT,
    KEYRING_MARKER,
    SecretError,
    SecretMigration,
    SecretStoreError,
    backend_name,
    bounded_call,
    dotted,
    field_parts,
    is_plaintext,
    keyring_problem,
    keyring_service,
    keyring_writer_problem,
)


def _lookup(document: Any, path: tuple[str, ...]) -> Any:
    node = document
    for key in path:
        if not isinstance(node, Mapping) or key not in node:
            return None
        node = node[key]
    return node


def _assign(document: Any, path: tuple[str, ...], value: str) -> None:
    node = document
    for key in path[:-1]:
        node = node[key]
    if not isinstance(node, MutableMapping):
        raise SecretError(f"{dotted(path)}: the parent of this secret is not a table")
    node[path[-1]] = value


def _store_one(backend: Any, service: str, secret: str, timeout: float | None) -> str | None:
    """Write and read back; return a problem string, or None on success.

    Reading back catches backends that accept a write and drop it, which would otherwise
    replace a working plaintext value with a marker that resolves to nothing.
    """
    try:
        bounded_call(lambda: backend.set_password(service, KEYRING_ACCOUNT, secret), timeout)
        stored = bounded_call(lambda: backend.get_password(service, KEYRING_ACCOUNT), timeout)
    except Exception as exc:
        return keyring_problem(backend, exc)
    if stored != secret:
        return f"keyring {backend_name(backend)} did not keep the value written to it"
    return None


def store_plaintext_secrets(
    document: Any,
    fields: Iterable[Any],
    *,
    profile: str | None,
    previous_document: Any = None,
    backend: Any = None,
    keyring_timeout: float | None = DEFAULT_KEYRING_TIMEOUT,
    keep_new_plaintext: bool = False,
) -> SecretMigration:
    """Move every plaintext secret in *document* into the keyring, replacing it with ``"@keyring"``.

    Called on every config save. Without a usable keyring, a plaintext value that was
    already in *previous_document* is kept (with a warning): refusing would make every
    unrelated save fail on a machine that never had a keyring. A new or changed plaintext
    secret raises :class:`SecretStoreError` instead, before *document* is touched, because
    silently writing a fresh credential to disk in clear is what this module exists to stop,
    unless the operator explicitly agreed to it (*keep_new_plaintext*, from ``fermix setup``'s
    confirmation or ``--secrets-in-config``), in which case it is kept with a warning.
    A keyring that exists but fails the write (locked) still raises: the operator agreed to
    plaintext only for a machine without a keyring.
    """
    report = SecretMigration()
    pending: list[tuple[tuple[str, ...], str, str]] = []
    #: Slots that never read their canonical variable (the Telegram bot token): the
    #: failure message must not advise exporting it.
    closed: set[tuple[str, ...]] = set()
    for item in fields:
        path, env, _ = field_parts(item)
        value = _lookup(document, path)
        if is_plaintext(value) and env:
            pending.append((path, env, str(value)))
            if getattr(item, "overridable", True) is False:
                closed.add(path)
    if not pending:
        return report

    chosen, reason = keyring_writer_problem(backend, keyring_timeout)
    if chosen is not None:
        report.backend = backend_name(chosen)

    moved: list[tuple[str, ...]] = []
    blocked: list[tuple[tuple[str, ...], str, str]] = []
    for path, env, secret in pending:
        problem = reason or _store_one(
            chosen, keyring_service(env, profile), secret, keyring_timeout
        )
        if problem is None:
            moved.append(path)
            continue
        before = _lookup(previous_document, path) if previous_document is not None else None
        if reason is not None and keep_new_plaintext:
            report.kept.append(dotted(path))
            report.warnings.append(
                f"{dotted(path)} is kept in plaintext in config.toml (mode 0600, readable only "
                f"by you) as you chose, because {reason}; `fermix setup --migrate-secrets` "
                "moves it into a keyring once one is available"
            )
        elif is_plaintext(before) and str(before) == secret:
            report.kept.append(dotted(path))
            report.warnings.append(
                f"{dotted(path)} stays in plaintext in config.toml ({problem}); "
                "unlock or install a keyring and run `fermix setup --migrate-secrets`, "
                f'or point it at {{ source = "env", env = "{env}" }}'
            )
        else:
            blocked.append((path, env, problem))

    if blocked:
        raise SecretStoreError(_store_failure_message(blocked, closed))
    for path in moved:
        _assign(document, path, KEYRING_MARKER)
        report.moved.append(dotted(path))
    return report


def _store_failure_message(
    blocked: list[tuple[tuple[str, ...], str, str]], closed: Container[tuple[str, ...]] = ()
) -> str:
    slots = ", ".join(dotted(path) for path, _, _ in blocked)
    problems = "; ".join(sorted({problem for _, _, problem in blocked}))
    keyring = (
        f"cannot store new secret(s) {slots}: {problems}. Nothing was written. Fix one of: "
        "install and unlock an OS keyring (on Linux a Secret Service such as gnome-keyring, "
        "with a D-Bus session; on macOS the login keychain); or keep the secret out of "
        "config.toml with "
    )
    command = '{ source = "command", command = ["pass", "show", "fermix/key"] }'
    open_slots = [(path, env) for path, env, _ in blocked if path not in closed]
    if not open_slots:
        # These slots are never read from their own variable, so exporting it would do
        # nothing; a helper command (or the keyring) is the way.
        return keyring + command
    env = open_slots[0][1]
    return (
        keyring + f'{{ source = "env", env = "{env}" }} or {command}; '
        f"or export {env} in the daemon's environment"
    )


def migrate_secrets(
    home_or_assembly: Any,
    registry: Any = None,
    *,
    environ: Mapping[str, str] | None = None,
    backend: Any = None,
) -> SecretMigration:
    """``fermix setup --migrate-secrets``: move config.toml's plaintext secrets into the keyring.

    Accepts an :class:`~fermix_core.boot.Assembly` or a ``(home, registry)`` pair. Every
    plaintext secret counts as new here, so without a keyring writer this raises
    :class:`SecretStoreError` rather than reporting a migration that did nothing.
    """
    from fermix_core.config import ConfigError, load_config, read_document, secret_fields
    from fermix_core.config.writer import write_document

    home = getattr(home_or_assembly, "home", home_or_assembly)
    if registry is None:
        registry = home_or_assembly.registry
    unavailable = getattr(home_or_assembly, "unavailable", [])
    if environ is None:
        environ = getattr(home_or_assembly, "environ", None)
    if environ is None:
        environ = dict(os.environ)

    if not home.config_file.exists():
        return SecretMigration()
    try:
        document = read_document(home.config_file)
        loaded = load_config(
            home, registry, unavailable=unavailable, environ=environ, document=document
        )
    except ConfigError as exc:
        # The config error itself is not repeated here: it may quote a value of the file.
        raise SecretStoreError(
            f"{home.config_file} is not valid, so no secret was moved; run "
            "`fermix config validate` to see why, fix it, then migrate again"
        ) from exc
    report = store_plaintext_secrets(
        document,
        secret_fields(loaded, registry),
        profile=loaded.core.fermix_core.profile,
        backend=backend,
    )
    if report.moved:
        write_document(home, document)
    return report
