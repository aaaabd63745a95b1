"""The table of built-in commands: the single source for lazy loading and for fast help.

Adding a command group is one new module plus one row here. The row's ``target`` names a
:class:`typer.Typer` that is imported only when that command runs (or its own ``--help`` is
asked for). ``fermix --help`` is rendered from this table without importing typer at all,
which keeps it within a few interpreter start-ups of ``python -c pass``.
"""

from __future__ import annotations

import sys

PROG = "fermix"
SUMMARY = "Fermix — a personal AI agent daemon."


class CommandEntry:
    """One built-in command. A plain class: dataclasses would import ``inspect`` here."""

    __slots__ = ("help", "name", "target")

    def __init__(self, name: str, help: str, target: str) -> None:
        self.name = name
        self.help = help
        #: ``"module:attr"`` of the typer app implementing the command.
        self.target = target

    def __repr__(self) -> str:
        return f"CommandEntry({self.name!r}, target={self.target!r})"


COMMANDS: tuple[CommandEntry, ...] = (
    CommandEntry(
        "ask", "Ask Fermix one thing and print the reply.", "fermix_core.cli.ask_cmd:ask_app"
    ),
    CommandEntry(
        "chat",
        "Chat with Fermix in the terminal (history per session).",
        "fermix_core.cli.ask_cmd:chat_app",
    ),
    CommandEntry(
        "run",
        "Run the daemon in the foreground (Ctrl-C stops it).",
        "fermix_core.cli.daemon_cmd:run_app",
    ),
    CommandEntry(
        "start", "Start the daemon in the background.", "fermix_core.cli.daemon_cmd:start_app"
    ),
    CommandEntry("stop", "Stop the running daemon.", "fermix_core.cli.daemon_cmd:stop_app"),
    CommandEntry(
        "restart",
        "Restart the daemon (applies config and upgrades).",
        "fermix_core.cli.daemon_cmd:restart_app",
    ),
    CommandEntry(
        "status",
        "Show whether the daemon runs, its version and providers.",
        "fermix_core.cli.daemon_cmd:status_app",
    ),
    CommandEntry(
        "health",
        "Ask the running daemon whether it is healthy.",
        "fermix_core.cli.daemon_cmd:health_app",
    ),
    CommandEntry(
        "logs", "Show the daemon log (-f to follow).", "fermix_core.cli.daemon_cmd:logs_app"
    ),
    CommandEntry(
        "acp",
        "Serve the Agent Client Protocol on stdin/stdout (editors launch this).",
        "fermix_core.cli.acp_cmd:acp_app",
    ),
    CommandEntry(
        "capabilities",
        "List the agent's tools and who can use them.",
        "fermix_core.cli.capabilities_cmd:app",
    ),
    CommandEntry(
        "providers",
        "List model providers and how turns are routed.",
        "fermix_core.cli.providers_cmd:app",
    ),
    CommandEntry(
        "grant",
        "Grant the agent a folder (fermix grant path PATH).",
        "fermix_core.cli.sandbox_cmd:grant_app",
    ),
    CommandEntry(
        "revoke",
        "Take a granted folder back (fermix revoke path PATH).",
        "fermix_core.cli.sandbox_cmd:revoke_app",
    ),
    CommandEntry(
        "sandbox",
        "Show the sandbox: mode, roots, protected paths, commands and environment.",
        "fermix_core.cli.sandbox_cmd:sandbox_app",
    ),
    CommandEntry(
        "memory",
        "Review, restore and search long-term memory.",
        "fermix_core.cli.memory_cmd:app",
    ),
    CommandEntry(
        "jobs",
        "List, inspect, add and control scheduled jobs.",
        "fermix_core.cli.jobs_cmd:app",
    ),
    CommandEntry(
        "skills",
        "List, view and reload skills (SKILL.md packages).",
        "fermix_core.cli.skills_cmd:app",
    ),
    CommandEntry(
        "mcp",
        "List the MCP servers, their tools, and restart one (through the daemon).",
        "fermix_core.cli.mcp_cmd:app",
    ),
    CommandEntry(
        "setup",
        "Configure Fermix step by step (or non-interactively with flags).",
        "fermix_core.cli.setup_cmd:app",
    ),
    CommandEntry(
        "doctor",
        "Check configuration, plugins, permissions, keyring and secrets.",
        "fermix_core.cli.doctor_cmd:app",
    ),
    CommandEntry(
        "config", "Show, read, change and validate config.toml.", "fermix_core.cli.config_cmd:app"
    ),
    CommandEntry(
        "plugins",
        "List installed plugins and what they register.",
        "fermix_core.cli.plugins_cmd:app",
    ),
)

BY_NAME: dict[str, CommandEntry] = {entry.name: entry for entry in COMMANDS}


class PluginCommandEntry:
    """A command a first-party plugin adds through ``fermix_cli``, listed in the fast help.

    Plugin commands exist only once plugins are loaded, which the fast help never does.
    The first-party ones are known in advance, so they are listed here with the top-level
    package of the distribution that adds them, and shown when that package is installed
    (found on ``sys.path``, not imported). ``tests/test_first_party_commands.py`` keeps this
    table equal to what those plugins register. Third-party commands are in ``fermix
    plugins list``.
    """

    __slots__ = ("help", "name", "package")

    def __init__(self, name: str, help: str, package: str) -> None:
        self.name = name
        self.help = help
        self.package = package

    def __repr__(self) -> str:
        return f"PluginCommandEntry({self.name!r}, package={self.package!r})"


FIRST_PARTY_PLUGIN_COMMANDS: tuple[PluginCommandEntry, ...] = (
    PluginCommandEntry(
        "auth",
        "Sign in to subscription providers (ChatGPT/Codex, Claude, Grok).",
        "fermix_providers",
    ),
)


def installed_plugin_commands() -> list[PluginCommandEntry]:
    """The first-party plugin commands whose distribution is installed."""
    return [entry for entry in FIRST_PARTY_PLUGIN_COMMANDS if _findable(entry.package)]


def _findable(package: str) -> bool:
    """Whether top-level *package* can be imported, asking the import system's finders
    directly (what ``importlib.util.find_spec`` does; importing that module costs more than
    this whole help screen should)."""
    if package in sys.modules:
        return True
    for finder in sys.meta_path:
        find_spec = getattr(finder, "find_spec", None)
        try:
            if find_spec is not None and find_spec(package, None) is not None:
                return True
        except (ImportError, ValueError):
            continue
    return False


def render_help() -> str:
    """Top-level help, identical in content to what the typer app would list."""
    rows = [*COMMANDS, *installed_plugin_commands()]
    width = max(len(entry.name) for entry in rows)
    lines = [
        f"Usage: {PROG} [OPTIONS] COMMAND [ARGS]...",
        "",
        f"  {SUMMARY}",
        "",
        "Options:",
        "  -V, --version  Show the version and exit.",
        "  -h, --help     Show this message and exit.",
        "",
        "Commands:",
    ]
    lines += [f"  {entry.name.ljust(width)}  {entry.help}" for entry in rows]
    lines += [
        "",
        f"Run '{PROG} COMMAND --help' for a command's options.",
        f"Other plugins can add commands; '{PROG} plugins list' shows what is installed.",
    ]
    return "\n".join(lines)
