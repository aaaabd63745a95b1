"""Every hook Fermix calls on its plugins. This module is the only place hooks are declared.

Plugins implement hooks with :data:`hookimpl` and expose the implementing module through an
entry point in the ``fermix`` group::

    [project.entry-points.fermix]
    "tools.weather" = "fermix_weather.plugin"

There are three families:

* **Registration hooks** (``fermix_providers`` … ``fermix_skill_dirs``) are synchronous,
  take no arguments and return an iterable of spec records from :mod:`fermix_core.specs`.
  They run once per boot and must import nothing heavy: a spec names its factory lazily.
* **Lifecycle hooks** (``fermix_cli``, ``fermix_startup``, ``fermix_shutdown``) let a plugin
  extend the CLI and take part in the daemon's start and stop.
* **Service hooks** (``fermix_resolve_secret``, ``fermix_event``) are called while the daemon
  runs.

Per-message work is never a hook: ``chat``, ``send`` and ``run`` are methods on the objects
the specs build. ``docs/plugins.md`` mirrors these docstrings and a test keeps them in step.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:  # pragma: no cover - typing only
    from fermix_core.facade import ServiceHost
    from fermix_core.secrets import SecretRequest
    from fermix_core.specs import (
        ChannelSpec,
        CommandSpec,
        ConfigSectionSpec,
        DoctorCheckSpec,
        ImageBackendSpec,
        MemoryBackendSpec,
        ProviderSpec,
        SetupStepSpec,
        SkillDirSpec,
        ToolSpec,
        TranscriptionBackendSpec,
        WebSearchBackendSpec,
    )
    from fermix_core.telemetry import TelemetryEvent

PROJECT = "fermix"

hookspec = pluggy.HookspecMarker(PROJECT)
#: Decorate a plugin function with ``@hookimpl`` to implement a hook.
hookimpl = pluggy.HookimplMarker(PROJECT)


# --------------------------------------------------------------------------- registration


@hookspec
def fermix_providers() -> Iterable[ProviderSpec]:
    """Register model providers.

    Called once per boot, before configuration is validated, so each provider's config-key
    allowlist and environment variable are known when ``[fermix_core.providers.<name>]`` is
    checked. Return (or yield) :class:`~fermix_core.specs.ProviderSpec` records; the
    ``factory`` builds the adapter only when a route uses it.

    Example::

        @hookimpl
        def fermix_providers():
            yield ProviderSpec(
                name="acme",
                label="Acme AI",
                factory="fermix_acme.adapter:AcmeProvider",
                env_var="ACME_API_KEY",
                default_model="acme-large",
                models=(ModelInfo(id="acme-large", context_window=128_000),),
            )
    """


@hookspec
def fermix_channels() -> Iterable[ChannelSpec]:
    """Register channel adapters.

    Called once per boot. Each :class:`~fermix_core.specs.ChannelSpec` owns the
    ``[fermix_channels.<name>]`` config section through ``config_model`` and may map
    environment variables onto its keys through ``env``.

    Example::

        @hookimpl
        def fermix_channels():
            yield ChannelSpec(
                name="matrix",
                label="Matrix",
                factory="fermix_matrix.adapter:MatrixChannel",
                config_model="fermix_matrix.config:MatrixConfig",
                env={"MATRIX_ACCESS_TOKEN": "access_token"},
            )
    """


@hookspec
def fermix_tools() -> Iterable[ToolSpec]:
    """Register capabilities (tools) the agent can call.

    Called once per boot. Each :class:`~fermix_core.specs.ToolSpec` declares its policy
    class, ``owner_only`` and ``read_only`` flags, from which the operator and guest
    surfaces are derived. Tools from third-party distributions are deferred by default
    (reached through ``tool_search``) unless the spec sets ``deferred=False``; a deferred
    tool is still callable by name.

    Example::

        @hookimpl
        def fermix_tools():
            yield ToolSpec(
                name="weather_now",
                description="Current weather for a city.",
                factory="fermix_weather.tool:WeatherNow",
                args_model="fermix_weather.tool:WeatherArgs",
                policy=PolicyClass.NETWORK,
            )
    """


@hookspec
def fermix_memory_backends() -> Iterable[MemoryBackendSpec]:
    """Register long-term memory backends.

    Called once per boot. The backend named by ``[fermix_core.memory] backend`` is built
    from its spec's ``factory``; the default SQLite backend shares ``memory.db``.

    Example::

        @hookimpl
        def fermix_memory_backends():
            yield MemoryBackendSpec(name="qdrant", factory="fermix_qdrant.backend:QdrantMemory")
    """


@hookspec
def fermix_transcription_backends() -> Iterable[TranscriptionBackendSpec]:
    """Register speech-to-text backends used for inbound audio.

    Called once per boot. ``[fermix_core.transcription] backend`` selects one by name. On
    the first audio message the selected spec's ``factory`` is called as
    ``factory(settings)`` with a :class:`fermix_core.transcription.BackendSettings` (the
    runtime's httpx client, the resolved key, model and base URL) and returns an object with
    ``name`` and ``async transcribe(clip: AudioClip) -> str`` that raises
    ``TranscriptionFailed`` on failure (see ``fermix_core.transcription.contract``).

    Example::

        @hookimpl
        def fermix_transcription_backends():
            yield TranscriptionBackendSpec(
                name="whisper_local",
                factory="fermix_whisper.backend:LocalWhisper",
                default_model="base.en",
            )
    """


@hookspec
def fermix_web_search_backends() -> Iterable[WebSearchBackendSpec]:
    """Register ``web_search`` backends.

    Called once per boot. ``[fermix_core.tools.web_search] backend`` selects one by name;
    a configured backend that hard-errors degrades once to the keyless default.

    Example::

        @hookimpl
        def fermix_web_search_backends():
            yield WebSearchBackendSpec(
                name="searx",
                factory="fermix_searx.backend:SearxSearch",
                keyless=True,
            )
    """


@hookspec
def fermix_image_backends() -> Iterable[ImageBackendSpec]:
    """Register ``generate_image`` backends.

    Called once per boot. ``[fermix_core.tools.generate_image] backend`` selects one;
    ``supports_edit``/``supports_mask`` gate the operations the tool accepts.

    Example::

        @hookimpl
        def fermix_image_backends():
            yield ImageBackendSpec(
                name="stability",
                factory="fermix_stability.backend:StabilityImages",
                supports_edit=True,
            )
    """


@hookspec
def fermix_commands() -> Iterable[CommandSpec]:
    """Register slash commands that the gateway runs before the agent.

    Called once per boot. Core's own commands (``/help``, ``/stop`` …) are registered
    through this same hook. ``role`` gates who may run the command.

    Example::

        @hookimpl
        def fermix_commands():
            yield CommandSpec(
                name="ping",
                help="Answer pong without calling the model.",
                handler="fermix_ping.commands:ping",
                role=Role.ANY,
            )
    """


@hookspec
def fermix_config_sections() -> Iterable[ConfigSectionSpec]:
    """Register config sections a plugin owns outside channels and tools.

    Called once per boot, before ``config.toml`` is validated. A section no plugin claims
    fails config load; a section whose plugin failed to load is kept untouched and reported
    by ``fermix doctor``.

    Example::

        @hookimpl
        def fermix_config_sections():
            yield ConfigSectionSpec(
                name="fermix_weather",
                model="fermix_weather.config:WeatherConfig",
                description="Units and default city for the weather tools.",
            )
    """


@hookspec
def fermix_doctor_checks() -> Iterable[DoctorCheckSpec]:
    """Register rows of ``fermix doctor``.

    Called when ``fermix doctor`` runs. Each check callable receives a
    :class:`~fermix_core.doctor.DoctorContext` and returns a
    :class:`~fermix_core.doctor.CheckResult` (or a list of them).

    Example::

        @hookimpl
        def fermix_doctor_checks():
            yield DoctorCheckSpec(
                name="weather_api",
                label="Weather API key",
                check="fermix_weather.doctor:check_key",
            )
    """


@hookspec
def fermix_setup_steps() -> Iterable[SetupStepSpec]:
    """Register steps of ``fermix setup``.

    Called when ``fermix setup`` runs. Each step's ``run`` callable receives a
    :class:`~fermix_core.setup.SetupContext` that knows whether the run is interactive and
    holds the flag values the step declared in ``options``.

    Example::

        @hookimpl
        def fermix_setup_steps():
            yield SetupStepSpec(
                name="weather",
                label="Weather",
                run="fermix_weather.setup:run",
                options=(SetupOption(flag="--weather-city", help="Default city"),),
            )
    """


@hookspec
def fermix_skill_dirs() -> Iterable[SkillDirSpec]:
    """Register directories of SKILL.md skill packages that a plugin ships.

    Called once per boot, and read again by ``skill_reload``. Each sub-directory of
    ``path`` holding a ``SKILL.md`` is one skill. Plugin skills run at guest trust whatever
    the caller's trust; a malformed or colliding skill is skipped and reported, never fatal.

    Example::

        @hookimpl
        def fermix_skill_dirs():
            yield SkillDirSpec(
                name="weather",
                path=str(Path(__file__).parent / "skills"),
            )
    """


# --------------------------------------------------------------------------- lifecycle


@hookspec
def fermix_cli(app: Any) -> None:
    """Add commands to the ``fermix`` CLI.

    Called when the CLI is assembled for a command that is not built in (so ``fermix
    --help`` stays fast). *app* is a :class:`typer.Typer`; add a command or a sub-app to it.

    Example::

        @hookimpl
        def fermix_cli(app):
            weather = typer.Typer(help="Weather plugin commands.")

            @weather.command()
            def now(city: str):
                print(lookup(city))

            app.add_typer(weather, name="weather")
    """


@hookspec
def fermix_startup(runtime: ServiceHost) -> Any:
    """Take part in daemon start-up. May be ``async``.

    Called once the service is running (the gateway accepts messages) and before channels
    start. *runtime* is the :class:`fermix_core.facade.ServiceHost`, the runtime facade:
    ``ingest`` and ``reply_port`` to feed the gateway, ``config``, ``home``, ``state``,
    ``emit`` for telemetry, ``secrets`` and a supervised ``task_group`` for background
    work. An exception is logged and reported; it does not stop other plugins from
    starting.

    Example::

        @hookimpl
        async def fermix_startup(runtime):
            runtime.state["weather_cache"] = await open_cache(runtime.home.path)
            runtime.task_group.start_soon(watch_alerts, runtime)
    """


@hookspec
def fermix_shutdown(runtime: ServiceHost) -> Any:
    """Release what ``fermix_startup`` acquired. May be ``async``.

    Called once while the daemon stops, after channels stopped, in reverse registration
    order, with the same facade; the plugins' background tasks are cancelled after every
    shutdown hook ran. Exceptions are logged and never stop the shutdown of other plugins.

    Example::

        @hookimpl
        async def fermix_shutdown(runtime):
            await runtime.state.pop("weather_cache").close()
    """


# --------------------------------------------------------------------------- service


@hookspec(firstresult=True)
def fermix_resolve_secret(request: SecretRequest) -> str | None:
    """Resolve a secret from an external store; the first non-``None`` result wins.

    Called whenever a config secret is read and the environment did not override it.
    *request* carries ``env`` (e.g. ``"OPENAI_API_KEY"``), the config ``path`` and the
    stored ``value`` (``"@keyring"``, plaintext or ``None``). Return the secret, or ``None``
    to let the next resolver (and finally the built-in one) try.

    Example::

        @hookimpl
        def fermix_resolve_secret(request):
            if request.env == "ACME_API_KEY":
                return vault.read("acme/api-key")
            return None
    """


@hookspec
def fermix_event(event: TelemetryEvent) -> None:
    """Observe a telemetry event (``provider.failover``, ``command.dispatch`` …).

    Called synchronously for every event emitted; keep it cheap and never raise — an
    exception is logged and swallowed so telemetry can never take down a turn.

    Example::

        @hookimpl
        def fermix_event(event):
            if event.name == "provider.failover":
                metrics.incr("failover", tags=event.data)
    """


#: Registration hook name -> spec kind it yields.
REGISTRATION_HOOKS: dict[str, str] = {
    "fermix_providers": "provider",
    "fermix_channels": "channel",
    "fermix_tools": "tool",
    "fermix_memory_backends": "memory_backend",
    "fermix_transcription_backends": "transcription_backend",
    "fermix_web_search_backends": "web_search_backend",
    "fermix_image_backends": "image_backend",
    "fermix_commands": "command",
    "fermix_config_sections": "config_section",
    "fermix_doctor_checks": "doctor_check",
    "fermix_setup_steps": "setup_step",
    "fermix_skill_dirs": "skill_dir",
}
