"""Logging for CLI commands, without the CLI framework (the ``ask`` fast path uses it)."""

from __future__ import annotations

#: Commands whose stderr is a log console: the foreground daemon shows warnings as they
#: happen. Every other command prints its own messages, so log records go to the file only
#: (crash reports, logged as CRITICAL, still reach stderr).
LOG_CONSOLE_COMMANDS = frozenset({"run"})


def configure_logging(command: str | None = None) -> None:
    """Redacted logs for a CLI command: the file once FERMIX_HOME exists; stderr only for
    crash reports, or for warnings too when *command* is in :data:`LOG_CONSOLE_COMMANDS`.

    The file keeps INFO for later diagnosis. Nothing here creates FERMIX_HOME: read-only
    commands must not.
    """
    from fermix_core.home import FermixHome
    from fermix_core.logs import setup_logging

    home = FermixHome.resolve()
    console_level = "WARNING" if command in LOG_CONSOLE_COMMANDS else "CRITICAL"
    setup_logging(home, level="INFO", console_level=console_level, file=home.path.is_dir())
