"""Typed spec records that registration hooks yield.

A spec is a cheap, frozen description of something a plugin contributes: a provider, a
channel, a tool, a slash command, a backend, a config section, a doctor check or a setup
step. Specs never hold the heavy object itself. They name a *factory* — either an import
path ``"package.module:attribute"`` or a callable that imports lazily — so that collecting
every spec at boot imports no adapter, SDK or HTTP stack. The runtime resolves a factory
only when it actually builds the thing.

Specs are plain frozen dataclasses rather than pydantic models on purpose: registration
runs on every boot and in ``fermix plugins list``, and dataclasses cost nothing to import.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, ClassVar

#: A lazily resolved reference: ``"pkg.module:attr"`` or an already-imported callable.
Ref = str | Callable[..., Any]

NAME_RE = re.compile(r"^[a-z][a-z0-9_]*$")
COMMAND_RE = re.compile(r"^[a-z][a-z0-9_-]*$")
SECTION_RE = re.compile(r"^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*$")
REF_RE = re.compile(r"^[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*:[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*$")


class RefError(ImportError):
    """A factory or model reference could not be imported."""


def resolve_ref(ref: Ref) -> Any:
    """Import and return what *ref* names; callables are returned unchanged."""
    if callable(ref):
        return ref
    module_name, _, attr_path = ref.partition(":")
    try:
        obj: Any = importlib.import_module(module_name)
        for part in attr_path.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as exc:
        raise RefError(f"cannot import {ref!r}: {exc}") from exc
    return obj


def _check_ref(label: str, ref: Ref | None, problems: list[str], *, required: bool = True) -> None:
    if ref is None:
        if required:
            problems.append(f"{label} is required")
        return
    if isinstance(ref, str):
        if not REF_RE.match(ref):
            problems.append(f"{label} {ref!r} is not an import path of the form 'pkg.module:attr'")
    elif not callable(ref):
        problems.append(f"{label} must be an import path string or a callable")


class PolicyClass(StrEnum):
    """What a capability does, from which both trust surfaces are derived."""

    READ_ONLY = "read_only"
    OWNER_DATA_READ = "owner_data_read"
    WRITE = "write"
    EXEC = "exec"
    NETWORK = "network"
    EXTERNAL_API = "external_api"
    CHANNEL_SIDE_EFFECT = "channel_side_effect"


class Role(StrEnum):
    """Who may run a slash command."""

    ANY = "any"
    OPERATOR = "operator"


REASONING_EFFORTS: tuple[str, ...] = ("none", "low", "medium", "high", "xhigh", "max")

#: The keys core itself understands in ``[fermix_core.providers.<name>]`` (the fields of
#: ``fermix_core.config.models.ProviderConfig``; a test keeps the two equal). A provider's
#: ``config_keys`` chooses among these; keys of its own go in its ``config_model``.
CORE_PROVIDER_KEYS: frozenset[str] = frozenset(
    {
        "primary",
        "default_model",
        "base_url",
        "api_key",
        "reasoning_effort",
        "auth_mode",
        "fast",
        "wire",
        "vision_models",
    }
)


@dataclass(frozen=True, slots=True)
class Spec:
    """Base of every spec record. ``kind`` names the registry the spec lands in."""

    kind: ClassVar[str] = "spec"
    name: str

    def problems(self) -> list[str]:
        """Return human-readable validation problems; empty when the spec is sound."""
        problems: list[str] = []
        if not isinstance(self.name, str) or not NAME_RE.match(self.name):
            problems.append(
                f"name {self.name!r} must be lowercase letters, digits and '_' "
                "and start with a letter"
            )
        return problems


@dataclass(frozen=True, slots=True)
class ModelInfo:
    """One model in a provider's static catalog."""

    id: str
    context_window: int
    vision: bool = False
    #: Highest reasoning effort this model accepts; ``None`` passes any effort through.
    max_effort: str | None = None
    label: str | None = None


@dataclass(frozen=True, slots=True)
class SetupField:
    """A value the setup wizard asks for when configuring something."""

    key: str
    prompt: str
    secret: bool = False
    required: bool = True
    default: str | None = None


@dataclass(frozen=True, slots=True)
class ProviderSpec(Spec):
    """A model provider: one declarative record plus the adapter factory."""

    kind: ClassVar[str] = "provider"
    label: str = ""
    factory: Ref | None = None
    wire: str = "chat_completions"
    auth_modes: tuple[str, ...] = ("api_key",)
    #: Environment variable that overrides the provider's API key (``None`` when keyless).
    env_var: str | None = None
    keyless: bool = False
    #: ``False`` for an adapter that answers in process (no server to point at): a keyless
    #: one then counts as configured once its block is written, with no ``base_url``.
    needs_server: bool = True
    #: Profile in auth.json holding this provider's OAuth login (``auth_mode = "oauth"``).
    oauth_profile: str | None = None
    #: Environment variable that overrides ``base_url`` (Ollama's ``OLLAMA_BASE_URL``).
    base_url_env: str | None = None
    #: Core keys accepted in ``[fermix_core.providers.<name>]`` (a subset of
    #: :data:`CORE_PROVIDER_KEYS`); anything else fails at load unless ``config_model`` owns it.
    config_keys: frozenset[str] = frozenset(
        {"primary", "default_model", "base_url", "api_key", "vision_models"}
    )
    #: pydantic model validating the provider's own keys in its block; the validated
    #: instance reaches the adapter as ``ProviderSettings.options``.
    config_model: Ref | None = None
    #: Accepted reasoning efforts, lowest first; empty means the provider takes none.
    reasoning_efforts: tuple[str, ...] = ()
    default_model: str | None = None
    default_base_url: str | None = None
    models: tuple[ModelInfo, ...] = ()
    setup_fields: tuple[SetupField, ...] = ()
    #: Position in the deterministic fallback order (lower first).
    order: int = 1000

    def problems(self) -> list[str]:
        problems = Spec.problems(self)
        _check_ref("factory", self.factory, problems)
        _check_ref("config_model", self.config_model, problems, required=False)
        impossible = sorted(k for k in self.config_keys if k not in CORE_PROVIDER_KEYS)
        if impossible:
            problems.append(
                f"config_keys names keys core does not know: {impossible}; config_keys chooses "
                f"from {sorted(CORE_PROVIDER_KEYS)} — declare the provider's own keys in "
                "config_model"
            )
        unknown = [e for e in self.reasoning_efforts if e not in REASONING_EFFORTS]
        if unknown:
            problems.append(f"reasoning_efforts has unknown levels {unknown}")
        if not self.needs_server and self.base_url_env:
            problems.append(
                "base_url_env is set but needs_server is False; an in-process provider has "
                "no server URL to override"
            )
        if self.reasoning_efforts and "reasoning_effort" not in self.config_keys:
            problems.append("reasoning_efforts is set but 'reasoning_effort' is not a config key")
        return problems


@dataclass(frozen=True, slots=True)
class ChannelSpec(Spec):
    """A channel adapter and the ``[fermix_channels.<name>]`` section it owns."""

    kind: ClassVar[str] = "channel"
    label: str = ""
    factory: Ref | None = None
    #: pydantic model validating ``[fermix_channels.<name>]``.
    config_model: Ref | None = None
    #: Environment overlays: env var name -> config key in the channel section.
    env: Mapping[str, str] = field(default_factory=dict)
    #: A local channel (cli, acp) authorizes by where it runs, not by sender ids.
    remote: bool = True
    enabled_by_default: bool = False
    supports_draft: bool = False
    supports_reactions: bool = False

    def problems(self) -> list[str]:
        problems = Spec.problems(self)
        _check_ref("factory", self.factory, problems)
        _check_ref("config_model", self.config_model, problems, required=False)
        return problems


@dataclass(frozen=True, slots=True)
class ToolSpec(Spec):
    """A capability the agent can call."""

    kind: ClassVar[str] = "tool"
    description: str = ""
    factory: Ref | None = None
    #: pydantic model for the tool's arguments.
    args_model: Ref | None = None
    policy: PolicyClass = PolicyClass.READ_ONLY
    owner_only: bool = False
    read_only: bool = True
    #: Deferred tools leave the provider wire and are reached through tool_search (and stay
    #: callable by name). ``None`` decides by origin: third-party tools are deferred,
    #: first-party ones inline; ``True``/``False`` decide for this tool.
    deferred: bool | None = None
    guidance: str = ""
    failure_modes: tuple[str, ...] = ()
    #: Optional ``[fermix_core.tools.<config_section>]`` owned by this tool.
    config_section: str | None = None
    config_model: Ref | None = None
    #: Deadline of one call in seconds; ``None`` takes ``[fermix_core.tools] timeout_seconds``.
    timeout_seconds: float | None = None

    def problems(self) -> list[str]:
        problems = Spec.problems(self)
        _check_ref("factory", self.factory, problems)
        _check_ref("args_model", self.args_model, problems, required=False)
        if self.timeout_seconds is not None and not (
            isinstance(self.timeout_seconds, int | float)
            and not isinstance(self.timeout_seconds, bool)
            and self.timeout_seconds > 0
        ):
            problems.append(
                f"timeout_seconds must be a number of seconds above 0, not {self.timeout_seconds!r}"
            )
        if not self.description:
            problems.append("description is required (the model reads it)")
        if not isinstance(self.policy, PolicyClass):
            problems.append(f"policy must be a PolicyClass, not {self.policy!r}")
        if self.deferred is not None and not isinstance(self.deferred, bool):
            problems.append(f"deferred must be True, False or None, not {self.deferred!r}")
        if (self.config_section is None) != (self.config_model is None):
            problems.append("config_section and config_model go together")
        return problems


@dataclass(frozen=True, slots=True)
class MemoryBackendSpec(Spec):
    """A long-term memory backend a plugin offers (``fermix_memory_backends``)."""

    kind: ClassVar[str] = "memory_backend"
    factory: Ref | None = None
    description: str = ""

    def problems(self) -> list[str]:
        problems = Spec.problems(self)
        _check_ref("factory", self.factory, problems)
        return problems


@dataclass(frozen=True, slots=True)
class TranscriptionBackendSpec(Spec):
    """A speech-to-text backend a plugin offers (``fermix_transcription_backends``)."""

    kind: ClassVar[str] = "transcription_backend"
    factory: Ref | None = None
    default_model: str | None = None
    #: Config key in ``[fermix_core.transcription]`` holding this backend's own key.
    key_field: str | None = None
    #: The backend cannot reuse a chat-provider key: ``key_field`` must be set.
    key_required: bool = False
    #: The chat provider whose API key is reused when ``key_field`` is unset.
    reuse_provider: str | None = None

    def problems(self) -> list[str]:
        problems = Spec.problems(self)
        _check_ref("factory", self.factory, problems)
        return problems


@dataclass(frozen=True, slots=True)
class WebSearchBackendSpec(Spec):
    """A web-search backend a plugin offers (``fermix_web_search_backends``)."""

    kind: ClassVar[str] = "web_search_backend"
    factory: Ref | None = None
    env_var: str | None = None
    keyless: bool = False

    def problems(self) -> list[str]:
        problems = Spec.problems(self)
        _check_ref("factory", self.factory, problems)
        return problems


@dataclass(frozen=True, slots=True)
class ImageBackendSpec(Spec):
    """An image-generation backend a plugin offers (``fermix_image_backends``)."""

    kind: ClassVar[str] = "image_backend"
    factory: Ref | None = None
    supports_edit: bool = False
    supports_mask: bool = False

    def problems(self) -> list[str]:
        problems = Spec.problems(self)
        _check_ref("factory", self.factory, problems)
        return problems


@dataclass(frozen=True, slots=True)
class CommandSpec(Spec):
    """A slash command run by the gateway before the agent sees the message."""

    kind: ClassVar[str] = "command"
    help: str = ""
    handler: Ref | None = None
    role: Role = Role.OPERATOR
    aliases: tuple[str, ...] = ()
    #: Sandbox mutations stay operator-only even when ``command_allowlist`` opens others.
    sandbox_mutation: bool = False

    def problems(self) -> list[str]:
        problems: list[str] = []
        for n in (self.name, *self.aliases):
            if not isinstance(n, str) or not COMMAND_RE.match(n):
                problems.append(f"command name {n!r} must match {COMMAND_RE.pattern}")
        _check_ref("handler", self.handler, problems)
        if not self.help:
            problems.append("help is required (it is what /help shows)")
        return problems


@dataclass(frozen=True, slots=True)
class ConfigSectionSpec(Spec):
    """A config section owned by a plugin, e.g. ``[fermix_weather]``.

    ``name`` is the dotted section path. Channels and tools declare their sections on
    their own specs; this record is for anything else a plugin wants to configure.
    """

    kind: ClassVar[str] = "config_section"
    model: Ref | None = None
    description: str = ""

    def problems(self) -> list[str]:
        problems: list[str] = []
        if not isinstance(self.name, str) or not SECTION_RE.match(self.name):
            problems.append(f"section path {self.name!r} must be dotted lowercase identifiers")
        _check_ref("model", self.model, problems)
        return problems


@dataclass(frozen=True, slots=True)
class DoctorCheckSpec(Spec):
    """One row of ``fermix doctor``.

    ``check`` is called with a :class:`fermix_core.doctor.DoctorContext` and returns one or
    more :class:`fermix_core.doctor.CheckResult`. Lower ``order`` runs first.
    """

    kind: ClassVar[str] = "doctor_check"
    label: str = ""
    check: Ref | None = None
    order: int = 500

    def problems(self) -> list[str]:
        problems = Spec.problems(self)
        _check_ref("check", self.check, problems)
        return problems


@dataclass(frozen=True, slots=True)
class SetupStepSpec(Spec):
    """One step of ``fermix setup``.

    ``run`` is called with a :class:`fermix_core.setup.SetupContext`. Steps run in
    ``order``; ``options`` lists the non-interactive flags the step reads.
    """

    kind: ClassVar[str] = "setup_step"
    label: str = ""
    run: Ref | None = None
    order: int = 500
    options: tuple[SetupOption, ...] = ()

    def problems(self) -> list[str]:
        problems = Spec.problems(self)
        _check_ref("run", self.run, problems)
        return problems


@dataclass(frozen=True, slots=True)
class SetupOption:
    """A ``--flag VALUE`` that a setup step accepts in non-interactive mode."""

    flag: str
    help: str
    secret: bool = False
    is_bool: bool = False


@dataclass(frozen=True, slots=True)
class SkillDirSpec(Spec):
    """A directory of SKILL.md packages a plugin ships.

    ``path`` is an absolute directory (typically ``str(Path(__file__).parent / "skills")``);
    every sub-directory holding a ``SKILL.md`` is one skill. Plugin skills always run at
    guest trust, whatever the caller's.
    """

    kind: ClassVar[str] = "skill_dir"
    path: str = ""
    description: str = ""

    def problems(self) -> list[str]:
        problems = Spec.problems(self)
        if not isinstance(self.path, str) or not self.path:
            problems.append("path is required (the directory holding the skill packages)")
        elif not self.path.startswith("/"):
            problems.append(f"path {self.path!r} must be absolute")
        return problems


SPEC_KINDS: dict[str, type[Spec]] = {
    cls.kind: cls
    for cls in (
        ProviderSpec,
        ChannelSpec,
        ToolSpec,
        MemoryBackendSpec,
        TranscriptionBackendSpec,
        WebSearchBackendSpec,
        ImageBackendSpec,
        CommandSpec,
        ConfigSectionSpec,
        DoctorCheckSpec,
        SetupStepSpec,
        SkillDirSpec,
    )
}
