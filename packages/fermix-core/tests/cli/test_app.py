from __future__ import annotations

from fermix_core.cli.app import run


def test_subcommand_help_goes_through_typer(capsys) -> None:
    assert run(["plugins", "--help"]) == 0
    out = capsys.readouterr().out
    assert "list" in out and "Usage: fermix plugins" in out


def test_version_flag_through_typer_path(capsys) -> None:
    assert run(["--version", "plugins"]) == 0
    assert capsys.readouterr().out.startswith("fermix ")


def test_unknown_command_is_a_usage_error(capsys, monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("FERMIX_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("FERMIX_LOAD_PLUGINS", "")
    assert run(["definitely-not-a-command"]) == 2
    assert "No such command" in capsys.readouterr().err
