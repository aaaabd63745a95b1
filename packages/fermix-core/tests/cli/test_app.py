from __future__ import annotations

import pytest
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


def test_a_mistyped_command_gets_the_closest_one(capsys, monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("FERMIX_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("FERMIX_LOAD_PLUGINS", "")
    assert run(["stauts"]) == 2
    assert "No such command 'stauts' (did you mean 'status'?)" in capsys.readouterr().err
    assert run(["config", "gte", "x"]) == 2
    assert "(did you mean 'get'?)" in capsys.readouterr().err


def test_every_group_without_a_subcommand_shows_its_help(capsys, monkeypatch, tmp_path) -> None:
    from fermix_core.cli.commands import COMMANDS
    from fermix_core.specs import resolve_ref

    monkeypatch.setenv("FERMIX_HOME", str(tmp_path / "home"))
    import typer

    groups = [
        e.name for e in COMMANDS if len(resolve_ref(e.target).registered_commands) > 1
    ] or pytest.fail("no command groups found")
    for name in groups:
        assert run([name]) == 2, name
        shown = capsys.readouterr()
        out = shown.out + shown.err  # a usage exit prints its help on stderr
        assert f"Usage: fermix {name}" in out and "Commands:" in out, name
    assert typer  # the groups above are typer apps


def test_command_lists_are_not_cut_off(capsys) -> None:
    assert run(["config", "--help"]) == 0
    out = capsys.readouterr().out
    commands = out.split("Commands:", 1)[1]
    assert "..." not in commands
    assert "refused if invalid." in " ".join(commands.split())


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Show or set ([fermix_core.routing] subagent_model). More.", None),
        ("Profiles: USER.md/MEMORY.md and more. Second.", "Profiles: USER.md/MEMORY.md and more"),
        ("No full stop at all", "No full stop at all"),
        ("Ends here.", "Ends here"),
    ],
)
def test_capabilities_descriptions_stop_at_a_sentence_not_a_dot(text, expected) -> None:
    from fermix_core.cli.capabilities_cmd import first_sentence

    assert first_sentence(text) == (
        expected or "Show or set ([fermix_core.routing] subagent_model)"
    )
