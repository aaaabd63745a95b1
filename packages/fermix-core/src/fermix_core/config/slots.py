"""Enumerating every secret slot in the config, core and plugin, with its canonical ENV name.

The ENV name is the single coordinate of a secret: the environment variable that may
override it *and* the keyring entry it is stored under (``fermix:<ENV>``). Naming follows
the specs where they speak — a provider's ``env_var``, a channel's ``env`` mapping — and a
documented derivation everywhere else (see ``docs/config.md``).
"""

from __future__ import annotations

import re
import typing
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ValidationError

from fermix_core.config.document import dig, plain
from fermix_core.config.messages import child_annotation, field_annotation, members, model_in
from fermix_core.config.models import CoreConfig, McpConfig, SandboxConfig
from fermix_core.config.secret import (
    CommandSecret,
    EnvSecret,
    SecretField,
    SecretValue,
    derived_env_name,
    is_secret_annotation,
)
from fermix_core.plugins.registry import SpecRegistry
from fermix_core.specs import ChannelSpec, ProviderSpec, RefError, WebSearchBackendSpec, resolve_ref

if TYPE_CHECKING:  # pragma: no cover - typing only
    from fermix_core.config.loader import LoadedConfig
    from fermix_core.home import FermixHome

#: Secrets that are never read from the environment, whatever a plugin's spec maps.
#: The Telegram bot token comes only from setup/config, so a stray shell variable cannot
#: point two installs at the same bot.
NEVER_FROM_ENV = frozenset({"TELEGRAM_BOT_TOKEN"})

#: Secret slots whose ENV name the spec fixes rather than the derivation rule.
NAMED_CORE_SLOTS: dict[tuple[str, ...], str] = {
    ("fermix_core", "tools", "generate_image", "google_api_key"): "GEMINI_API_KEY",
}


def _stored(data: Mapping[str, Any], path: tuple[str, ...]) -> SecretValue | None:
    value = dig(data, path, None)
    if isinstance(value, Mapping):
        for cls in (EnvSecret, CommandSecret):
            try:
                return cls.model_validate(dict(value))
            except ValidationError:
                continue
        return None
    return value if isinstance(value, str) else None


#: What of a model holds secrets, as plain data (so it can be kept on disk): a list of
#: ``[key, kind, inner]`` in field order, *kind* one of ``secret`` (the field is a slot),
#: ``model`` (a nested model; *inner* is its shape), ``dict_secret`` (a table of slots) or
#: ``dict_model`` (a table of models; *inner* is their shape). Fields without secrets are
#: left out.
Shape = list[list[Any]]

_shapes: dict[type[BaseModel], Shape] = {}


def secret_shape(model: type[BaseModel]) -> Shape:
    """Where *model*'s secret slots are (see :data:`Shape`); computed once per model."""
    shape = _shapes.get(model)
    if shape is None:
        shape = _shapes[model] = _shape_of(model)
    return shape


def _shape_of(model: type[BaseModel]) -> Shape:
    shape: Shape = []
    for name, info in model.model_fields.items():
        key = info.alias or name
        annotation = field_annotation(model, key)
        if is_secret_annotation(annotation):
            shape.append([key, "secret", None])
            continue
        nested = model_in(annotation)
        if nested is not None:
            shape.append([key, "model", secret_shape(nested)])
            continue
        for member in members(annotation):
            if typing.get_origin(member) is not dict:
                continue
            value_ann = child_annotation(member, "*")
            if is_secret_annotation(value_ann):
                shape.append([key, "dict_secret", None])
            else:
                inner = model_in(value_ann)
                if inner is not None:
                    shape.append([key, "dict_model", secret_shape(inner)])
            break
    return shape


def shape_paths(
    shape: Shape,
    prefix: tuple[str, ...],
    data: Mapping[str, Any],
    skip: frozenset[str] = frozenset(),
) -> Iterator[tuple[str, ...]]:
    """Secret slot paths of a model *shape* at *prefix*: fixed fields always, table entries
    as present in *data*."""
    for key, kind, inner in shape:
        if key in skip:
            continue
        path = (*prefix, key)
        if kind == "secret":
            yield path
        elif kind == "model":
            yield from shape_paths(inner, path, data)
        else:
            present = dig(data, path, None)
            if not isinstance(present, Mapping):
                continue
            for entry in present:
                if kind == "dict_secret":
                    yield (*path, str(entry))
                else:
                    yield from shape_paths(inner, (*path, str(entry)), data)


def model_secret_paths(
    model: type[BaseModel],
    prefix: tuple[str, ...],
    data: Mapping[str, Any],
    skip: frozenset[str] = frozenset(),
) -> Iterator[tuple[str, ...]]:
    """Secret slot paths of *model* at *prefix*: fixed fields always, dict entries if present."""
    return shape_paths(secret_shape(model), prefix, data, skip)


class ModelShapes:
    """What config code needs to know about plugin config models, kept in ``$FERMIX_HOME/cache``.

    Listing the secret slots (and the environment overlays) means knowing each plugin
    section's model, and knowing a model means importing it: every channel's config module,
    in every process, though a one-off ask validates none of those sections. What is asked
    of a model — where its secret slots are (:data:`Shape`), whether a key holds a list —
    depends only on its code, so the answers are kept in ``config-model-shapes.json`` keyed
    on the model's reference and the source stamp of its package and of ``fermix_core``
    (:func:`fermix_core.derived_cache.code_key`), like the tool definitions. A model given
    as an object, not an import path, is never cached; a reference that does not resolve
    has no shape (``None``), as before.
    """

    FILE_NAME = "config-model-shapes.json"
    FORMAT = 1

    def __init__(self, home: FermixHome) -> None:
        from fermix_core.derived_cache import DerivedCache

        self._cache = DerivedCache(home, self.FILE_NAME, self.FORMAT)

    def secrets(self, ref: Any) -> Shape | None:
        """The secret :data:`Shape` of the model *ref* names, or ``None`` if it is none."""
        key = _ref_key(ref)
        if key is not None:
            stored = self._cache.get(f"{ref} secrets", key)
            if _valid_shape(stored):
                return stored
        shape = _resolved_shape(ref)
        if shape is not None and key is not None:
            self._cache.put(f"{ref} secrets", key, shape)
        return shape

    def is_list(self, ref: Any, rel: tuple[str, ...]) -> bool:
        """Whether the key at *rel* of the model *ref* names holds a list."""
        key = _ref_key(ref)
        name = f"{ref} list {'.'.join(rel)}"
        if key is not None:
            stored = self._cache.get(name, key)
            if isinstance(stored, bool):
                return stored
        answer = holds_list(ref, rel)
        if key is not None:
            self._cache.put(name, key, answer)
        return answer

    def save(self) -> None:
        self._cache.save()


def holds_list(ref: Any, rel: tuple[str, ...]) -> bool:
    """Whether the key at *rel* of the model *ref* names is declared as a list (importing it);
    ``False`` for a reference that does not resolve."""
    from fermix_core.config.messages import annotation_at

    try:
        model = resolve_ref(ref)
    except RefError:
        return False
    annotation = annotation_at(model, rel)
    return any(typing.get_origin(m) in (list, tuple, set, frozenset) for m in members(annotation))


def _ref_key(ref: Any) -> str | None:
    if not isinstance(ref, str) or ":" not in ref:
        return None
    from fermix_core.derived_cache import code_key

    return code_key(ref, {ref.split(":")[0].split(".")[0]})


def _resolved_shape(ref: Any) -> Shape | None:
    try:
        model = resolve_ref(ref)
    except RefError:
        return None  # reported by config validation when the section is present
    if not (isinstance(model, type) and issubclass(model, BaseModel)):
        return None
    return secret_shape(model)


def _valid_shape(value: Any) -> bool:
    """Whether a value read from the cache file is a well-formed :data:`Shape`."""
    if not isinstance(value, list):
        return False
    for item in value:
        if not (isinstance(item, list) and len(item) == 3 and isinstance(item[0], str)):
            return False
        _key, kind, inner = item
        if kind in ("secret", "dict_secret"):
            if inner is not None:
                return False
        elif kind in ("model", "dict_model"):
            if not _valid_shape(inner):
                return False
        else:
            return False
    return True


def _core_env(path: tuple[str, ...], data: Mapping[str, Any], registry: SpecRegistry) -> str:
    if path in NAMED_CORE_SLOTS:
        return NAMED_CORE_SLOTS[path]
    if path[:2] == ("fermix_core", "plugin_secrets") and len(path) == 3:
        name = re.sub(r"[^A-Za-z0-9]+", "_", path[2]).strip("_").upper()
        return f"FERMIX_PLUGIN_{name}_API_KEY"
    if path == ("fermix_core", "tools", "web_search", "api_key"):
        backend = dig(data, ("fermix_core", "tools", "web_search", "backend"), None)
        spec = (
            registry.typed(WebSearchBackendSpec).get(backend) if isinstance(backend, str) else None
        )
        if spec is not None and spec.env_var:
            return spec.env_var
    return derived_env_name(path)


def secret_fields(
    config: LoadedConfig | Mapping[str, Any],
    registry: SpecRegistry,
    *,
    shapes: ModelShapes | None = None,
) -> list[SecretField]:
    """Every secret slot present or possible, with its canonical ENV name and stored value.

    *config* is a :class:`~fermix_core.config.loader.LoadedConfig` (its file values are
    used, never the environment's) or a plain/tomlkit mapping of the file. Fixed slots are
    listed whether or not they are set; slots in open tables (``plugin_secrets``) are listed
    when present. A loaded config keeps the list its loading computed, so asking again for
    the same registry costs nothing. *shapes* reads plugin models' shapes from the cache
    instead of importing them.
    """
    kept = getattr(config, "secret_slots", None)
    if kept is not None and getattr(config, "registry", None) is registry:
        return list(kept)
    document = getattr(config, "document", config)
    data = plain(document)
    fields: list[SecretField] = []

    def shape_of(ref: Any) -> Shape | None:
        return shapes.secrets(ref) if shapes is not None else _resolved_shape(ref)

    providers = sorted(registry.typed(ProviderSpec).values(), key=lambda s: (s.order, s.name))
    for spec in providers:
        if spec.config_model is not None:  # secrets among the provider's own keys
            own = shape_of(spec.config_model)
            if own is not None:
                prefix = ("fermix_core", "providers", spec.name)
                for path in shape_paths(own, prefix, data):
                    fields.append(SecretField(path, derived_env_name(path), _stored(data, path)))
        if "api_key" not in spec.config_keys or spec.keyless:
            continue
        path = ("fermix_core", "providers", spec.name, "api_key")
        fields.append(
            SecretField(path, spec.env_var or derived_env_name(path), _stored(data, path))
        )

    for model, prefix, skip in (
        (CoreConfig, ("fermix_core",), frozenset({"providers"})),
        (SandboxConfig, ("sandbox",), frozenset()),
        (McpConfig, ("mcp",), frozenset()),
    ):
        # Core's own models are imported already; walking their twenty-odd classes is
        # what the cache saves.
        shape = shape_of(f"{model.__module__}:{model.__qualname__}") or secret_shape(model)
        for path in shape_paths(shape, prefix, data, skip):
            fields.append(SecretField(path, _core_env(path, data, registry), _stored(data, path)))

    channels = registry.typed(ChannelSpec)
    for section, (ref, _source) in sorted(registry.config_sections().items()):
        shape = shape_of(ref)
        if shape is None:
            continue
        prefix = tuple(section.split("."))
        channel = (
            channels.get(prefix[1]) if prefix[0] == "fermix_channels" and len(prefix) == 2 else None
        )
        reverse = {key: env for env, key in channel.env.items()} if channel is not None else {}
        for path in shape_paths(shape, prefix, data):
            stored = _stored(data, path)
            if channel is None:
                fields.append(SecretField(path, derived_env_name(path), stored))
                continue
            rel = ".".join(path[len(prefix) :])
            mapped = reverse.get(rel)
            if mapped and mapped not in NEVER_FROM_ENV:
                fields.append(SecretField(path, mapped, stored))
            else:
                # A channel decides its own overlays; an unmapped secret is config/keyring only.
                env = mapped or re.sub(r"[^A-Za-z0-9]+", "_", f"{channel.name}_{rel}").upper()
                fields.append(SecretField(path, env, stored, overridable=False))
    return fields
