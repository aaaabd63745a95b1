"""What first-party plugins register, kept in ``$FERMIX_HOME/cache`` for a one-off command.

A cold ``fermix ask`` imported the 23 first-party plugin modules (about 50 modules with their
packages) only to call their registration hooks, which return the same spec records every
time for the same code. :class:`SpecCache` keeps those records, per plugin, in
``cache/plugin-specs.json``, keyed like every value derived from code
(:func:`fermix_core.derived_cache.code_key`: the plugin's entry point and distribution, the
Python and pydantic versions, and a stamp of every ``.py`` file of ``fermix_core`` and of
the plugin's own package). A plugin found there is recorded as loaded with the same hooks
and its specs go into the registry in the same place as if it had been imported; anything
else — a plugin not cached yet, changed code, a damaged entry — is imported as usual, and
a first-party plugin imported that way is cached for the next process.

Only what is sure to come out the same is cached: first-party plugins (their registration
hooks are pure spec factories), implementing nothing but registration hooks, with no hook
ordering options, importing nothing outside the standard library, ``fermix_core`` and
their own package, whose every spec is made of plain values (strings, numbers, tuples,
frozensets, mappings, the enums and records of :mod:`fermix_core.specs`) and decodes back
equal. A callable reference, for instance, keeps its plugin imported. Third-party plugins
are always imported (their hooks may do anything).

The cache is used only where :mod:`fermix_core.startup` runs (the console ``fermix ask``):
``fermix run``, doctor and the plugin commands import every plugin as before.
"""

from __future__ import annotations

import dataclasses
import enum
import logging
import sys
import types
from typing import Any

from fermix_core import specs as spec_types
from fermix_core.hookspecs import REGISTRATION_HOOKS

log = logging.getLogger("fermix.plugins")

FILE_NAME = "plugin-specs.json"
FORMAT = 1

#: The classes a cached value may be made of, by name.
_CLASSES: dict[str, type] = {
    name: cls
    for name, cls in vars(spec_types).items()
    if isinstance(cls, type)
    and getattr(cls, "__module__", None) == spec_types.__name__
    and (dataclasses.is_dataclass(cls) or issubclass(cls, enum.Enum))
}

#: Hook options that change the order or the way pluggy calls an implementation.
ORDER_OPTIONS = ("tryfirst", "trylast", "hookwrapper", "wrapper", "specname")


class Unencodable(ValueError):
    """A value the cache cannot keep exactly."""


def encode(value: Any) -> Any:
    """*value* as JSON data that :func:`decode` turns back into an equal value."""
    if value is None or type(value) in (str, int, float, bool):
        return value
    if isinstance(value, enum.Enum):
        name = type(value).__name__
        if _CLASSES.get(name) is not type(value):
            raise Unencodable(f"enum {type(value).__qualname__}")
        return {"e": name, "v": value.value}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        name = type(value).__name__
        if _CLASSES.get(name) is not type(value):
            raise Unencodable(f"record {type(value).__qualname__}")
        fields = {}
        for item in dataclasses.fields(value):
            if not item.init:
                raise Unencodable(f"{name}.{item.name} is not an init field")
            fields[item.name] = encode(getattr(value, item.name))
        return {"c": name, "v": fields}
    if type(value) is tuple:
        return {"t": [encode(v) for v in value]}
    if type(value) is list:
        return {"l": [encode(v) for v in value]}
    if type(value) is frozenset:
        return {"f": [encode(v) for v in value]}
    if type(value) is dict:
        return {"d": [[encode(k), encode(v)] for k, v in value.items()]}
    raise Unencodable(type(value).__qualname__)


def decode(data: Any) -> Any:
    """The value :func:`encode` made *data* from; ``ValueError`` (or ``TypeError``) for
    anything it cannot have made."""
    if data is None or type(data) in (str, int, float, bool):
        return data
    if type(data) is not dict or len(data) not in (1, 2):
        raise ValueError("not an encoded value")
    if "c" in data:
        cls = _CLASSES[data["c"]]
        if not dataclasses.is_dataclass(cls):
            raise ValueError(f"{data['c']} is not a record")
        return cls(**{str(k): decode(v) for k, v in dict(data["v"]).items()})
    if "e" in data:
        cls = _CLASSES[data["e"]]
        if not issubclass(cls, enum.Enum):
            raise ValueError(f"{data['e']} is not an enum")
        return cls(data["v"])
    ((tag, items),) = data.items()
    if type(items) is not list:
        raise ValueError("not an encoded collection")
    if tag == "t":
        return tuple(decode(v) for v in items)
    if tag == "l":
        return [decode(v) for v in items]
    if tag == "f":
        return frozenset(decode(v) for v in items)
    if tag == "d":
        return {decode(k): decode(v) for k, v in items}
    raise ValueError(f"unknown tag {tag!r}")


def _top(record: Any) -> str:
    return record.value.partition(":")[0].partition(".")[0]


def _outside(modules: set[str], top: str) -> list[str]:
    """Of *modules* (imported by a plugin), those no cache key covers."""
    covered = {top, "fermix_core"}
    return sorted(
        name
        for name in modules
        if name.partition(".")[0] not in covered
        and name.partition(".")[0] not in sys.stdlib_module_names
    )


def _referenced(plugin: Any) -> set[str]:
    """The modules *plugin*'s namespace refers to: modules it imported and the modules of
    the functions and classes it holds (already imported ones count as much as new ones)."""
    found: set[str] = set()
    for value in vars(plugin).values() if hasattr(plugin, "__dict__") else ():
        if isinstance(value, types.ModuleType):
            found.add(value.__name__)
        elif isinstance(value, (type, types.FunctionType)):
            found.add(str(getattr(value, "__module__", "") or ""))
    found.discard("")
    return found


class SpecCache:
    """The per-plugin spec records of ``cache/plugin-specs.json`` (see the module doc)."""

    def __init__(self, home: Any) -> None:
        from fermix_core.derived_cache import DerivedCache

        self._file = DerivedCache(home, FILE_NAME, FORMAT)
        #: Plugins restored from the file by this process, and stored into it.
        self.restored = 0
        self.stored = 0

    @classmethod
    def for_home(cls, home: Any) -> SpecCache | None:
        """The cache of *home*; ``None`` before the home exists."""
        return cls(home) if home.path.is_dir() else None

    def _key(self, record: Any) -> str | None:
        from fermix_core.derived_cache import code_key

        identity = "\0".join(
            [record.name, record.value, record.distribution or "", record.version or ""]
        )
        return code_key(identity, {_top(record)})

    def restore(self, record: Any) -> tuple[list[str], dict[str, list[Any]]] | None:
        """*record*'s hooks and what each registered, or ``None`` (import it instead)."""
        if not record.first_party:
            return None
        key = self._key(record)
        if key is None:
            return None
        value = self._file.get(record.name, key)
        if not isinstance(value, dict):
            return None
        try:
            hooks = [str(hook) for hook in value["hooks"] if isinstance(hook, str)]
            produced = {
                hook: [decode(item) for item in items]
                for hook, items in dict(value["specs"]).items()
            }
        except (KeyError, ValueError, TypeError, AttributeError) as exc:
            log.debug("cached specs of plugin %s unusable (%s): importing it", record.name, exc)
            return None
        if (
            set(hooks) != set(produced)
            or not set(produced) <= REGISTRATION_HOOKS.keys()
            or not all(
                isinstance(item, spec_types.Spec) for items in produced.values() for item in items
            )
        ):
            return None
        self.restored += 1
        return sorted(hooks), produced

    def store(self, record: Any, hookimpls: dict[str, Any], imported: set[str]) -> None:
        """Keep what *record* (a first-party plugin just imported and registered) registers.

        *hookimpls* maps each of its hooks to pluggy's implementation; *imported* is every
        module its import brought in. Calls its registration hooks once more, here; a
        plugin that does not qualify (module doc) is simply not stored.
        """
        if not record.first_party or record.status != "loaded" or not record.hooks:
            return
        key = self._key(record)
        if key is None or set(record.hooks) != set(hookimpls):
            return
        if not set(hookimpls) <= REGISTRATION_HOOKS.keys():
            return
        if any(impl.opts.get(option) for impl in hookimpls.values() for option in ORDER_OPTIONS):
            return
        before = set(sys.modules)
        try:
            produced = {hook: list(impl.function() or ()) for hook, impl in hookimpls.items()}
            encoded = {hook: [encode(item) for item in items] for hook, items in produced.items()}
            decoded = {hook: [decode(item) for item in items] for hook, items in encoded.items()}
        except Exception as exc:  # the registry reports a failing hook when it calls it
            log.debug("specs of plugin %s not cached: %s", record.name, exc)
            return
        used = imported | (set(sys.modules) - before) | _referenced(record.module)
        outside = _outside(used, _top(record))
        if outside:
            log.debug("specs of plugin %s not cached: it imports %s", record.name, outside[:3])
            return
        for hook, items in produced.items():
            again = decoded[hook]
            if len(again) != len(items) or any(
                type(a) is not type(b) or a != b for a, b in zip(again, items, strict=True)
            ):
                return
        self._file.put(record.name, key, {"hooks": list(record.hooks), "specs": encoded})
        self.stored += 1

    def save(self) -> None:
        self._file.save()


def hookimpls_of(pm: Any, plugin: Any) -> dict[str, Any]:
    """Every hook implementation pluggy holds for *plugin*, by hook name."""
    found: dict[str, Any] = {}
    for caller in pm.get_hookcallers(plugin) or ():
        for impl in caller.get_hookimpls():
            if impl.plugin is plugin:
                found[caller.name] = impl
    return found


__all__ = ["FILE_NAME", "FORMAT", "ORDER_OPTIONS", "SpecCache", "decode", "encode", "hookimpls_of"]
