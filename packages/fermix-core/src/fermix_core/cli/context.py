"""What every non-trivial CLI command needs: the home, the plugins and (maybe) the config."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from fermix_core.boot import Assembly
    from fermix_core.config import ConfigError, LoadedConfig


@dataclass
class CliContext:
    assembly: Assembly
    config: LoadedConfig | None = None
    config_error: ConfigError | None = None

    @property
    def home(self) -> Any:
        return self.assembly.home

    @property
    def host(self) -> Any:
        return self.assembly.host

    @property
    def registry(self) -> Any:
        return self.assembly.registry

    @property
    def unavailable(self) -> list[Any]:
        return self.assembly.unavailable

    @property
    def environ(self) -> Any:
        return self.assembly.environ


def load_for_cli(*, validate: bool = False) -> CliContext:
    """Assemble plugins; with ``validate`` also load the config, keeping any error for display."""
    from fermix_core.boot import assemble
    from fermix_core.config import ConfigError

    context = CliContext(assembly=assemble())
    if validate:
        try:
            context.config = context.assembly.load_config()
        except ConfigError as exc:
            context.config_error = exc
    return context
