"""``fermix --help`` lists the commands first-party plugins add (``fermix auth``), without
loading plugins; this keeps that static list equal to what the plugins really register."""

from __future__ import annotations

import subprocess
import sys

import typer
from fermix_core.cli.app import APP_SETTINGS
from fermix_core.cli.commands import FIRST_PARTY_PLUGIN_COMMANDS, installed_plugin_commands
from fermix_core.plugins.discovery import FIRST_PARTY
from fermix_core.plugins.host import PluginHost


def _first_party_cli_commands() -> dict[str, str]:
    host = PluginHost()
    host.load_entry_points(only=None)
    scratch = typer.Typer(**APP_SETTINGS)

    @scratch.callback()
    def _root() -> None:
        """Plugin commands."""

    first_party = [r for r in host.loaded() if r.distribution in FIRST_PARTY]
    for record in host.loaded():
        if record not in first_party:
            host.pm.unregister(record.module)
    host.extend_cli(scratch)
    group = typer.main.get_group(scratch)
    return {
        name: (group.get_command(None, name).help or "").strip().splitlines()[0]
        for name in group.list_commands(None)
    }


def test_the_static_list_matches_what_first_party_plugins_register() -> None:
    registered = _first_party_cli_commands()
    listed = {entry.name: entry.help for entry in FIRST_PARTY_PLUGIN_COMMANDS}
    assert listed == registered


def test_fast_help_lists_fermix_auth() -> None:
    assert [e.name for e in installed_plugin_commands()] == ["auth"]
    out = subprocess.run(
        [sys.executable, "-m", "fermix_core.cli", "--help"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "  auth " in out
    assert "Sign in to subscription providers" in out
