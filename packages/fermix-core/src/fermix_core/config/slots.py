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


def model_secret_paths(
    model: type[BaseModel],
    prefix: tuple[str, ...],
    data: Mapping[str, Any],
    skip: frozenset[str] = frozenset(),
) -> Iterator[tuple[str, ...]]:
    """Secret slot paths of *model* at *prefix*: fixed fields always, dict entries if present."""
    for name, info in model.model_fields.items():
        key = info.alias or name
        if key in skip:
            continue
        annotation = field_annotation(model, key)
        path = (*prefix, key)
        if is_secret_annotation(annotation):
            yield path
            continue
        nested = model_in(annotation)
        if nested is not None:
            yield from model_secret_paths(nested, path, data)
            continue
        for member in members(annotation):
            if typing.get_origin(member) is not dict:
                continue
            value_ann = child_annotation(member, "*")
            present = dig(data, path, None)
            if not isinstance(present, Mapping):
                break
            for entry in present:
                if is_secret_annotation(value_ann):
                    yield (*path, str(entry))
                elif model_in(value_ann) is not None:
                    yield from model_secret_paths(model_in(value_ann), (*path, str(entry)), data)  # type: ignore[arg-type]
            break


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
    config: LoadedConfig | Mapping[str, Any], registry: SpecRegistry
) -> list[SecretField]:
    """Every secret slot present or possible, with its canonical ENV name and stored value.

    *config* is a :class:`~fermix_core.config.loader.LoadedConfig` (its file values are
    used, never the environment's) or a plain/tomlkit mapping of the file. Fixed slots are
    listed whether or not they are set; slots in open tables (``plugin_secrets``) are listed
    when present.
    """
    document = getattr(config, "document", config)
    data = plain(document)
    fields: list[SecretField] = []

    providers = sorted(registry.typed(ProviderSpec).values(), key=lambda s: (s.order, s.name))
    for spec in providers:
        if spec.config_model is not None:  # secrets among the provider's own keys
            try:
                own = resolve_ref(spec.config_model)
            except RefError:
                own = None  # reported by config validation
            if isinstance(own, type) and issubclass(own, BaseModel):
                prefix = ("fermix_core", "providers", spec.name)
                for path in model_secret_paths(own, prefix, data):
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
        for path in model_secret_paths(model, prefix, data, skip):
            fields.append(SecretField(path, _core_env(path, data, registry), _stored(data, path)))

    channels = registry.typed(ChannelSpec)
    for section, (ref, _source) in sorted(registry.config_sections().items()):
        try:
            model = resolve_ref(ref)
        except RefError:
            continue  # reported by config validation when the section is present
        if not (isinstance(model, type) and issubclass(model, BaseModel)):
            continue
        prefix = tuple(section.split("."))
        channel = (
            channels.get(prefix[1]) if prefix[0] == "fermix_channels" and len(prefix) == 2 else None
        )
        reverse = {key: env for env, key in channel.env.items()} if channel is not None else {}
        for path in model_secret_paths(model, prefix, data):
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
