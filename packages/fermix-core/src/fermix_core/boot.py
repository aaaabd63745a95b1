"""Assembly: from a FERMIX_HOME and an environment to loaded plugins and collected specs.

Every entry into Fermix — the daemon, the CLI, an embedding app, a test — goes through
:func:`assemble`, so the order is always the same: read config.toml as a document, take the
plugin block list from it, load plugins (core's own built-ins first, through the same hooks
third parties use), collect and validate their specs, and only then validate the whole
config against what the plugins declared.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from fermix_core import __version__
from fermix_core.plugins.discovery import LOAD_PLUGINS_ENV, PluginRecord, parse_load_filter
from fermix_core.plugins.host import PluginHost
from fermix_core.plugins.registry import SpecRegistry

if TYPE_CHECKING:  # pragma: no cover
    from fermix_core.config import ConfigError, LoadedConfig
    from fermix_core.config.document import ConfigText
    from fermix_core.home import FermixHome

BUILTIN_PLUGIN_NAME = "core.builtins"

#: The spec kinds a running runtime (daemon, ask, embedding) uses: everything but the
#: setup steps and doctor checks, which only ``fermix setup`` and ``fermix doctor`` read
#: (their specs live in modules a turn never needs). Those commands assemble everything.
RUNTIME_KINDS: frozenset[str] = frozenset(
    {
        "provider",
        "channel",
        "tool",
        "memory_backend",
        "transcription_backend",
        "web_search_backend",
        "image_backend",
        "command",
        "config_section",
        "skill_dir",
    }
)


@dataclass
class Assembly:
    """What boot put together before the config is validated: home, plugins, specs, config text."""

    home: FermixHome
    environ: Mapping[str, str]
    host: PluginHost
    registry: SpecRegistry
    #: config.toml as read (``None`` when it could not be read or parsed).
    source: ConfigText | None = None
    #: A config.toml that could not even be parsed (TOML syntax, bad plugin block list).
    document_error: ConfigError | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def document(self) -> Any:
        """The tomlkit document of config.toml (parsed on first use), or ``None``."""
        return None if self.source is None else self.source.document

    @property
    def unavailable(self) -> list[PluginRecord]:
        return self.host.unavailable()

    def load_config(self) -> LoadedConfig:
        """Validate config.toml against the collected specs; raises ``ConfigError``."""
        from fermix_core.config import load_config

        if self.document_error is not None:
            raise self.document_error
        return load_config(
            self.home,
            self.registry,
            unavailable=self.unavailable,
            environ=self.environ,
            document=self.source,
        )


def assemble(
    home: FermixHome | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    plugins: Iterable[tuple[str, Any]] = (),
    entry_points: bool = True,
    config: Mapping[str, Any] | None = None,
    kinds: Iterable[str] | None = None,
) -> Assembly:
    """Load plugins and collect their specs. Never raises for a broken plugin or config file.

    *config*, when given, is used instead of config.toml (embedding apps and tests pass
    their settings as a mapping shaped like the TOML file). *kinds* limits the specs
    collected (``None``: all; a running runtime passes :data:`RUNTIME_KINDS`).
    """
    from fermix_core import builtin_plugin
    from fermix_core.config import ConfigError, plugins_disabled
    from fermix_core.config.document import ConfigText, read_config
    from fermix_core.home import FermixHome

    env = dict(os.environ) if environ is None else dict(environ)
    home = home or FermixHome.resolve(env)

    source: ConfigText | None = None
    document_error: ConfigError | None = None
    disabled: list[str] = []
    try:
        if config is not None:
            import tomlkit

            document = tomlkit.document()
            document.update(config)
            source = ConfigText.of(document)
        else:
            source = read_config(home.config_file)
        disabled = plugins_disabled(source)
    except ConfigError as exc:
        document_error = exc

    spec_cache = None
    if entry_points:
        from fermix_core import startup

        if startup.active():  # a one-off command: first-party specs from the home's cache
            from fermix_core.plugins.spec_cache import SpecCache

            spec_cache = SpecCache.for_home(home)
    host = PluginHost(spec_cache=spec_cache)
    host.register(
        builtin_plugin, BUILTIN_PLUGIN_NAME, distribution="fermix-core", version=__version__
    )
    # Core's slash commands are a separate plugin object: pluggy allows one implementation
    # of a hook per plugin, and they register through the same hook third parties use.
    from fermix_core.commands import plugin as core_commands

    host.register(core_commands, "core.commands", distribution="fermix-core", version=__version__)
    from fermix_core.memory import plugin as core_memory

    host.register(core_memory, "core.memory", distribution="fermix-core", version=__version__)
    for name, plugin in plugins:
        host.register(plugin, name)
    if entry_points:
        from fermix_core.plugins.discovery import scan_cache, scan_entry_points

        # The scan reads every installed distribution's metadata; it is kept in
        # $FERMIX_HOME/cache while nothing installed on sys.path changes (not before the
        # home exists: read-only commands run before setup do not create it).
        found = scan_entry_points(scan_cache(home))
        host.load_entry_points(
            only=parse_load_filter(env.get(LOAD_PLUGINS_ENV)),
            disabled=disabled,
            entry_points=found,
        )
    registry = host.collect(kinds)
    return Assembly(
        home=home,
        environ=env,
        host=host,
        registry=registry,
        source=source,
        document_error=document_error,
    )
