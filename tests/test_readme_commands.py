"""The README promises exactly two set-up commands; CI must run the test one verbatim."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    section = text.split("## Set up", 1)[1].split("\n## ", 1)[0]
    return [block.strip() for block in re.findall(r"```sh\n(.*?)```", section, flags=re.S)]


def test_readme_has_exactly_two_setup_commands() -> None:
    commands = readme_commands()
    assert len(commands) == 2, commands
    assert all("\n" not in c for c in commands), "each set-up command is one pasteable line"


def test_ci_runs_the_readme_test_command() -> None:
    _, test_command = readme_commands()
    assert "pytest" in test_command
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert test_command in [line.strip() for line in ci]


def test_readme_main_command_uses_real_cli_verbs() -> None:
    from fermix_core.cli.commands import BY_NAME

    main_command, _ = readme_commands()
    verbs = re.findall(r"fermix (\w[\w-]*)", main_command)
    assert verbs and all(v in BY_NAME for v in verbs), verbs
