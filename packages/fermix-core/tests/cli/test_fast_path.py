from __future__ import annotations

import json
import subprocess
import sys

import pytest
from fermix_core import __version__
from fermix_core.cli.commands import COMMANDS, render_help
from fermix_core.cli.entry import main
from fermix_core.specs import resolve_ref

HEAVY = (
    "typer",
    "pydantic",
    "pluggy",
    "keyring",
    "httpx",
    "tomlkit",
    "anyio",
    "importlib.metadata",
    "fermix_providers",
    "fermix_channels",
    "fermix_tools",
)

PROBE = """
import json, sys
from fermix_core.cli.entry import main
code = main({args!r})
print(json.dumps({{"code": code, "modules": sorted(sys.modules)}}))
"""


@pytest.mark.parametrize("args", [["--help"], ["-h"], [], ["--version"], ["-V"]])
def test_help_and_version_import_nothing_heavy(args: list[str]) -> None:
    out = subprocess.run(
        [sys.executable, "-c", PROBE.format(args=args)], capture_output=True, text=True, check=True
    )
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report["code"] == 0
    loaded = [m for m in report["modules"] if any(m == h or m.startswith(h + ".") for h in HEAVY)]
    assert loaded == []


def test_version_output(capsys) -> None:
    assert main(["--version"]) == 0
    assert capsys.readouterr().out == f"fermix {__version__}\n"


def test_help_lists_every_command(capsys) -> None:
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    for entry in COMMANDS:
        assert f"  {entry.name}" in out
        assert entry.help in out


def test_command_table_matches_the_typer_apps() -> None:
    """The fast help and the real commands cannot drift: each row names its own typer app."""
    import typer

    for entry in COMMANDS:
        app = resolve_ref(entry.target)
        assert isinstance(app, typer.Typer), entry.name
        command = typer.main.get_command(app)
        assert (command.help or "").strip().splitlines()[0] == entry.help, entry.name


def test_render_help_is_stable() -> None:
    assert render_help().startswith("Usage: fermix [OPTIONS] COMMAND [ARGS]...")
