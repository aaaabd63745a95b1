"""Reading ``config.toml`` as a tomlkit document, dotted keys, and the pre-plugin read.

This module imports tomlkit but not pydantic: boot reads ``[fermix_core.plugins] disabled``
*before* any plugin is imported (the list decides which plugins load), and that early read
should cost as little as possible.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import tomlkit
from tomlkit.exceptions import ParseError, TOMLKitError
from tomlkit.toml_document import TOMLDocument

from fermix_core.config.errors import ConfigError, ConfigKeyError, ConfigProblem

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

    The key is parsed by tomlkit itself (as ``<key> = 0``) rather than by a hand-written
    splitter, so what ``fermix config set`` accepts is exactly what the file accepts.
    """
    text = dotted.strip()
    bad = ConfigKeyError.single(
        dotted, 'is not a dotted key like fermix_core.agent.name (quote parts with dots: a."b.c")'
    )
    if not text or "\n" in text or "=" in text.replace('"', "").replace("'", ""):
        raise bad
    try:
        parsed: Any = tomlkit.parse(f"{text} = 0").unwrap()
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


def read_document(path: Path) -> TOMLDocument:
    """Parse *path* as TOML; a missing file is an empty document (all defaults).

    Every failure is a :class:`ConfigError` naming the file, and for syntax errors the line
    and column, because "invalid TOML" alone sends people hunting through the whole file.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return tomlkit.document()
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
    return parse_document(text, path)


def parse_document(text: str, path: Path | None = None) -> TOMLDocument:
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


def plain(document: Mapping[str, Any]) -> dict[str, Any]:
    """A tomlkit document (or any mapping) as plain Python dicts, lists and scalars."""
    if isinstance(document, TOMLDocument):
        return document.unwrap()
    return _deep_plain(document)


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


def plugins_disabled(document: Mapping[str, Any]) -> list[str]:
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
