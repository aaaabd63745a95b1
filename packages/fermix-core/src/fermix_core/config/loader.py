"""Loading ``config.toml``: read, overlay the environment, validate, and hand back one object.

Loading happens after plugins register (their section models and provider allowlists are
part of the schema). The pieces that must run *before* plugins load —
:func:`~fermix_core.config.document.plugins_disabled` — live in the lighter
:mod:`fermix_core.config.document`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from fermix_core.config.document import (
    ConfigText,
    dig,
    format_key,
    parse_key,
    plain,
    put,
    read_config,
)
from fermix_core.config.env import apply_env, env_overlays
from fermix_core.config.errors import ConfigError, ConfigKeyError, ConfigProblem
from fermix_core.config.messages import did_you_mean
from fermix_core.config.models import FermixConfig, ProviderConfig
from fermix_core.config.schema import core_owned, section_model, split, validate_data
from fermix_core.config.secret import SecretField
from fermix_core.config.slots import ModelShapes, secret_fields
from fermix_core.home import FermixHome
from fermix_core.plugins.discovery import PluginRecord
from fermix_core.plugins.registry import SpecRegistry
from fermix_core.specs import ProviderSpec, resolve_ref

if TYPE_CHECKING:  # pragma: no cover - tomlkit loads only when a document is edited
    from tomlkit.toml_document import TOMLDocument


@dataclass
class LoadedConfig:
    """The validated configuration and everything needed to explain where it came from."""

    #: The validated core model (``fermix_core``, ``sandbox``, ``mcp``, ``fermix_channels``).
    core: FermixConfig
    #: Validated plugin sections present in the file (or supplied by the env), by dotted path.
    sections: dict[str, BaseModel]
    #: File values with the environment overlay applied, as plain Python data.
    data: dict[str, Any]
    #: config.toml as read (its values; the tomlkit document on demand).
    source: ConfigText
    warnings: list[ConfigProblem]
    #: Names (never values) of environment variables that supplied or overrode a key.
    env_applied: list[str]
    path: Path
    #: Sections of unavailable plugins, kept exactly as written.
    untouched: dict[str, Any] = field(default_factory=dict)
    registry: SpecRegistry | None = field(default=None, repr=False)
    #: Key path -> the environment variable that supplied it.
    env_origins: dict[tuple[str | int, ...], str] = field(default_factory=dict)
    #: Routing notes (effort clamps …) already logged for this config: each is said once,
    #: though scheduled jobs resolve their routes on every run.
    logged_notes: set[str] = field(default_factory=set, repr=False, compare=False)
    #: Providers' own keys validated by their specs' ``config_model``, by provider name.
    provider_sections: dict[str, BaseModel] = field(default_factory=dict)
    #: The secret slots of this file for ``registry`` (:func:`secret_fields`), listed once.
    secret_slots: list[SecretField] | None = field(default=None, repr=False, compare=False)

    @property
    def document(self) -> TOMLDocument:
        """The tomlkit document as read (comments and all), parsed on first use."""
        return self.source.document

    def provider_config(self, name: str) -> ProviderConfig | None:
        return self.core.fermix_core.providers.get(name)

    def provider_options(self, name: str) -> BaseModel | None:
        """Provider *name*'s own settings (its ``config_model``), defaults when unwritten.

        ``None`` when the provider has no ``config_model``, or one whose fields do not all
        have defaults and whose block is not written.
        """
        if name in self.provider_sections:
            return self.provider_sections[name]
        spec = self.registry.typed(ProviderSpec).get(name) if self.registry else None
        if spec is None or spec.config_model is None:
            return None
        try:
            model = resolve_ref(spec.config_model)
            instance: BaseModel = model.model_validate({})
        except Exception:  # a model without full defaults (or a broken one) has no default
            return None
        self.provider_sections[name] = instance
        return instance

    def section(self, path: str) -> Any:
        """A section by dotted path: a plugin model, a core sub-model, or a kept raw table."""
        if path in self.sections:
            return self.sections[path]
        if path in self.untouched:
            return self.untouched[path]
        current: Any = self.core
        for part in parse_key(path):
            if isinstance(current, BaseModel):
                current = (
                    getattr(current, part, None) if part in type(current).model_fields else None
                )
            elif isinstance(current, Mapping):
                current = current.get(part)
            else:
                return None
            if current is None:
                return None
        return current

    def effective(self) -> dict[str, Any]:
        """The effective config as plain data: defaults, file, environment, plugin sections."""
        out: dict[str, Any] = self.core.model_dump(mode="json")
        out["fermix_channels"] = {}
        registry = self.registry
        if registry is not None:
            specs = registry.typed(ProviderSpec)
            for name, block in out["fermix_core"]["providers"].items():
                spec = specs.get(name)
                if spec is not None:  # show only the keys this provider accepts
                    for key in [k for k in block if k not in spec.config_keys]:
                        del block[key]
                    options = self.provider_options(name)
                    if options is not None:
                        block.update(options.model_dump(mode="json"))
            for path, (ref, source) in registry.config_sections().items():
                if path in self.sections or core_owned(split(path)):
                    continue
                model, error = section_model(ref, source, path)
                if model is None or error is not None:
                    continue
                try:  # an absent section shows its defaults when the model has them all
                    put(out, split(path), model.model_validate({}).model_dump(mode="json"))
                except Exception:  # noqa: S112 - a section without full defaults has no effective value
                    continue
        for path, instance in self.sections.items():
            put(out, split(path), instance.model_dump(mode="json"))
        for path, raw in self.untouched.items():
            put(out, split(path), raw)
        return out

    def overridden_by(self, dotted_key: str | tuple[str, ...]) -> str | None:
        """The environment variable that supplies *dotted_key* (or a key below it), if any."""
        parts = parse_key(dotted_key) if isinstance(dotted_key, str) else dotted_key
        n = len(parts)
        for path, env in self.env_origins.items():
            if path[:n] == tuple(parts) or tuple(parts)[: len(path)] == path:
                return env
        return None

    def get(self, dotted_key: str) -> Any:
        """The effective value at *dotted_key*; a key that names no setting is an error."""
        parts = parse_key(dotted_key)
        effective = self.effective()
        absent = object()
        value = dig(effective, parts, absent)
        if value is absent:
            raise _unknown(parts, effective)
        return value


def _unknown(parts: tuple[str, ...], effective: Mapping[str, Any]) -> ConfigKeyError:
    depth = 0
    node: Any = effective
    while depth < len(parts) and isinstance(node, Mapping) and parts[depth] in node:
        node = node[parts[depth]]
        depth += 1
    if isinstance(node, Mapping):
        guess = did_you_mean(parts[depth], [str(k) for k in node])
        hint = f' (did you mean "{format_key((*parts[:depth], guess))}"?)' if guess else ""
        return ConfigKeyError.single(format_key(parts), f"no such setting{hint}")
    return ConfigKeyError.single(
        format_key(parts), f"no such setting: {format_key(parts[:depth])} is a value, not a table"
    )


@dataclass
class ValidationReport:
    """Result of validating without raising: what ``fermix config validate`` prints."""

    path: Path
    problems: list[ConfigProblem]
    warnings: list[ConfigProblem]
    loaded: LoadedConfig | None

    @property
    def valid(self) -> bool:
        return not self.problems


def check_config(
    home: FermixHome,
    registry: SpecRegistry,
    *,
    unavailable: Sequence[PluginRecord] = (),
    environ: Mapping[str, str] | None = None,
    document: TOMLDocument | ConfigText | None = None,
) -> ValidationReport:
    """Validate like :func:`load_config` but return problems instead of raising them."""
    path = home.config_file
    try:
        source = ConfigText.of(document) if document is not None else read_config(path)
        file_data = plain(source)
    except ConfigError as exc:
        return ValidationReport(path, exc.problems, [], None)
    # Model shapes come from $FERMIX_HOME/cache once the home exists (never created here).
    shapes = ModelShapes(home) if home.path.is_dir() else None
    slots = secret_fields(file_data, registry, shapes=shapes)
    overlays = env_overlays(registry, slots, shapes=shapes)
    if shapes is not None:
        shapes.save()
    data, applied, origins = apply_env(file_data, overlays, environ)
    result = validate_data(data, registry, unavailable, origins=origins)
    if result.problems or result.core is None:
        return ValidationReport(path, result.problems, result.warnings, None)
    core = result.core
    if core.sandbox.workspace_root is None:
        core.sandbox.workspace_root = home.workspace
    loaded = LoadedConfig(
        core=core,
        sections=result.sections,
        data=data,
        source=source,
        warnings=result.warnings,
        env_applied=applied,
        path=path,
        untouched=result.untouched,
        registry=registry,
        env_origins=origins,
        provider_sections=result.provider_options,
        secret_slots=slots,
    )
    return ValidationReport(path, [], result.warnings, loaded)


def load_config(
    home: FermixHome,
    registry: SpecRegistry,
    *,
    unavailable: Sequence[PluginRecord] = (),
    environ: Mapping[str, str] | None = None,
    document: TOMLDocument | ConfigText | None = None,
) -> LoadedConfig:
    """Read, overlay and validate ``config.toml``; one :class:`ConfigError` lists every problem.

    *unavailable* are the plugin records that failed, were blocked or disabled, or
    conflict (``PluginHost.unavailable()``); their sections are kept untouched and reported
    in ``warnings``. *document* validates an in-memory document instead of the file (the
    writer uses it to check a change before writing).
    """
    report = check_config(
        home, registry, unavailable=unavailable, environ=environ, document=document
    )
    if report.loaded is None:
        raise ConfigError(report.problems, file=report.path)
    return report.loaded
