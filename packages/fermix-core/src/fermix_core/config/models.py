"""The core sections of ``config.toml`` as pydantic models.

Every model forbids unknown keys: a misspelt key that is silently dropped is a setting the
operator believes is on and is not. Checks that need the plugin registry (is this provider
known, does it accept this key) live in :mod:`fermix_core.config.schema`; what can be
decided from the value alone lives here. ``docs/config.md`` documents every field and a
test keeps the two in step.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, model_validator

from fermix_core.config.secret import Secret

ReasoningEffort = Literal["none", "low", "medium", "high", "xhigh", "max"]
AuthMode = Literal["api_key", "oauth"]
Wire = Literal["responses", "chat_completions"]
SandboxMode = Literal["strict", "standard", "open"]
CommandProfile = Literal["bare", "assistant", "extended"]
HarnessVendor = Literal["codex", "claude_code"]

#: Backends core knows by name; plugins add more through the backend registration hooks.
BUILTIN_WEB_SEARCH_BACKENDS: tuple[str, ...] = ("duckduckgo",)
BUILTIN_IMAGE_BACKENDS: tuple[str, ...] = ("openai", "xai", "google", "openai_codex")
BUILTIN_TRANSCRIPTION_BACKENDS: tuple[str, ...] = ("openai", "xai", "deepgram")
BUILTIN_MEMORY_BACKENDS: tuple[str, ...] = ("sqlite",)
OAUTH_PROVIDERS: tuple[str, ...] = ("google", "github", "notion", "x", "slack")

_PROFILE_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_ENV_PATTERN_RE = re.compile(r"^[A-Za-z_*?][A-Za-z0-9_*?]*$")
_ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
SERVER_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]*$")


# --------------------------------------------------------------------------- value checks


def _timezone(value: str) -> str:
    try:
        ZoneInfo(value)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(
            f'unknown timezone "{value}"; use an IANA name such as "America/New_York" or '
            '"Europe/Berlin"'
        ) from None
    return value


def _http_url(value: str) -> str:
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 - raises ValueError on a malformed port
    except ValueError:
        parts = None
    if (
        parts is None
        or parts.scheme not in ("http", "https")
        or not parts.hostname
        or any(ch.isspace() for ch in value)
    ):
        raise ValueError(
            f'must be an http:// or https:// URL like "http://localhost:11434/v1" (got "{value}")'
        )
    return value


def _profile(value: str) -> str:
    if not _PROFILE_RE.match(value):
        raise ValueError(
            f'"{value}" is not a profile name: use letters, digits, "_", "-" or "." '
            "(it becomes part of the keyring service name)"
        )
    return value


def _abs_path(value: Any) -> Any:
    if isinstance(value, str):
        if not value.strip():
            raise ValueError("must be a path, not an empty string")
        path = Path(value).expanduser()
        if not path.is_absolute():
            raise ValueError(f'must be an absolute path or start with "~" (got "{value}")')
        return path
    return value


def _env_pattern(value: str) -> str:
    if not _ENV_PATTERN_RE.match(value):
        raise ValueError(f'"{value}" is not an environment variable name or glob like "AWS_*"')
    return value


def _nonempty(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be empty")
    return value


def _env_names(value: dict[str, str]) -> dict[str, str]:
    bad = [k for k in value if not _ENV_NAME_RE.match(k)]
    if bad:
        names = ", ".join(f'"{k}"' for k in bad)
        raise ValueError(f"has keys that are not environment variable names: {names}")
    return value


HttpUrl = Annotated[str, AfterValidator(_http_url)]
AbsPath = Annotated[Path, BeforeValidator(_abs_path)]
EnvPattern = Annotated[str, AfterValidator(_env_pattern)]
NonEmpty = Annotated[str, AfterValidator(_nonempty)]


class Section(BaseModel):
    """Base of every core config model.

    Unknown keys are errors, never silently dropped, and values are not coerced across
    types (``primary = "yes"`` is an error, not ``true``): TOML has real booleans and
    numbers, so a quoted one is a mistake worth pointing at.
    """

    model_config = ConfigDict(extra="forbid", strict=True, defer_build=True)


# --------------------------------------------------------------------------- [fermix_core.*]


class AgentConfig(Section):
    """``[fermix_core.agent]``: who the assistant is and who it talks to."""

    #: Reconciled into IDENTITY.md on boot; a blank name leaves IDENTITY.md alone.
    name: str | None = "fermix"
    timezone: Annotated[str, AfterValidator(_timezone)] = "America/New_York"
    user_name: str | None = None
    communication_style: str | None = None
    #: Legacy migration input, read only when no provider has ``primary = true``.
    provider: str | None = None


class ProviderConfig(Section):
    """``[fermix_core.providers.<name>]``; each provider accepts a subset of these keys.

    The subset is the provider's ``ProviderSpec.config_keys``, enforced by the schema layer,
    so one model serves every provider without a key meaning different things per block.
    """

    primary: bool = False
    default_model: NonEmpty | None = None
    base_url: HttpUrl | None = None
    api_key: Secret | None = None
    reasoning_effort: ReasoningEffort | None = None
    auth_mode: AuthMode | None = None
    fast: bool = False
    wire: Wire | None = None
    #: Models of this provider that read images although the built-in catalog does not
    #: say so (a local vision model, a new release): images are sent to them.
    vision_models: list[NonEmpty] = Field(default_factory=list)


class WebSearchConfig(Section):
    """``[fermix_core.tools.web_search]``; a failing keyed backend degrades to DuckDuckGo."""

    backend: NonEmpty = "duckduckgo"
    api_key: Secret | None = None
    max_results: int = Field(default=5, ge=1, le=20)


class ToolSearchConfig(Section):
    """``[fermix_core.tools.tool_search]``: deferral of plugin/MCP tool schemas."""

    #: Absent means on; ``false`` is the kill switch that puts every schema inline.
    enabled: bool | None = None

    @property
    def is_enabled(self) -> bool:
        return self.enabled is not False


class GenerateImageConfig(Section):
    """``[fermix_core.tools.generate_image]``."""

    backend: NonEmpty = "openai"
    model: NonEmpty | None = None
    size: NonEmpty | None = None
    google_api_key: Secret | None = None
    #: The GPT-5.x model that carries the image tool on the ``openai_codex`` backend.
    router_model: NonEmpty | None = None


DEFAULT_MAX_RESULT_CHARS = 100_000
DEFAULT_TOOL_TIMEOUT_S = 300.0


class ToolsConfig(Section):
    """``[fermix_core.tools]``; plugin tools add their own ``[fermix_core.tools.<x>]``."""

    #: Longest tool result (in characters of text) the model receives; the rest is cut and
    #: replaced by a marker saying how much was cut.
    max_result_chars: int = Field(default=DEFAULT_MAX_RESULT_CHARS, ge=1_000, le=10_000_000)
    #: Deadline of one tool call in seconds; ``ToolSpec.timeout_seconds`` overrides it.
    timeout_seconds: float = Field(default=DEFAULT_TOOL_TIMEOUT_S, gt=0, le=24 * 3600)
    web_search: WebSearchConfig = Field(default_factory=WebSearchConfig)
    tool_search: ToolSearchConfig = Field(default_factory=ToolSearchConfig)
    generate_image: GenerateImageConfig = Field(default_factory=GenerateImageConfig)


class TranscriptionConfig(Section):
    """``[fermix_core.transcription]``: speech-to-text for inbound audio."""

    backend: NonEmpty = "openai"
    #: One shared key; setup snaps it to the chosen backend's default on a backend switch.
    model: NonEmpty | None = None
    max_file_mb: int = Field(default=20, gt=0)
    #: The selected backend's API base URL (a proxy, a test server); unset: the service's.
    base_url: HttpUrl | None = None
    openai_api_key: Secret | None = None
    xai_api_key: Secret | None = None
    deepgram_api_key: Secret | None = None


class CompactionConfig(Section):
    """``[fermix_core.compaction]``: summarise old turns when context use reaches threshold."""

    enabled: bool = True
    threshold: float = Field(default=0.85, gt=0, le=1)


class JobsConfig(Section):
    """``[fermix_core.jobs]``."""

    #: A missed recurring fire older than this is skipped, not run late at the wrong time.
    run_freshness_window_seconds: int = Field(default=3600, gt=0)
    network_readiness_enabled: bool = True


class MemoryConfig(Section):
    """``[fermix_core.memory]``."""

    backend: NonEmpty = "sqlite"
    review_enabled: bool = True
    review_interval_hours: int = Field(default=24, gt=0)


class RealtimeConfig(Section):
    """``[fermix_core.realtime]``: the local voice companion (off by default)."""

    enabled: bool = False
    screen_share: bool = True


class ComputerUseConfig(Section):
    """``[fermix_core.computer_use]`` (experimental, off by default)."""

    enabled: bool = False


class PluginsConfig(Section):
    """``[fermix_core.plugins]``: plugins (entry-point or distribution names) not to load."""

    disabled: list[NonEmpty] = Field(default_factory=list)


class RoutingConfig(Section):
    """``[fermix_core.routing]``: smaller models for sub-agents and scheduled jobs."""

    subagent_model: NonEmpty | None = None
    subagent_provider: NonEmpty | None = None
    subagent_reasoning_effort: ReasoningEffort | None = None
    cron_model: NonEmpty | None = None
    cron_provider: NonEmpty | None = None
    cron_reasoning_effort: ReasoningEffort | None = None


class HarnessConfig(Section):
    """``[fermix_core.harness]``: delegating repo work to Codex / Claude Code CLIs."""

    enabled: bool = True
    #: First-use consent; until true no harness tool is offered at all.
    approved: bool = False
    default_vendor: HarnessVendor | None = None
    cloud_enabled: bool = False


class OAuthClient(Section):
    """``[fermix_core.oauth.<provider>]``: an OAuth client registered by the operator."""

    client_id: NonEmpty | None = None
    client_secret: Secret | None = None


class OAuthConfig(Section):
    """``[fermix_core.oauth]``: OAuth clients for the bundled integrations."""

    google: OAuthClient | None = None
    github: OAuthClient | None = None
    notion: OAuthClient | None = None
    x: OAuthClient | None = None
    slack: OAuthClient | None = None


class CoreConfig(Section):
    """``[fermix_core]``."""

    #: Keyring namespace, so two installs on one host keep separate secrets.
    profile: Annotated[str, AfterValidator(_profile)] = "general"
    agent: AgentConfig = Field(default_factory=AgentConfig)
    providers: dict[str, ProviderConfig] = Field(default_factory=dict)
    tools: ToolsConfig = Field(default_factory=ToolsConfig)
    transcription: TranscriptionConfig = Field(default_factory=TranscriptionConfig)
    compaction: CompactionConfig = Field(default_factory=CompactionConfig)
    jobs: JobsConfig = Field(default_factory=JobsConfig)
    memory: MemoryConfig = Field(default_factory=MemoryConfig)
    realtime: RealtimeConfig = Field(default_factory=RealtimeConfig)
    computer_use: ComputerUseConfig = Field(default_factory=ComputerUseConfig)
    plugins: PluginsConfig = Field(default_factory=PluginsConfig)
    routing: RoutingConfig = Field(default_factory=RoutingConfig)
    harness: HarnessConfig = Field(default_factory=HarnessConfig)
    oauth: OAuthConfig = Field(default_factory=OAuthConfig)
    #: Plugin name -> its API-key credential (normally ``"@keyring"``).
    plugin_secrets: dict[NonEmpty, Secret] = Field(default_factory=dict)

    def primary_provider(self) -> str | None:
        """The provider flagged primary, else the legacy ``[fermix_core.agent] provider``."""
        flagged = [name for name, p in self.providers.items() if p.primary]
        if flagged:
            return flagged[0]
        return self.agent.provider


# --------------------------------------------------------------------------- [sandbox]


class SandboxEnv(Section):
    """``[sandbox.env]``: what of the host environment a child process sees."""

    allow: list[EnvPattern] = Field(default_factory=list)
    deny: list[EnvPattern] = Field(default_factory=list)
    set: Annotated[dict[str, str], AfterValidator(_env_names)] = Field(default_factory=dict)


def _command_name(value: str) -> str:
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.+-]{0,63}", value):
        raise ValueError(
            f"{value!r} is not a program name (letters, digits, '.', '_', '+', '-'; no paths)"
        )
    return value


class SandboxConfig(Section):
    """``[sandbox]``: which paths and commands the filesystem/exec tools may touch."""

    mode: SandboxMode = "standard"
    #: ``None`` here means ``$FERMIX_HOME/workspace``; the loader fills it in.
    workspace_root: AbsPath | None = None
    allowed_roots: list[AbsPath] = Field(default_factory=list)
    command_profile: CommandProfile = "assistant"
    #: Local programs offered to the agent as tools of their own (``cmd_<name>``), e.g.
    #: ``["jq", "pandoc"]``; each must be one the command profile allows.
    expose_commands: list[Annotated[str, AfterValidator(_command_name)]] = Field(
        default_factory=list
    )
    env: SandboxEnv = Field(default_factory=SandboxEnv)
    #: Run every child inside bubblewrap/sandbox-exec: ``auto`` (fall back to screening
    #: with a warning), ``required`` (refuse to run without it) or ``off``.
    confinement: Literal["auto", "required", "off"] = "auto"
    #: Network inside confined children; unset means only the ``extended`` profile has it.
    network: bool | None = None


# --------------------------------------------------------------------------- [mcp]


def _one_or_list(value: Any) -> Any:
    """``command = "npx"`` is shorthand for ``command = ["npx"]``."""
    return [value] if isinstance(value, str) else value


class McpToolFilter(Section):
    """``[mcp.servers.<name>.tools]``: which of a server's tools register (by MCP name)."""

    #: Shell-style patterns (``fnmatch``); empty means every tool the server lists.
    allow: list[NonEmpty] = Field(default_factory=list)
    #: Patterns removed after ``allow``; a tool matching both stays out.
    deny: list[NonEmpty] = Field(default_factory=list)


class McpServer(Section):
    """``[mcp.servers.<name>]``: a local (``command``) or remote (``url``) MCP server."""

    #: The program (a string) or program and arguments (a list); stdio transport.
    command: Annotated[list[NonEmpty], BeforeValidator(_one_or_list)] | None = Field(
        default=None, min_length=1
    )
    #: Arguments appended after ``command``.
    args: list[str] = Field(default_factory=list)
    #: Working directory of a command server; unset means the sandbox workspace.
    cwd: AbsPath | None = None
    #: A Streamable HTTP server's endpoint.
    url: HttpUrl | None = None
    env: Annotated[dict[str, str], AfterValidator(_env_names)] = Field(default_factory=dict)
    enabled: bool = True
    #: HTTP headers of a url server; values are secrets (``"@keyring"``, env/command forms).
    headers: dict[str, Secret] = Field(default_factory=dict)
    #: Bound on one tool call (and on the start-up handshake); a hang becomes a tool error.
    timeout_seconds: float = Field(default=60.0, gt=0, le=3600)
    tools: McpToolFilter = Field(default_factory=McpToolFilter)

    @model_validator(mode="after")
    def _one_transport(self) -> McpServer:
        if (self.command is None) == (self.url is None):
            raise ValueError(
                'set exactly one of command = ["program", "arg"] or url = "https://..."'
            )
        if self.url is not None and self.env:
            raise ValueError("env applies only to a command server; a url server gets headers")
        if self.url is not None and (self.args or self.cwd is not None):
            raise ValueError("args and cwd apply only to a command server")
        if self.command is not None and self.headers:
            raise ValueError("headers apply only to a url server; a command server gets env")
        return self

    @property
    def argv(self) -> list[str]:
        """Program and arguments of a command server (``[]`` for a url server)."""
        if self.command is None:
            return []
        return [*self.command, *self.args]


class McpConfig(Section):
    """``[mcp]``: outbound MCP servers whose tools register as ``mcp_<server>_<tool>``."""

    #: Names are checked by the schema layer so each bad name is its own problem.
    servers: dict[str, McpServer] = Field(default_factory=dict)


class WebConfig(Section):
    """``[fermix_web]``: the daemon's HTTP ingress (health and the channels' webhooks).

    The bind address is deliberately not a key: it comes from ``FERMIX_HTTP_BIND`` (default
    ``127.0.0.1``), so exposing the port takes a conscious step where the daemon is started.
    """

    #: TCP port; 0 picks a free one (``fermix status`` shows which).
    port: int = Field(default=4030, ge=0, le=65535)
    #: Largest request body accepted on any webhook route; larger ones get 413 unread.
    max_body_bytes: int = Field(default=1_048_576, gt=0)


# --------------------------------------------------------------------------- root


class FermixConfig(Section):
    """The whole validated file (core part). Plugin sections live in ``LoadedConfig.sections``.

    ``fermix_channels`` holds each channel's validated section model (or, for a channel
    whose plugin is unavailable, the untouched table) after loading.
    """

    fermix_core: CoreConfig = Field(default_factory=CoreConfig)
    sandbox: SandboxConfig = Field(default_factory=SandboxConfig)
    mcp: McpConfig = Field(default_factory=McpConfig)
    fermix_channels: dict[str, Any] = Field(default_factory=dict)
    fermix_web: WebConfig = Field(default_factory=WebConfig)


#: Top-level keys the core model owns.
CORE_TOP_LEVEL: tuple[str, ...] = (
    "fermix_core",
    "sandbox",
    "mcp",
    "fermix_channels",
    "fermix_web",
)

#: The core models whose every field ``docs/config.md`` must document, by section path.
DOCUMENTED_MODELS: dict[str, type[BaseModel]] = {
    "fermix_core": CoreConfig,
    "fermix_core.agent": AgentConfig,
    "fermix_core.providers.<name>": ProviderConfig,
    "fermix_core.tools.web_search": WebSearchConfig,
    "fermix_core.tools.tool_search": ToolSearchConfig,
    "fermix_core.tools.generate_image": GenerateImageConfig,
    "fermix_core.transcription": TranscriptionConfig,
    "fermix_core.compaction": CompactionConfig,
    "fermix_core.jobs": JobsConfig,
    "fermix_core.memory": MemoryConfig,
    "fermix_core.realtime": RealtimeConfig,
    "fermix_core.computer_use": ComputerUseConfig,
    "fermix_core.plugins": PluginsConfig,
    "fermix_web": WebConfig,
    "fermix_core.routing": RoutingConfig,
    "fermix_core.harness": HarnessConfig,
    "fermix_core.oauth.<provider>": OAuthClient,
    "sandbox": SandboxConfig,
    "sandbox.env": SandboxEnv,
    "mcp.servers.<name>": McpServer,
    "mcp.servers.<name>.tools": McpToolFilter,
}
