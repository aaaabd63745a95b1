"""Validating a config dict against the core models and every plugin's section models.

The shape of the file is decided by what is installed: ``[fermix_channels.slack]`` is only
a valid section when a loaded plugin claims it, and ``[fermix_core.providers.openrouter]``
only accepts the keys the OpenRouter provider declares. So validation runs after plugins
register, against the :class:`~fermix_core.plugins.registry.SpecRegistry` they produced.

Three outcomes for every section: validated by its model; *kept untouched* (with a warning)
when the plugin that owns it is unavailable, so a broken plugin never costs the operator
their settings; or a problem, when nothing claims it.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ValidationError

from fermix_core import install_hint
from fermix_core.config.document import dig, format_key, has_path, pop_path
from fermix_core.config.errors import ConfigProblem
from fermix_core.config.messages import convert, did_you_mean, one_of, show, unknown_key_message
from fermix_core.config.models import (
    BUILTIN_IMAGE_BACKENDS,
    BUILTIN_MEMORY_BACKENDS,
    BUILTIN_TRANSCRIPTION_BACKENDS,
    BUILTIN_WEB_SEARCH_BACKENDS,
    CORE_TOP_LEVEL,
    OAUTH_PROVIDERS,
    SERVER_NAME_RE,
    CoreConfig,
    FermixConfig,
    ProviderConfig,
    ToolsConfig,
)
from fermix_core.plugins.discovery import PluginRecord
from fermix_core.plugins.registry import SpecRegistry
from fermix_core.specs import (
    REASONING_EFFORTS,
    ImageBackendSpec,
    MemoryBackendSpec,
    ProviderSpec,
    RefError,
    TranscriptionBackendSpec,
    WebSearchBackendSpec,
    resolve_ref,
)

#: Namespaces shared by many plugins: ownership there goes by section name, never by
#: distribution, or one broken first-party plugin would shelter every typo beneath it.
SHARED_NAMESPACES = frozenset({"fermix_core", "fermix_channels"})

PROVIDER_KEYS = tuple(ProviderConfig.model_fields)
CORE_SECTION_FIELDS = frozenset(CoreConfig.model_fields)
CORE_TOOL_SECTIONS = frozenset(ToolsConfig.model_fields)

Path_ = tuple[str, ...]


@dataclass
class SchemaResult:
    """What validation produced; ``core`` is ``None`` when the core part was invalid."""

    core: FermixConfig | None
    sections: dict[str, BaseModel] = field(default_factory=dict)
    untouched: dict[str, Any] = field(default_factory=dict)
    #: Each provider's own keys, validated by its spec's ``config_model``, by provider name.
    provider_options: dict[str, BaseModel] = field(default_factory=dict)
    problems: list[ConfigProblem] = field(default_factory=list)
    warnings: list[ConfigProblem] = field(default_factory=list)


# --------------------------------------------------------------------------- ownership


def split(path: str) -> Path_:
    return tuple(path.split("."))


def core_owned(parts: Sequence[str]) -> bool:
    """Whether a section path belongs to a core model (so no plugin may claim it)."""
    if not parts:
        return True
    head = parts[0]
    if head in ("sandbox", "mcp"):
        return True
    if head in ("fermix_core", "fermix_channels") and len(parts) == 1:
        return True
    if head == "fermix_core" and parts[1] in CORE_SECTION_FIELDS:
        if parts[1] == "tools":
            return len(parts) == 2 or parts[2] in CORE_TOOL_SECTIONS
        return True
    return False


_STATUS_WORDS = {
    "failed": "failed to load",
    "blocked": "is blocked",
    "disabled": "is disabled",
    "conflict": "conflicts with another plugin",
}


def _tail(plugin_name: str) -> str:
    """``channels.telegram`` -> ``telegram``: an entry-point name after its first dot."""
    tail = plugin_name.split(".", 1)[1] if "." in plugin_name else plugin_name
    return tail.replace("-", "_").lower()


def unavailable_owner(
    parts: Sequence[str], unavailable: Sequence[PluginRecord], registry: SpecRegistry
) -> str | None:
    """Why the section at *parts* belongs to a plugin that is not active, or ``None``.

    A plugin that never registered cannot say what it owns, so ownership is inferred: the
    section's last component equals the entry-point name after its first dot
    (``channels.telegram`` owns ``fermix_channels.telegram``), or — outside the shared
    ``fermix_core``/``fermix_channels`` namespaces — its top-level key is the
    distribution's import name (``fermix-weather`` owns ``[fermix_weather]``). A loaded
    plugin whose spec was rejected owns what that spec would have claimed.
    """
    last = parts[-1]
    for record in unavailable:
        matched = last == _tail(record.name)
        if not matched and record.distribution and parts[0] not in SHARED_NAMESPACES:
            matched = parts[0] == record.distribution.replace("-", "_").replace(".", "_").lower()
        if matched:
            why = f" ({record.error})" if record.error else ""
            state = _STATUS_WORDS.get(record.status, f"is {record.status}")
            return f"its plugin {record.source} {state}{why}"
    dotted = ".".join(parts)
    for error in registry.errors:
        claims = {
            "channel": f"fermix_channels.{error.name}",
            "provider": f"fermix_core.providers.{error.name}",
            "config_section": str(error.name),
        }.get(error.kind)
        owned = error.name is not None and claims == dotted
        if error.name is None and error.sources:
            owned = last == _tail(error.sources[0].split(" ", 1)[0])
        if owned:
            return f"its plugin {', '.join(error.sources)} was rejected ({error.message})"
    return None


def known_sections(registry: SpecRegistry, claimed: Mapping[str, Any]) -> list[str]:
    """Every section (and top-level key) path a did-you-mean may suggest."""
    paths = [
        "fermix_core",
        "sandbox",
        "sandbox.env",
        "mcp",
        "mcp.servers",
        "fermix_channels",
        "fermix_web",
    ]
    paths += [f"fermix_core.{name}" for name in CORE_SECTION_FIELDS]
    paths += [f"fermix_core.tools.{name}" for name in CORE_TOOL_SECTIONS]
    paths += [f"fermix_core.oauth.{name}" for name in OAUTH_PROVIDERS]
    paths += [f"fermix_core.providers.{name}" for name in registry.typed(ProviderSpec)]
    paths += list(claimed)
    return sorted(set(paths))


# --------------------------------------------------------------------------- validation


def section_model(
    ref: Any, source: str, path: str
) -> tuple[type[BaseModel] | None, ConfigProblem | None]:
    """Import a plugin's section model; a broken reference is the plugin's fault, said so."""
    try:
        model = resolve_ref(ref)
    except RefError as exc:
        return None, ConfigProblem(
            path,
            f"cannot load this section's model from plugin {source} ({exc}); "
            "reinstall or disable that plugin",
        )
    if not (isinstance(model, type) and issubclass(model, BaseModel)):
        return None, ConfigProblem(
            path,
            f"plugin {source} declares a config model that is not a pydantic model; "
            "report it to its author",
        )
    return model, None


def validate_section(
    path: str,
    model: type[BaseModel],
    raw: Any,
    source: str,
    origins: Mapping[tuple[str | int, ...], str] | None = None,
) -> tuple[BaseModel | None, list[ConfigProblem]]:
    """Validate one plugin section, with errors pinned to full key paths."""
    parts = split(path)
    if not isinstance(raw, Mapping):
        return None, [ConfigProblem(path, f"must be a table (got {show(raw)})")]
    problems: list[ConfigProblem] = []
    if model.model_config.get("extra") not in ("forbid", "allow"):
        # A plugin model that ignores extras would swallow typos; catch them at this level.
        names = [info.alias or name for name, info in model.model_fields.items()]
        for key in raw:
            if key not in names:
                problems.append(
                    ConfigProblem(format_key((*parts, key)), unknown_key_message(key, names))
                )
    try:
        instance = model.model_validate(dict(raw))
    except ValidationError as exc:
        return None, problems + convert(exc, root=model, prefix=parts, origins=origins)
    except Exception as exc:  # a plugin validator with a bug must not crash config load
        return None, [
            *problems,
            ConfigProblem(
                path,
                f"the section model of plugin {source} raised {type(exc).__name__}; "
                "report it to the plugin's author",
            ),
        ]
    return (None if problems else instance), problems


class _Validator:
    def __init__(
        self,
        data: Mapping[str, Any],
        registry: SpecRegistry,
        unavailable: Sequence[PluginRecord],
        origins: Mapping[tuple[str | int, ...], str] | None,
    ) -> None:
        self.raw = data
        self.work: dict[str, Any] = copy.deepcopy(dict(data))
        self.registry = registry
        self.unavailable = list(unavailable)
        self.origins = origins or {}
        self.result = SchemaResult(core=None)
        self.providers = registry.typed(ProviderSpec)
        claimed = registry.config_sections()
        self.claimed: dict[str, tuple[Any, str]] = {}
        for path, entry in claimed.items():
            if core_owned(split(path)):
                self.warn(
                    path, f"plugin {entry[1]} claims a section that core owns; its claim is ignored"
                )
            else:
                self.claimed[path] = entry
        self.prefixes = {
            ".".join(split(p)[:i]) for p in self.claimed for i in range(1, len(split(p)))
        }
        self.known = known_sections(registry, self.claimed)

    # ------------------------------------------------------------------ helpers

    def problem(self, path: str, message: str) -> None:
        self.result.problems.append(ConfigProblem(path, message))

    def warn(self, path: str, message: str) -> None:
        self.result.warnings.append(ConfigProblem(path, message))

    def owner(self, parts: Sequence[str]) -> str | None:
        return unavailable_owner(parts, self.unavailable, self.registry)

    def keep(self, parts: Path_, value: Any, reason: str) -> None:
        path = format_key(parts)
        self.result.untouched[".".join(parts)] = value
        self.warn(
            path,
            f"kept as is and not validated: {reason}; fix or re-enable the plugin, "
            "or remove the section",
        )

    # ------------------------------------------------------------------ steps

    def run(self) -> SchemaResult:
        self.plugin_sections()
        self.provider_blocks()
        self.sweep()
        self.core_model()
        self.registry_checks()
        self.result.problems = sorted(set(self.result.problems))
        self.result.warnings = sorted(set(self.result.warnings))
        return self.result

    def plugin_sections(self) -> None:
        for path in sorted(self.claimed, key=lambda p: -len(split(p))):
            parts = split(path)
            if not has_path(self.work, parts):
                continue
            raw = pop_path(self.work, parts)
            ref, source = self.claimed[path]
            model, error = section_model(ref, source, path)
            if error is not None:
                self.result.problems.append(error)
                continue
            assert model is not None
            instance, problems = validate_section(path, model, raw, source, self.origins)
            self.result.problems.extend(problems)
            if instance is not None:
                self.result.sections[path] = instance

    def provider_blocks(self) -> None:
        core = self.work.get("fermix_core")
        blocks = core.get("providers") if isinstance(core, dict) else None
        if not isinstance(blocks, dict):
            return  # absent, or the core model reports "must be a table"
        kept: dict[str, Any] = {}
        for name, block in blocks.items():
            parts = ("fermix_core", "providers", name)
            spec = self.providers.get(name)
            if spec is None:
                reason = self.owner(parts)
                if reason:
                    self.keep(parts, block, reason)
                else:
                    self.problem(format_key(parts), self.unknown_provider_message(name))
                continue
            if not isinstance(block, dict):
                kept[name] = block
                continue
            allowed: dict[str, Any] = {}
            own: dict[str, Any] = {}
            for key, value in block.items():
                key_path = format_key((*parts, key))
                if key not in PROVIDER_KEYS and spec.config_model is not None:
                    own[key] = value
                elif key not in PROVIDER_KEYS:
                    candidates = [k for k in PROVIDER_KEYS if k in spec.config_keys]
                    self.problem(key_path, unknown_key_message(key, candidates))
                elif key not in spec.config_keys:
                    self.problem(key_path, "not allowed for this provider")
                else:
                    allowed[key] = value
            kept[name] = allowed
            if spec.config_model is not None:
                self.provider_options(spec, own)
        core["providers"] = kept

    def provider_options(self, spec: ProviderSpec, own: dict[str, Any]) -> None:
        """Validate a provider's own keys against its ``config_model``."""
        path = format_key(("fermix_core", "providers", spec.name))
        source = self.registry.source_of(spec) or f"providers.{spec.name}"
        model, error = section_model(spec.config_model, source, path)
        if error is not None:
            self.result.problems.append(error)
            return
        assert model is not None
        clash = sorted(
            (info.alias or key)
            for key, info in model.model_fields.items()
            if (info.alias or key) in PROVIDER_KEYS
        )
        if clash:
            self.problem(
                path,
                f"plugin {source} declares config_model fields named like core provider keys "
                f"({', '.join(clash)}); report it to its author (core keys are chosen with "
                "config_keys)",
            )
            return
        instance, problems = validate_section(
            f"fermix_core.providers.{spec.name}", model, own, source, self.origins
        )
        self.result.problems.extend(problems)
        if instance is not None:
            self.result.provider_options[spec.name] = instance

    def unknown_provider_message(self, name: str) -> str:
        names = sorted(self.providers)
        if not names:
            return (
                f'unknown provider "{name}": no provider plugin is loaded; install one '
                f"({install_hint('providers')}) or remove the section"
            )
        guess = did_you_mean(name, names)
        hint = f' (did you mean "{guess}"?)' if guess else ""
        return f'unknown provider "{name}"{hint}; known providers: ' + ", ".join(
            f'"{n}"' for n in names
        )

    def sweep(self) -> None:
        """Find tables and keys no model claims, under core containers and at the top level."""
        for key in list(self.work):
            value = self.work[key]
            if key == "mcp" and isinstance(value, dict) and isinstance(value.get("servers"), dict):
                for name in list(value["servers"]):
                    if not SERVER_NAME_RE.match(name):
                        del value["servers"][name]
                        self.problem(
                            format_key(("mcp", "servers", name)),
                            "invalid server name: use letters, digits, '_' or '-' (it becomes part "
                            "of the tool names mcp_<server>_<tool>)",
                        )
            if key in ("sandbox", "mcp"):
                continue
            if key == "fermix_core" and isinstance(value, dict):
                for child in list(value):
                    if child not in CORE_SECTION_FIELDS:
                        self.generic(("fermix_core", child))
                tools = value.get("tools")
                if isinstance(tools, dict):
                    for child in list(tools):
                        if child not in CORE_TOOL_SECTIONS:
                            self.generic(("fermix_core", "tools", child))
            elif key == "fermix_channels" and isinstance(value, dict):
                for child in list(value):
                    self.generic(("fermix_channels", child))
            elif key not in CORE_TOP_LEVEL:
                self.generic((key,))

    def generic(self, parts: Path_) -> None:
        value = dig(self.work, parts)
        dotted = ".".join(parts)
        if dotted in self.prefixes and isinstance(value, dict):
            for child in list(value):
                self.generic((*parts, child))
            if not value:
                pop_path(self.work, parts)
            return
        pop_path(self.work, parts)
        reason = self.owner(parts)
        if reason:
            self.keep(parts, value, reason)
            return
        same_depth = [k for k in self.known if k.count(".") == dotted.count(".")]
        guess = did_you_mean(dotted, same_depth)
        hint = f' (did you mean "{guess}"?)' if guess else ""
        if isinstance(value, dict):
            message = (
                f"unknown section{hint}; no loaded plugin provides it — install the plugin that "
                "owns it or remove the section"
            )
        else:
            message = f"unknown key{hint}"
        self.problem(format_key(parts), message)

    def core_model(self) -> None:
        core = validate_present(FermixConfig, self.work)
        if core is None:  # something is invalid: the whole model says exactly what
            try:
                core = FermixConfig.model_validate(self.work)
            except ValidationError as exc:
                self.result.problems.extend(convert(exc, root=FermixConfig, origins=self.origins))
                return
        channels: dict[str, Any] = {}
        for path, instance in self.result.sections.items():
            parts = split(path)
            if parts[0] == "fermix_channels" and len(parts) == 2:
                channels[parts[1]] = instance
        for path, raw in self.result.untouched.items():
            parts = split(path)
            if parts[0] == "fermix_channels" and len(parts) == 2:
                channels[parts[1]] = raw
        core.fermix_channels = channels
        self.result.core = core

    # ------------------------------------------------------------------ registry-dependent values

    def registry_checks(self) -> None:
        raw_providers = dig(self.work, ("fermix_core", "providers"), {})
        if isinstance(raw_providers, dict):
            self.provider_values(raw_providers)
        for key in ("agent.provider", "routing.subagent_provider", "routing.cron_provider"):
            parts = ("fermix_core", *key.split("."))
            value = dig(self.raw, parts, None)
            if isinstance(value, str) and value and value not in self.providers:
                reason = self.owner(("fermix_core", "providers", value))
                if reason:
                    self.warn(format_key(parts), f'names provider "{value}" but {reason}')
                else:
                    self.problem(format_key(parts), self.unknown_provider_message(value))
        self.backend("tools.web_search.backend", BUILTIN_WEB_SEARCH_BACKENDS, WebSearchBackendSpec)
        self.backend("tools.generate_image.backend", BUILTIN_IMAGE_BACKENDS, ImageBackendSpec)
        self.backend(
            "transcription.backend", BUILTIN_TRANSCRIPTION_BACKENDS, TranscriptionBackendSpec
        )
        self.backend("memory.backend", BUILTIN_MEMORY_BACKENDS, MemoryBackendSpec)

    def provider_values(self, blocks: Mapping[str, Any]) -> None:
        primaries = []
        for name, block in blocks.items():
            spec = self.providers.get(name)
            if spec is None or not isinstance(block, dict):
                continue
            if block.get("primary") is True:
                primaries.append(name)
            effort = block.get("reasoning_effort")
            # A canonical level outside the provider's slice is not an error: routing clamps
            # it to the nearest level the route accepts and says so (log, providers list,
            # doctor). Only a provider that takes no effort at all refuses the key.
            if (
                isinstance(effort, str)
                and effort in REASONING_EFFORTS
                and not spec.reasoning_efforts
            ):
                path = format_key(("fermix_core", "providers", name, "reasoning_effort"))
                self.problem(path, "not allowed for this provider")
            mode = block.get("auth_mode")
            if (
                isinstance(mode, str)
                and mode in ("api_key", "oauth")
                and mode not in spec.auth_modes
            ):
                path = format_key(("fermix_core", "providers", name, "auth_mode"))
                self.problem(
                    path, f"{one_of(spec.auth_modes)} for this provider (got {show(mode)})"
                )
        if len(primaries) > 1:
            listed = ", ".join(sorted(primaries))
            self.problem(
                "fermix_core.providers",
                f"more than one provider has primary = true ({listed}); keep it on exactly one",
            )

    def backend(self, key: str, builtin: Sequence[str], spec_cls: type) -> None:
        parts = ("fermix_core", *key.split("."))
        value = dig(self.raw, parts, None)
        if not isinstance(value, str) or not value.strip():
            return  # absent (the default is valid) or a type error the model reports
        valid = list(builtin) + sorted(n for n in self.registry.typed(spec_cls) if n not in builtin)
        if value in valid:
            return
        message = f"{one_of(valid)} (got {show(value)})"
        if self.unavailable:
            message += (
                "; a plugin that provides it may have failed to load (see `fermix plugins list`)"
            )
        self.problem(format_key(parts), message)


#: Models :func:`validate_present` assembles key by key (no validators of their own): the
#: root and ``[fermix_core]``. Every section below them is validated by its own model.
_ASSEMBLED: frozenset[type[BaseModel]] = frozenset({FermixConfig, CoreConfig})


def validate_present(model: type[BaseModel], data: Any) -> Any:
    """*data* validated against *model*, building only the models of the sections present.

    Building the validator of :class:`FermixConfig` means building all 25 core models,
    though a typical file has two or three sections. Here the root and ``[fermix_core]``
    are assembled key by key: each present key is validated by its own model (or its
    field type), each absent section gets its defaults (what validating an empty table
    gives; defaults are never validated), and the result equals
    ``model.model_validate(data)``. ``None`` when any part is invalid (or not a table),
    so the caller validates the whole to report every problem with its path. The sweep
    has already removed the keys no model owns.
    """
    if not isinstance(data, Mapping):
        return None
    values: dict[str, Any] = {}
    present: set[str] = set()
    for name, info in model.model_fields.items():
        key = info.alias or name
        if key not in data:
            if info.is_required() or getattr(info, "default_factory_takes_data", False):
                return None
            values[name] = _default(info)
            continue
        present.add(name)
        raw = data[key]
        inner = info.annotation
        try:
            if inner in _ASSEMBLED:
                values[name] = validate_present(inner, raw)  # type: ignore[arg-type]
                if values[name] is None:
                    return None
            elif isinstance(inner, type) and issubclass(inner, BaseModel):
                values[name] = inner.model_validate(raw)
            elif model is CoreConfig and name == "providers" and isinstance(raw, Mapping):
                values[name] = {k: ProviderConfig.model_validate(v) for k, v in raw.items()}
            else:
                values[name] = _field_adapter(model, name).validate_python(raw)
        except ValidationError:
            return None
    if len(present) != len(data):
        return None  # a key no field owns (the sweep reports those) or an alias clash
    return model.model_construct(_fields_set=present, **values)


def _default(info: Any) -> Any:
    """A field's default as validating an absent key gives it, without building a model:
    a section's default factory is its model's defaults, built the same way."""
    factory = info.default_factory
    if factory is None:
        return copy.deepcopy(info.default)
    if isinstance(factory, type) and issubclass(factory, BaseModel):
        return _defaults_of(factory)
    return factory()


def _defaults_of(model: type[BaseModel]) -> BaseModel:
    fields = model.model_fields.values()
    if any(i.is_required() or getattr(i, "default_factory_takes_data", False) for i in fields):
        return model()  # not a defaults-only model: let pydantic build and run it
    values = {name: _default(info) for name, info in model.model_fields.items()}
    return model.model_construct(_fields_set=set(), **values)


_adapters: dict[tuple[type[BaseModel], str], Any] = {}


def _field_adapter(model: type[BaseModel], name: str) -> Any:
    """A validator for one field of a core model (its type, constraints and strictness)."""
    adapter = _adapters.get((model, name))
    if adapter is None:
        from pydantic import ConfigDict, TypeAdapter

        from fermix_core.config.messages import field_annotation

        info = model.model_fields[name]
        annotation = field_annotation(model, info.alias or name)
        strict = bool(model.model_config.get("strict"))
        adapter = _adapters[(model, name)] = TypeAdapter(
            annotation, config=ConfigDict(strict=strict)
        )
    return adapter


def validate_data(
    data: Mapping[str, Any],
    registry: SpecRegistry,
    unavailable: Sequence[PluginRecord] = (),
    *,
    origins: Mapping[tuple[str | int, ...], str] | None = None,
) -> SchemaResult:
    """Validate a whole config dict (file values with the env overlay applied)."""
    return _Validator(data, registry, unavailable, origins).run()
