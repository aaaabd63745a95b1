"""Reading ``config.toml``, dotted keys, and the pre-plugin read.

This module imports neither pydantic nor (until a document is edited) tomlkit: boot reads
``[fermix_core.plugins] disabled`` *before* any plugin is imported (the list decides which
plugins load), and that early read should cost as little as possible.

:func:`read_config` reads the file once into a :class:`ConfigText`: its values come from
the standard library's :mod:`tomllib`, and the tomlkit document (comments and layout, for
the commands that edit the file) is parsed from the same text only when one asks for it.
A file :mod:`tomllib` rejects is parsed by tomlkit instead, so what is accepted, and every
syntax error's message, line and column, stay those of tomlkit.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fermix_core.config.errors import ConfigError, ConfigKeyError, ConfigProblem

if TYPE_CHECKING:  # tomlkit loads when a document is edited or tomllib rejects a file
    from tomlkit.toml_document import TOMLDocument

BARE_KEY_RE = re.compile(r"^[A-Za-z0-9_-]+$")
_AT_LINE_RE = re.compile(r"\s*at line \d+ col \d+\s*$")

KeyPath = tuple[str | int, ...]


# --------------------------------------------------------------------------- keys


def format_key(parts: Sequence[str | int]) -> str:
    """``("mcp", "servers", "a.b", "url")`` -> ``mcp.servers."a.b".url``; ints become ``[i]``."""
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
            continue
        text = part if BARE_KEY_RE.match(part) else json.dumps(part)
        out = f"{out}.{text}" if out else text
    return out


def parse_key(dotted: str) -> tuple[str, ...]:
    """Split a dotted key the way TOML does, so quoted segments may contain dots.

    The key is parsed by a TOML parser (as ``<key> = 0``) rather than by a hand-written
    splitter, so what ``fermix config set`` accepts is exactly what the file accepts:
    :mod:`tomllib`, and tomlkit for what it rejects (as for the file itself).
    """
    text = dotted.strip()
    bad = ConfigKeyError.single(
        dotted, 'is not a dotted key like fermix_core.agent.name (quote parts with dots: a."b.c")'
    )
    if not text or "\n" in text or "=" in text.replace('"', "").replace("'", ""):
        raise bad
    import tomllib

    parsed: Any
    try:
        parsed = tomllib.loads(f"{text} = 0")
    except tomllib.TOMLDecodeError:
        import tomlkit
        from tomlkit.exceptions import TOMLKitError

        try:
            parsed = tomlkit.parse(f"{text} = 0").unwrap()
        except TOMLKitError:
            raise bad from None
    parts: list[str] = []
    while isinstance(parsed, dict):
        if len(parsed) != 1:
            raise bad
        ((key, parsed),) = parsed.items()
        parts.append(key)
    if parsed != 0 or not parts:
        raise bad
    return tuple(parts)


# --------------------------------------------------------------------------- reading


class ConfigText:
    """``config.toml`` as read: its values (:attr:`data`, parsed with :mod:`tomllib`) and,
    on demand, its tomlkit :attr:`document` parsed from the same text.

    Made by :func:`read_config` from a file, or :meth:`of` around a document or mapping
    a caller already has (the writer's edited copy, an embedding app's settings).
    """

    __slots__ = ("_data", "_document", "path", "text")

    def __init__(self, text: str | None, path: Path | None = None, *, document: Any = None) -> None:
        self.text = text
        self.path = path
        self._document = document
        self._data: dict[str, Any] | None = None

    @classmethod
    def of(cls, document: Any) -> ConfigText:
        """*document* (a :class:`ConfigText`, a tomlkit document or a plain mapping)."""
        if isinstance(document, ConfigText):
            return document
        return cls(None, document=document)

    @property
    def data(self) -> dict[str, Any]:
        """The values as plain dicts, lists and scalars (do not modify: see :func:`plain`).

        Raises the :class:`ConfigError` tomlkit's parser gives for a file that is not TOML.
        """
        if self._data is None:
            if self.text is None:
                self._data = _deep_plain(self._document if self._document is not None else {})
            else:
                self._data = _parse_values(self.text, self.path)
        return self._data

    @property
    def document(self) -> TOMLDocument:
        """The tomlkit document (comments and all), parsed on first use."""
        if self._document is None:
            if self.text is None:
                import tomlkit

                self._document = tomlkit.document()
            else:
                self._document = parse_document(self.text, self.path)
        return self._document


def _parse_values(text: str, path: Path | None) -> dict[str, Any]:
    import tomllib

    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        # tomlkit decides what a file tomllib rejects means: its error (line, column,
        # message) as before, or its values where it accepts the text.
        return parse_document(text, path).unwrap()


def read_config(path: Path) -> ConfigText:
    """Read *path*; a missing file is an empty configuration (all defaults).

    Every failure is a :class:`ConfigError` naming the file, and for syntax errors the line
    and column, because "invalid TOML" alone sends people hunting through the whole file.
    The values are parsed here, so a syntax error is raised by this call.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return ConfigText("", path)
    except IsADirectoryError:
        raise ConfigError.single(
            str(path), "is a directory, not a file; move it aside so Fermix can create config.toml"
        ) from None
    except PermissionError:
        raise ConfigError.single(
            str(path),
            f"cannot be read (permission denied); fix with `chmod 600 {path}` as its owner",
        ) from None
    except UnicodeDecodeError as exc:
        raise ConfigError.single(
            str(path), f"is not UTF-8 text (byte {exc.start}); re-save it as UTF-8"
        ) from None
    source = ConfigText(text, path)
    source.data  # noqa: B018 - parse now: a syntax error belongs to the read
    return source


def read_document(path: Path) -> TOMLDocument:
    """Parse *path* as a tomlkit document (to edit it); a missing file is an empty one.

    Fails as :func:`read_config` does.
    """
    return read_config(path).document


def parse_document(text: str, path: Path | None = None) -> TOMLDocument:
    import tomlkit
    from tomlkit.exceptions import ParseError, TOMLKitError

    where = str(path) if path is not None else "config.toml"
    try:
        return tomlkit.parse(text)
    except ParseError as exc:
        reason = _AT_LINE_RE.sub("", str(exc)).strip().rstrip(".")
        problem = ConfigProblem(
            f"{where}:{exc.line}:{exc.col}",
            f"invalid TOML at line {exc.line}, column {exc.col}: {reason}; fix the "
            "syntax there, then run `fermix config validate`",
        )
    except TOMLKitError as exc:  # e.g. a key defined twice, which tomlkit reports without a line
        reason = str(exc).strip().rstrip(".")
        named = re.search(r'Key "(.+?)" already exists', str(exc))
        line = _second_definition(text, named.group(1) if named else None)
        problem = ConfigProblem(
            f"{where}:{line}" if line else where,
            (f"invalid TOML at line {line}: " if line else "invalid TOML: ")
            + f"{reason}; remove the duplicate, then run `fermix config validate`",
        )
    raise ConfigError([problem], file=path)


def _second_definition(text: str, key: str | None) -> int | None:
    """Line of the second ``key = ...`` in *text*, to point at a duplicate tomlkit cannot place."""
    if not key:
        return None
    pattern = re.compile(rf"^\s*(?:{re.escape(key)}|\"{re.escape(key)}\"|'{re.escape(key)}')\s*=")
    hits = [n for n, line in enumerate(text.splitlines(), start=1) if pattern.match(line)]
    return hits[1] if len(hits) > 1 else None


def plain(document: Mapping[str, Any] | ConfigText) -> dict[str, Any]:
    """A :class:`ConfigText`, tomlkit document or any mapping as plain Python dicts, lists
    and scalars — a copy the caller may change."""
    if isinstance(document, ConfigText):
        return _copy(document.data)
    return _deep_plain(document)


def _copy(value: Any) -> Any:
    if type(value) is dict:
        return {k: _copy(v) for k, v in value.items()}
    if type(value) is list:
        return [_copy(v) for v in value]
    return value


def _deep_plain(value: Any) -> Any:
    unwrap = getattr(value, "unwrap", None)
    if callable(unwrap):
        return unwrap()
    if isinstance(value, Mapping):
        return {str(k): _deep_plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_deep_plain(v) for v in value]
    return value


# --------------------------------------------------------------------------- plain-dict paths


_MISSING = object()


def dig(data: Any, parts: Sequence[str | int], default: Any = _MISSING) -> Any:
    """Follow *parts* through nested dicts/lists; ``default`` (or KeyError) when absent."""
    current = data
    for part in parts:
        if (isinstance(current, Mapping) and isinstance(part, str) and part in current) or (
            isinstance(current, list)
            and isinstance(part, int)
            and -len(current) <= part < len(current)
        ):
            current = current[part]
        else:
            if default is _MISSING:
                raise KeyError(format_key(parts))
            return default
    return current


def has_path(data: Any, parts: Sequence[str | int]) -> bool:
    absent = object()
    return dig(data, parts, absent) is not absent


def put(data: dict[str, Any], parts: Sequence[str], value: Any) -> None:
    """Set ``data[p0][p1]... = value`` creating dicts; a non-table in the way is replaced."""
    current = data
    for part in parts[:-1]:
        nxt = current.get(part)
        if not isinstance(nxt, dict):
            nxt = {}
            current[part] = nxt
        current = nxt
    current[parts[-1]] = value


def pop_path(data: dict[str, Any], parts: Sequence[str]) -> Any:
    """Remove and return the value at *parts*; KeyError when it is absent."""
    parent = dig(data, parts[:-1]) if len(parts) > 1 else data
    if not isinstance(parent, dict) or parts[-1] not in parent:
        raise KeyError(format_key(parts))
    return parent.pop(parts[-1])


# --------------------------------------------------------------------------- pre-plugin read


def plugins_disabled(document: Mapping[str, Any] | ConfigText) -> list[str]:
    """``[fermix_core.plugins] disabled`` read from the raw document before plugins load.

    Only this small piece is validated here (the full config needs every plugin's section
    models, which do not exist yet). A wrong shape is a :class:`ConfigError`, not a silent
    empty list: a disable list that is ignored would load exactly the plugin the operator
    meant to keep out.
    """
    data = plain(document)
    path = ("fermix_core", "plugins", "disabled")
    for depth in (1, 2):
        node = dig(data, path[:depth], None)
        if node is not None and not isinstance(node, dict):
            raise ConfigError.single(format_key(path[:depth]), "must be a table")
    value = dig(data, path, None)
    if value is None:
        return []
    if not isinstance(value, list):
        raise ConfigError.single(
            format_key(path),
            f'must be a list of plugin names like ["channels.slack"] (got {value!r})',
        )
    problems = [
        ConfigProblem(format_key((*path, i)), f"must be a non-empty plugin name (got {item!r})")
        for i, item in enumerate(value)
        if not isinstance(item, str) or not item.strip()
    ]
    if problems:
        raise ConfigError(problems)
    return [item.strip() for item in value]
