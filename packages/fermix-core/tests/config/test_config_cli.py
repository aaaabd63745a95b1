"""``fermix config`` through typer's CliRunner, on a real home and a real registry."""

from __future__ import annotations

import json
import socket
from types import SimpleNamespace

import pytest
from fermix_core.cli import config_cmd
from fermix_core.plugins import PluginHost
from typer.testing import CliRunner

runner = CliRunner()


@pytest.fixture
def cli(monkeypatch, home, host: PluginHost, registry):
    """Point ``load_for_cli`` at the test home/registry and return an invoker."""
    from fermix_core.cli import context

    state = SimpleNamespace(environ={}, unavailable=[])

    def load_for_cli(*, validate: bool = False):
        return SimpleNamespace(
            home=home,
            host=host,
            registry=registry,
            unavailable=state.unavailable,
            environ=state.environ,
        )

    monkeypatch.setattr(context, "load_for_cli", load_for_cli)

    def invoke(*args: str):
        return runner.invoke(config_cmd.app, list(args))

    invoke.state = state  # type: ignore[attr-defined]
    return invoke


def test_validate_reports_valid_and_invalid(cli, write_config, home) -> None:
    write_config('[fermix_core.agent]\nname = "x"\n')
    ok = cli("validate")
    assert ok.exit_code == 0
    assert ok.stdout.strip() == f"{home.config_file}: valid"
    write_config(
        '[fermix_core.compaction]\nthreshold = 3\n[fermix_channels.slack]\nstreaming = "fast"\n'
    )
    bad = cli("validate")
    assert bad.exit_code == 1
    assert bad.stdout.splitlines() == [
        'fermix_channels.slack.streaming: must be one of "off", "draft", "block" (got "fast")',
        "fermix_core.compaction.threshold: must be at most 1.0 (got 3)",
    ]


def test_validate_json_and_warnings(cli, write_config, make_record) -> None:
    write_config("[fermix_channels.matrix]\ntoken = 'x'\n")
    cli.state.unavailable = [make_record("channels.matrix", "fermix-matrix")]
    result = cli("validate", "--json")
    assert result.exit_code == 0
    report = json.loads(result.stdout)
    assert report["valid"] is True
    assert report["problems"] == []
    assert report["warnings"][0]["path"] == "fermix_channels.matrix"
    text = cli("validate")
    assert "warning: fermix_channels.matrix: kept as is and not validated" in text.stdout


def test_validate_reports_toml_syntax_errors(cli, write_config) -> None:
    path = write_config("[fermix_core\n")
    result = cli("validate")
    assert result.exit_code == 1
    assert result.stdout.startswith(f"{path}:1:")


def test_set_prints_the_change_and_writes(cli, home) -> None:
    result = cli("set", "fermix_core.compaction.threshold", "0.6")
    assert result.exit_code == 0, result.output
    assert result.stdout == "fermix_core.compaction.threshold: (not set) -> 0.6\n"
    assert "threshold = 0.6" in home.config_file.read_text()
    again = cli("get", "fermix_core.compaction.threshold")
    assert again.stdout == "0.6\n"


def test_set_never_echoes_a_secret(cli, home, fermix_home) -> None:
    import keyring

    result = cli("set", "fermix_core.providers.openai.api_key", "sk-live-abcdef")
    assert result.exit_code == 0
    assert result.stdout == (
        "fermix_core.providers.openai.api_key: secret set (value not shown)\n"
        "fermix_core.providers.openai.api_key: stored in the OS keyring; "
        'config.toml holds "@keyring"\n'
    )
    assert "sk-live-abcdef" not in result.output
    assert keyring.get_password("fermix:OPENAI_API_KEY", "fermix") == "sk-live-abcdef"
    assert 'api_key = "@keyring"' in home.config_file.read_text()
    shown = cli("get", "fermix_core.providers.openai.api_key")
    assert shown.stdout == "@keyring\n"


def test_set_refusal_lists_problems_and_exits_1(cli, write_config) -> None:
    path = write_config("# keep\n")
    result = cli("set", "fermix_core.providers.openrouter.reasoning_effort", "high")
    assert result.exit_code == 1
    assert result.stderr.splitlines() == [
        "config.toml was not changed:",
        "  fermix_core.providers.openrouter.reasoning_effort: not allowed for this provider",
    ]
    assert path.read_text() == "# keep\n"


def test_set_mentions_restart_when_a_daemon_socket_exists(cli, home, tmp_path) -> None:
    home.ensure()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind(str(home.daemon_sock))
        result = cli("set", "fermix_core.agent.name", "Jarvis")
    finally:
        sock.close()
    assert result.exit_code == 0
    assert result.stdout.splitlines() == [
        'fermix_core.agent.name: (not set) -> "Jarvis"',
        config_cmd.RESTART_NOTE,
    ]
    assert config_cmd.RESTART_NOTE == "a running daemon keeps its settings until `fermix restart`"
    home.daemon_sock.unlink()
    no_daemon = cli("set", "fermix_core.agent.name", "Friday")
    assert no_daemon.stdout == 'fermix_core.agent.name: "Jarvis" -> "Friday"\n'


def test_set_notes_an_env_override(cli) -> None:
    cli.state.environ = {"OPENAI_API_KEY": "sk"}
    result = cli("set", "fermix_core.providers.openai.api_key", "@keyring")
    assert "note: OPENAI_API_KEY in the environment overrides this key at run time" in result.stdout


def test_unset(cli, write_config, home) -> None:
    write_config('[sandbox]\nmode = "open"\n')
    result = cli("unset", "sandbox.mode")
    assert result.exit_code == 0
    assert result.stdout == 'sandbox.mode: removed (was "open")\n'
    assert cli("unset", "sandbox.mode").stdout == "sandbox.mode: was not set\n"
    assert cli("unset", "not..a key").exit_code == 1


def test_show_masks_secrets_and_lists_env_names(cli, write_config) -> None:
    write_config('[fermix_core.providers.openai]\napi_key = "sk-file-secret"\n')
    cli.state.environ = {"SLACK_BOT_TOKEN": "xoxb-env-secret"}
    result = cli("show")
    assert result.exit_code == 0
    assert "sk-file-secret" not in result.stdout
    assert "xoxb-env-secret" not in result.stdout
    assert "# from the environment: SLACK_BOT_TOKEN" in result.stdout
    assert 'api_key = "********"' in result.stdout
    data = json.loads(cli("show", "--json").stdout)
    assert data["fermix_core"]["providers"]["openai"]["api_key"] == "********"
    assert data["fermix_core"]["compaction"]["threshold"] == 0.85
    revealed = json.loads(cli("show", "--json", "--show-secrets").stdout)
    assert revealed["fermix_core"]["providers"]["openai"]["api_key"] == "sk-file-secret"


def test_show_and_get_fail_cleanly_on_an_invalid_config(cli, write_config) -> None:
    write_config("[fermix_core.compaction]\nthreshold = 9\n")
    for args in (("show",), ("get", "fermix_core.profile")):
        result = cli(*args)
        assert result.exit_code == 1
        assert "fermix_core.compaction.threshold: must be at most 1.0 (got 9)" in result.stderr
        assert "Traceback" not in result.output


def test_get_forms(cli, write_config) -> None:
    write_config('[sandbox]\nallowed_roots = ["/srv/a"]\n')
    assert cli("get", "sandbox.allowed_roots").stdout == '["/srv/a"]\n'
    assert cli("get", "sandbox.allowed_roots", "--json").stdout == '["/srv/a"]\n'
    unset = cli("get", "fermix_core.agent.user_name")
    assert (unset.exit_code, unset.stdout) == (1, "")
    assert "fermix_core.agent.user_name is not set; `fermix config set" in unset.stderr
    unset_json = cli("get", "fermix_core.agent.user_name", "--json")
    assert (unset_json.exit_code, unset_json.stdout) == (1, "null\n")
    assert cli("get", "sandbox.env").stdout.startswith("allow = []")
    missing = cli("get", "sandbox.moed")
    assert missing.exit_code == 1
    assert 'sandbox.moed: no such setting (did you mean "sandbox.mode"?)' in missing.stderr
