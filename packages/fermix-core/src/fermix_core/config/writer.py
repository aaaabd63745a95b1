"""Changing ``config.toml`` without losing the operator's comments or ever half-writing it.

Every change goes through the same steps: parse the file with tomlkit (which keeps
comments, order and spacing), apply one edit, validate the *whole* resulting config, and
only then replace the file atomically. A change that would make the config invalid is
refused with the problems it introduces and the file is left exactly as it was.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import tomlkit
from tomlkit.exceptions import TOMLKitError
from tomlkit.items import InlineTable
from tomlkit.toml_document import TOMLDocument

from fermix_core.config.document import (
    dig,
    format_key,
    parse_document,
    parse_key,
    plain,
    read_document,
)
from fermix_core.config.errors import ConfigError, ConfigProblem
from fermix_core.config.loader import LoadedConfig, check_config
from fermix_core.config.messages import annotation_at, choices_of, members, secret_along, show
from fermix_core.config.models import FermixConfig, TranscriptionConfig
from fermix_core.config.secret import mask
from fermix_core.config.slots import secret_fields
from fermix_core.fsutil import atomic_write
from fermix_core.home import PRIVATE_FILE_MODE, FermixHome
from fermix_core.plugins.discovery import PluginRecord
from fermix_core.plugins.registry import SpecRegistry
from fermix_core.specs import RefError, resolve_ref


@dataclass(frozen=True)
class ConfigChange:
    """What a ``set``/``unset`` did. ``secret`` changes never carry printable values."""

    key: str
    action: Literal["set", "unset"]
    #: Plain values before and after (``None`` when absent); kept out of ``repr`` because
    #: they may be secrets — print :meth:`describe` instead.
    old: Any = field(repr=False)
    new: Any = field(repr=False)
    secret: bool
    changed: bool
    path: Path
    #: Problems the file already had before this change and still has (the change was
    #: allowed because it introduced none; fix these next).
    remaining: list[ConfigProblem] = field(default_factory=list)
    warnings: list[ConfigProblem] = field(default_factory=list)
    #: Environment variable that overrides this key at run time (the file value is shadowed).
    overridden_by: str | None = None
    #: Secret slots whose plaintext went to the keyring (``@keyring`` written instead).
    moved_to_keyring: list[str] = field(default_factory=list)
    #: Why a plaintext secret already in the file stays there (no keyring writer …), one
    #: sentence per secret — the same warnings setup shows.
    secret_warnings: list[str] = field(default_factory=list)
    #: Keys changed along with this one, one line each (a transcription backend switch
    #: snaps ``model`` to the new backend's default).
    also: list[str] = field(default_factory=list)

    def describe(self) -> str:
        if not self.changed:
            return f"{self.key}: unchanged" if self.action == "set" else f"{self.key}: was not set"
        if self.secret:
            what = "set" if self.action == "set" else "removed"
            return f"{self.key}: secret {what} (value not shown)"
        if self.action == "unset":
            return f"{self.key}: removed (was {_inline(self.old)})"
        return f"{self.key}: {_inline(self.old)} -> {_inline(self.new)}"


def _inline(value: Any) -> str:
    if value is None:
        return "(not set)"
    try:
        return tomlkit.item(value).as_string()
    except Exception:
        return show(value)


# --------------------------------------------------------------------------- annotations


def target_annotation(parts: Sequence[str], registry: SpecRegistry) -> Any | None:
    """The declared type of the key at *parts*, from a plugin section model or the core."""
    claimed = registry.config_sections()
    for depth in range(len(parts), 0, -1):
        entry = claimed.get(".".join(parts[:depth]))
        if entry is None:
            continue
        try:
            model = resolve_ref(entry[0])
        except RefError:
            return None
        return annotation_at(model, list(parts[depth:]))
    return annotation_at(FermixConfig, list(parts))


def is_secret_key(
    parts: Sequence[str], registry: SpecRegistry, *documents: Mapping[str, Any]
) -> bool:
    """Whether *parts* is a secret slot or a table that holds one (in any of *documents*)."""
    claimed = registry.config_sections()
    for depth in range(len(parts), 0, -1):
        entry = claimed.get(".".join(parts[:depth]))
        if entry is not None:
            try:
                if secret_along(resolve_ref(entry[0]), list(parts[depth:])):
                    return True
            except RefError:
                pass
            break
    else:
        if secret_along(FermixConfig, list(parts)):
            return True
    n = len(parts)
    for doc in documents:
        for slot in secret_fields(doc, registry):
            if slot.path[:n] == tuple(parts) and slot.value is not None:
                return True
    return False


def _accepts_only_text(annotation: Any, value: Any) -> bool:
    """True when a parsed TOML literal should stay the text typed (``name = 007``)."""
    if annotation is None or isinstance(value, str | list | dict):
        return False
    kinds = members(annotation)
    wants_str = str in kinds or any(isinstance(c, str) for c in (choices_of(annotation) or []))
    matches = any(isinstance(k, type) and isinstance(value, k) for k in kinds)
    if isinstance(value, int) and float in kinds:
        matches = True
    return wants_str and not matches


def parse_value(raw: str, parts: Sequence[str], registry: SpecRegistry) -> Any:
    """A TOML literal when *raw* is one (``true``, ``3``, ``["a"]``, ``"x"``), else plain text."""
    try:
        parsed = tomlkit.parse(f"v = {raw}")
    except TOMLKitError:
        return raw
    if list(parsed.keys()) != ["v"]:
        return raw
    value = parsed.unwrap()["v"]
    if _accepts_only_text(target_annotation(parts, registry), value):
        return raw
    return value


# --------------------------------------------------------------------------- document edits


def _new_table(container: Any, *, leaf: bool) -> Any:
    if isinstance(container, InlineTable):
        return tomlkit.inline_table()
    return tomlkit.table(is_super_table=not leaf)


def _assign(doc: TOMLDocument, parts: Sequence[str], value: Any, raw: str | None = None) -> None:
    container: Any = doc
    created = False
    for i, part in enumerate(parts[:-1]):
        if part in container:
            node = container[part]
            if not isinstance(node, MutableMapping):
                raise ConfigError.single(
                    format_key(parts[: i + 1]), "holds a value, not a table; unset it first"
                )
            created = False
        else:
            if container is doc:
                _blank_line_before_new_table(doc)
            created = not isinstance(container, InlineTable)
            container[part] = _new_table(container, leaf=i == len(parts) - 2)
            node = container[part]
        container = node
    container[parts[-1]] = _item(value, raw)
    if created:
        container.add(tomlkit.nl())  # a blank line before whatever section follows


def _blank_line_before_new_table(doc: TOMLDocument) -> None:
    text = doc.as_string()
    if not text.strip():
        return
    have = len(text) - len(text.rstrip("\n"))
    for _ in range(max(0, 2 - have)):
        doc.add(tomlkit.nl())


def _item(value: Any, raw: str | None) -> Any:
    """A tomlkit item; tables and arrays keep the inline style the operator typed."""
    if isinstance(value, dict | list) and raw is not None:
        parsed = tomlkit.parse(f"v = {raw}")["v"]
        parsed.trivia.comment = ""
        parsed.trivia.comment_ws = ""
        return parsed
    return tomlkit.item(value)


def _remove(doc: TOMLDocument, parts: Sequence[str]) -> bool:
    container: Any = doc
    for part in parts[:-1]:
        if not isinstance(container, MutableMapping) or part not in container:
            return False
        container = container[part]
    if not isinstance(container, MutableMapping) or parts[-1] not in container:
        return False
    del container[parts[-1]]
    return True


def _tidy_end(original: str, text: str) -> str:
    """Do not let an edit add blank lines at the end of the file."""
    want = len(original) - len(original.rstrip("\n")) if original else 1
    body = text.rstrip("\n")
    return body + "\n" * max(want, 1) if body else ""


# --------------------------------------------------------------------------- writing


def write_document(home: FermixHome, document: TOMLDocument | str) -> Path:
    """Atomically replace ``config.toml`` with *document* (0600); validation is the caller's.

    For modules that edit many keys at once (setup, the secrets migration): build the
    document, validate it with :func:`~fermix_core.config.loader.load_config` passing
    ``document=``, then write it here.
    """
    home.ensure()
    text = document if isinstance(document, str) else document.as_string()
    atomic_write(home.config_file, text, mode=PRIVATE_FILE_MODE)
    return home.config_file


def _apply(
    home: FermixHome,
    dotted_key: str,
    registry: SpecRegistry,
    unavailable: Sequence[PluginRecord],
    environ: Mapping[str, str] | None,
    action: Literal["set", "unset"],
    raw_value: str | None = None,
) -> ConfigChange:
    parts = parse_key(dotted_key)
    key = format_key(parts)
    path = home.config_file
    original_doc = read_document(path)
    original = original_doc.as_string()
    before = check_config(
        home, registry, unavailable=unavailable, environ=environ, document=original_doc
    )
    doc = parse_document(original, path)  # an independent copy to edit
    absent = object()
    also: list[str] = []
    old = dig(plain(doc), parts, absent)
    if action == "set":
        new = parse_value(raw_value or "", parts, registry)
        if old is not absent and old == new:
            return ConfigChange(
                key,
                action,
                old,
                new,
                is_secret_key(parts, registry, doc),
                False,
                path,
                list(before.problems),
                list(before.warnings),
            )
        _assign(doc, parts, new, raw_value if new is not raw_value else None)
        was = old if old is not absent else TranscriptionConfig.model_fields["backend"].default
        if tuple(parts) == ("fermix_core", "transcription", "backend") and new != was:
            from fermix_core.transcription.setup_step import snap_to_backend

            doc = parse_document(doc.as_string(), path)  # new keys go inside the table
            also = snap_to_backend(doc["fermix_core"]["transcription"], new, registry)
    else:
        new = None
        if old is absent or not _remove(doc, parts):
            return ConfigChange(
                key,
                action,
                None,
                None,
                is_secret_key(parts, registry),
                False,
                path,
                list(before.problems),
                list(before.warnings),
            )
    text = _tidy_end(original, doc.as_string())
    edited = parse_document(text, path)
    after = check_config(home, registry, unavailable=unavailable, environ=environ, document=edited)
    introduced = [p for p in after.problems if p not in before.problems]
    if introduced:
        raise ConfigError(introduced, file=path)
    moved: list[str] = []
    kept_warnings: list[str] = []
    if after.loaded is not None:
        # Saving is where plaintext secrets move to the keyring (or a new one is refused).
        from fermix_core.config.slots import secret_fields
        from fermix_core.secrets import profile_from_document, store_plaintext_secrets

        migration = store_plaintext_secrets(
            edited,
            secret_fields(after.loaded, registry),
            profile=profile_from_document(edited),
            previous_document=original_doc,
        )
        moved = list(migration.moved)
        kept_warnings = list(migration.warnings)
        if moved:
            text = _tidy_end(original, edited.as_string())
    write_document(home, text)
    if parts[0] == "sandbox":
        # The owner's own change: it becomes the approved [sandbox] (see sandbox.approval).
        from fermix_core.sandbox.approval import record_edit

        table = plain(original_doc).get("sandbox")
        record_edit(home, parts, table if isinstance(table, dict) else {})
    secret = is_secret_key(parts, registry, original_doc, edited)
    return ConfigChange(
        key,
        action,
        None if old is absent else old,
        new,
        secret,
        True,
        path,
        list(after.problems),
        list(after.warnings),
        after.loaded.overridden_by(parts) if after.loaded is not None else None,
        moved,
        kept_warnings,
        also,
    )


def set_value(
    home: FermixHome,
    dotted_key: str,
    raw_value: str,
    registry: SpecRegistry,
    *,
    unavailable: Sequence[PluginRecord] = (),
    environ: Mapping[str, str] | None = None,
) -> ConfigChange:
    """Set one key in ``config.toml``; the value is a TOML literal when it parses as one.

    A string-typed key keeps the text as typed (``agent.name 007`` stays ``"007"``).
    Missing tables are created as ordinary ``[a.b]`` tables next to their siblings. The
    whole config is validated before anything is written; a change that adds a problem
    raises :class:`ConfigError` and leaves the file untouched. A file that was already
    invalid may still be repaired one key at a time: a change that introduces no new
    problem is written, and the problems left are returned in ``remaining``.
    """
    return _apply(home, dotted_key, registry, unavailable, environ, "set", raw_value)


def unset_value(
    home: FermixHome,
    dotted_key: str,
    registry: SpecRegistry,
    *,
    unavailable: Sequence[PluginRecord] = (),
    environ: Mapping[str, str] | None = None,
) -> ConfigChange:
    """Remove a key (or a whole table) from ``config.toml`` so its default applies again."""
    return _apply(home, dotted_key, registry, unavailable, environ, "unset")


# --------------------------------------------------------------------------- reading


def get_value(loaded: LoadedConfig, dotted_key: str) -> Any:
    """The effective value of one key (defaults, file and environment applied)."""
    return loaded.get(dotted_key)


def render_config(loaded: LoadedConfig, *, show_secrets: bool = False) -> dict[str, Any]:
    """The effective config as plain data, every secret masked unless *show_secrets*.

    ``"@keyring"`` and ``{ source = "env" | "command" }`` references are shown as written
    (they name where a secret lives, not the secret); plaintext — including a value
    supplied by the environment — is shown as ``********``.
    """
    effective = loaded.effective()
    if show_secrets or loaded.registry is None:
        return effective
    for slot in secret_fields(loaded, loaded.registry):
        parent = dig(effective, slot.path[:-1], None)
        if isinstance(parent, dict) and parent.get(slot.path[-1]) is not None:
            parent[slot.path[-1]] = mask(parent[slot.path[-1]])
    return effective


def masked_value(loaded: LoadedConfig, dotted_key: str) -> Any:
    """:func:`get_value` with secrets masked the way :func:`render_config` masks them."""
    get_value(loaded, dotted_key)  # an unknown key raises here
    return dig(render_config(loaded), parse_key(dotted_key))


__all__ = [
    "ConfigChange",
    "get_value",
    "is_secret_key",
    "masked_value",
    "parse_value",
    "render_config",
    "set_value",
    "unset_value",
    "write_document",
]
