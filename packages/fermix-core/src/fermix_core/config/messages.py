"""Turning pydantic validation errors into ``path: message`` lines a person can act on.

pydantic's own messages are written for developers ("Input should be 'a' or 'b'",
"Extra inputs are not permitted", a documentation URL). Config errors are read by
operators editing a TOML file, so each error is rephrased: the full dotted key, every
valid value for a choice, a did-you-mean for a misspelt key — and never the value of a
secret, because these lines end up in terminals and logs.
"""

from __future__ import annotations

import enum
import json
import types
import typing
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ValidationError

from fermix_core.config.document import format_key
from fermix_core.config.errors import ConfigProblem
from fermix_core.config.secret import SECRET_TAGS, is_secret_annotation

# --------------------------------------------------------------------------- annotations


def members(annotation: Any) -> list[Any]:
    """The non-``None`` alternatives of an annotation, with ``Annotated`` wrappers removed."""
    origin = typing.get_origin(annotation)
    if origin is Annotated:
        return members(annotation.__origin__)
    if origin is Union or origin is types.UnionType:
        out: list[Any] = []
        for arg in typing.get_args(annotation):
            out.extend(members(arg))
        return out
    if annotation is type(None):
        return []
    return [annotation]


def model_in(annotation: Any) -> type[BaseModel] | None:
    for member in members(annotation):
        if isinstance(member, type) and issubclass(member, BaseModel):
            return member
    return None


def field_annotation(model: type[BaseModel], key: str) -> Any | None:
    """A field's annotation with its ``Annotated`` metadata put back (pydantic strips it)."""
    for name, info in model.model_fields.items():
        if key in (name, info.alias, info.validation_alias):
            if info.metadata:
                return Annotated[(info.annotation, *info.metadata)]  # type: ignore[return-value]
            return info.annotation
    return None


def field_names(model: type[BaseModel]) -> list[str]:
    return [info.alias or name for name, info in model.model_fields.items()]


def child_annotation(annotation: Any, key: str | int) -> Any | None:
    """What the value at ``annotation[key]`` is declared as, or ``None`` if unknown."""
    for member in members(annotation):
        origin = typing.get_origin(member)
        if isinstance(member, type) and issubclass(member, BaseModel) and isinstance(key, str):
            found = field_annotation(member, key)
            if found is not None:
                return found
        elif origin in (dict, Mapping) and isinstance(key, str):
            args = typing.get_args(member)
            return args[1] if len(args) == 2 else Any
        elif origin in (list, tuple, set, frozenset, Sequence) and isinstance(key, int):
            args = typing.get_args(member)
            return args[0] if args else Any
    return None


def annotation_at(annotation: Any, loc: Sequence[str | int]) -> Any | None:
    current = annotation
    for part in loc:
        if current is None:
            return None
        current = child_annotation(current, part)
    return current


def secret_along(annotation: Any, loc: Sequence[str | int]) -> bool:
    """Whether the value at *loc* is, or sits inside, a secret slot."""
    current = annotation
    if is_secret_annotation(current):
        return True
    for part in loc:
        current = child_annotation(current, part)
        if current is None:
            return False
        if is_secret_annotation(current):
            return True
    return False


def hides_input(annotation: Any, loc: Sequence[str | int]) -> bool:
    """Whether a model along *loc* asked pydantic to keep inputs out of its errors."""
    current = annotation
    for part in [None, *loc]:
        if part is not None:
            current = child_annotation(current, part)
        if current is None:
            return False
        model = model_in(current)
        if model is not None and model.model_config.get("hide_input_in_errors"):
            return True
    return False


def choices_of(annotation: Any) -> list[Any] | None:
    """Every value a ``Literal``/``Enum`` annotation accepts, in declaration order."""
    values: list[Any] = []
    for member in members(annotation):
        if typing.get_origin(member) is Literal:
            values.extend(typing.get_args(member))
        elif isinstance(member, type) and issubclass(member, enum.Enum):
            values.extend(item.value for item in member)
    return values or None


# --------------------------------------------------------------------------- formatting


def show(value: Any, limit: int = 60) -> str:
    """A value as it would be written in TOML, shortened."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        text = value if len(value) <= limit else value[: limit - 1] + "…"
        return json.dumps(text, ensure_ascii=False)
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, Mapping):
        return "a table"
    if isinstance(value, list | tuple):
        return "a list"
    if value is None:
        return "nothing"
    return type(value).__name__


def one_of(values: Sequence[Any]) -> str:
    return "must be one of " + ", ".join(show(v) for v in values)


def did_you_mean(word: str, candidates: Sequence[str]) -> str | None:
    import difflib  # only for a mistake: not loaded by every process that reads the config

    close = difflib.get_close_matches(word, list(candidates), n=1, cutoff=0.6)
    return close[0] if close else None


def unknown_key_message(key: str, candidates: Sequence[str]) -> str:
    guess = did_you_mean(key, candidates)
    if guess:
        return f'unknown key (did you mean "{guess}"?)'
    if candidates and len(candidates) <= 12:
        return "unknown key; valid keys: " + ", ".join(f'"{c}"' for c in candidates)
    return "unknown key; remove it (see docs/config.md for the valid keys)"


_TYPE_MESSAGES = {
    "string_type": "must be a string",
    "int_type": "must be an integer",
    "int_parsing": "must be an integer",
    "int_from_float": "must be a whole number",
    "float_type": "must be a number",
    "float_parsing": "must be a number",
    "bool_type": "must be true or false",
    "bool_parsing": "must be true or false",
    "list_type": "must be a list",
    "tuple_type": "must be a list",
    "set_type": "must be a list",
    "dict_type": "must be a table",
    "model_type": "must be a table",
    "model_attributes_type": "must be a table",
    "path_type": "must be a path string",
    "none_required": "must not be set",
}

_PREFIXES = (
    ("Value error, ", ""),
    ("Assertion failed, ", ""),
    ("Input should be", "must be"),
    ("Value should be", "must be"),
    ("List should have", "must have"),
    ("String should have", "must have"),
    ("Dictionary should have", "must have"),
    ("Tuple should have", "must have"),
)


def _rephrase(err: Mapping[str, Any]) -> tuple[str, bool]:
    """(message, whether to append the offending value)."""
    kind = err["type"]
    ctx = err.get("ctx") or {}
    if kind in _TYPE_MESSAGES:
        return _TYPE_MESSAGES[kind], True
    if kind == "missing":
        return "is required", False
    if kind == "greater_than":
        return f"must be greater than {ctx.get('gt')}", True
    if kind == "greater_than_equal":
        return f"must be at least {ctx.get('ge')}", True
    if kind == "less_than":
        return f"must be less than {ctx.get('lt')}", True
    if kind == "less_than_equal":
        return f"must be at most {ctx.get('le')}", True
    if kind == "too_short":
        n = ctx.get("min_length")
        return f"must have at least {n} item{'s' if n != 1 else ''}", False
    if kind == "too_long":
        n = ctx.get("max_length")
        return f"must have at most {n} item{'s' if n != 1 else ''}", False
    if kind == "string_too_short":
        n = ctx.get("min_length")
        return ("must not be empty" if n == 1 else f"must be at least {n} characters"), False
    if kind == "string_too_long":
        return f"must be at most {ctx.get('max_length')} characters", False
    message = str(err.get("msg", "is invalid"))
    for prefix, repl in _PREFIXES:
        if message.startswith(prefix):
            message = repl + message[len(prefix) :]
            break
    append = kind not in ("value_error", "assertion_error", "secret_type") and not kind.startswith(
        "union"
    )
    return message, append


def convert(
    exc: ValidationError,
    *,
    root: Any,
    prefix: Sequence[str] = (),
    origins: Mapping[tuple[str | int, ...], str] | None = None,
) -> list[ConfigProblem]:
    """Rephrase every error in *exc*; *root* is the annotation that was validated."""
    problems: list[ConfigProblem] = []
    for err in exc.errors(include_url=False):
        loc = [part for part in err["loc"] if part not in SECRET_TAGS]
        key_error = "[key]" in loc
        if key_error:
            loc = loc[: loc.index("[key]")]
        annotation = annotation_at(root, loc)
        hidden = secret_along(root, loc) or hides_input(root, loc)
        kind = err["type"]
        if key_error:
            message, append = f"invalid name: {_rephrase(err)[0]}", False
        elif kind == "extra_forbidden":
            parent = model_in(annotation_at(root, loc[:-1])) if loc else model_in(root)
            names = field_names(parent) if parent else []
            message, append = unknown_key_message(str(loc[-1]), names), False
        elif kind in ("literal_error", "enum"):
            values = choices_of(annotation)
            message = one_of(values) if values else _rephrase(err)[0]
            append = True
        else:
            message, append = _rephrase(err)
        if append and not hidden and "input" in err:
            message += f" (got {show(err['input'])})"
        full = (*prefix, *loc)
        env = _origin(origins, full)
        if env:
            message += f" (from environment variable {env})"
        problems.append(ConfigProblem(format_key(full), message))
    return problems


def _origin(
    origins: Mapping[tuple[str | int, ...], str] | None, path: Sequence[str | int]
) -> str | None:
    if not origins:
        return None
    for depth in range(len(path), 0, -1):
        found = origins.get(tuple(path[:depth]))
        if found:
            return found
    return None
