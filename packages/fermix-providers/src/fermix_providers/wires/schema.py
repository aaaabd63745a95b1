"""Tool schemas made portable across the provider wires.

Real MCP servers (and pydantic, for nested argument models) publish JSON Schema that not
every provider accepts as is: local ``$ref`` pointers into ``$defs``/``definitions``, a top
level without ``type``, no ``properties``. :func:`portable_schema` returns a self-contained
copy — local references inlined (a reference cycle becomes an open object), the definition
tables and meta keys dropped, ``type: object`` and ``properties`` at the top — and keeps
what every wire takes (``anyOf``/``oneOf``/``allOf``, ``additionalProperties``, nested
schemas without a ``type``). Results are cached per schema object: tool definitions are
built once and sent on every request.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["portable_schema"]

_META = frozenset({"$defs", "definitions", "$schema", "$id", "$comment", "$anchor"})
_CACHE_LIMIT = 1024
#: id(schema) -> (schema, result); the original is held so its id cannot be reused.
_cache: dict[int, tuple[Any, dict[str, Any]]] = {}


def portable_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """A self-contained, object-typed copy of *schema* (see the module docstring)."""
    hit = _cache.get(id(schema))
    if hit is not None and hit[0] is schema:
        return hit[1]
    result = _clean(schema, schema, ())
    if not isinstance(result, dict):
        result = {}
    if result.get("type") != "object":
        result["type"] = "object"
    if not isinstance(result.get("properties"), dict):
        result["properties"] = {}
    if len(_cache) >= _CACHE_LIMIT:
        _cache.clear()
    _cache[id(schema)] = (schema, result)
    return result


def _clean(node: Any, root: Mapping[str, Any], seen: tuple[str, ...]) -> Any:
    if isinstance(node, list):
        return [_clean(item, root, seen) for item in node]
    if not isinstance(node, Mapping):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str):
        if ref in seen:
            return {"type": "object"}  # a recursive structure: any object from here down
        target = _resolve(root, ref)
        inlined = _clean(target, root, (*seen, ref)) if target is not None else {}
        siblings = {k: v for k, v in node.items() if k != "$ref"}
        if siblings and isinstance(inlined, dict):
            return {**inlined, **_clean(siblings, root, seen)}
        return inlined
    return {key: _clean(value, root, seen) for key, value in node.items() if key not in _META}


def _resolve(root: Mapping[str, Any], ref: str) -> Any:
    """A local JSON pointer (``#/$defs/Name``); anything else (remote, malformed) is ``None``."""
    if ref == "#":
        return root
    if not ref.startswith("#/"):
        return None
    node: Any = root
    for part in ref[2:].split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        if isinstance(node, Mapping) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return None
    return node
