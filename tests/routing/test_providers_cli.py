"""`fermix providers list` against the installed first-party provider plugins."""

from __future__ import annotations

import json

import pytest
from fermix_core.cli.providers_cmd import app
from typer.testing import CliRunner

PROVIDER_PLUGINS = ",".join(
    f"providers.{n}"
    for n in ("openai_codex", "openai", "anthropic", "xai", "openrouter", "mistral", "ollama")
)
KEY_VARS = (
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "XAI_API_KEY",
    "OPENROUTER_API_KEY",
    "MISTRAL_API_KEY",
    "OLLAMA_BASE_URL",
)


@pytest.fixture
def home(fermix_home, monkeypatch):
    monkeypatch.setenv("FERMIX_LOAD_PLUGINS", PROVIDER_PLUGINS)
    for var in KEY_VARS:
        monkeypatch.delenv(var, raising=False)
    return fermix_home


def invoke(*args: str):
    return CliRunner().invoke(app, ["list", *args])


def test_json_lists_every_provider_with_status_and_key_source_only(home, monkeypatch) -> None:
    home.config_file.write_text(
        """
[fermix_core.providers.anthropic]
primary = true
api_key = "sk-ant-api03-VERYSECRET"
reasoning_effort = "low"
"""
    )
    monkeypatch.setenv("OPENROUTER_API_KEY", "sk-or-v1-ALSOSECRET")
    result = invoke("--json")
    assert result.exit_code == 0, result.output
    assert "VERYSECRET" not in result.output and "ALSOSECRET" not in result.output
    report = json.loads(result.stdout)
    rows = {row["name"]: row for row in report["providers"]}
    assert list(rows) == [
        "openai_codex",
        "openai",
        "anthropic",
        "xai",
        "openrouter",
        "mistral",
        "ollama",
    ]
    assert rows["anthropic"]["status"] == "Primary"
    assert rows["anthropic"]["reasoning_effort"] == "low"
    assert rows["anthropic"]["key_source"] == "plaintext"
    assert rows["openrouter"]["status"] == "Fallback"
    assert rows["openrouter"]["key_source"] == "env:OPENROUTER_API_KEY"
    assert rows["openrouter"]["reasoning_effort"] is None
    assert rows["ollama"]["status"] == "Not configured"
    assert rows["openai_codex"]["auth_mode"] == "oauth"
    assert report["primary"] == "anthropic" and report["fallbacks"] == ["openrouter"]


def test_table_output_for_people(home) -> None:
    home.config_file.write_text(
        '[fermix_core.providers.ollama]\nbase_url = "http://127.0.0.1:11434/v1"\n'
        '[fermix_core.routing]\ncron_model = "llama3.2"\n'
    )
    result = invoke()
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["NAME", "STATUS", "MODEL", "EFFORT", "AUTH", "KEY", "NOTE"]
    ollama = next(line for line in lines if line.startswith("ollama"))
    assert "Primary" in ollama and "keyless" in ollama
    assert "Not configured" in next(line for line in lines if line.startswith("mistral"))
    assert "scheduled jobs: ollama (llama3.2)" in result.stdout


def test_nothing_configured_says_run_setup(home) -> None:
    result = invoke()
    assert result.exit_code == 0
    assert "no provider configured — run `fermix setup`" in result.stderr
    assert not (home.path / "config.toml").exists()


def test_an_invalid_config_exits_nonzero_with_the_problem(home) -> None:
    home.config_file.write_text('[fermix_core.providers.openrouter]\nreasoning_effort = "high"\n')
    result = invoke("--json")
    assert result.exit_code == 1
    assert "fermix_core.providers.openrouter.reasoning_effort" in result.stderr
    assert result.stdout == ""


CLAMPED = """
[fermix_core.providers.xai]
primary = true
api_key = "xai-key"
reasoning_effort = "xhigh"

[fermix_core.providers.anthropic]
api_key = "sk-ant"
reasoning_effort = "none"
"""


def test_an_effort_beyond_a_providers_range_clamps_and_says_so(home) -> None:
    """xai tops out at high; Anthropic has no none (floor low): both load and clamp."""
    home.config_file.write_text(CLAMPED)
    result = invoke("--json")
    assert result.exit_code == 0, result.output
    rows = {row["name"]: row for row in json.loads(result.stdout)["providers"]}
    assert rows["xai"]["reasoning_effort"] == "high"
    assert rows["anthropic"]["reasoning_effort"] == "low"
    assert any("'xhigh'" in note and "'high'" in note for note in rows["xai"]["notes"])
    assert any("'none'" in note and "'low'" in note for note in rows["anthropic"]["notes"])
    table = invoke()
    assert table.exit_code == 0, table.output
    xai = next(line for line in table.stdout.splitlines() if line.startswith("xai"))
    assert "high" in xai and "xhigh" in xai


def test_doctor_shows_the_clamp_and_a_word_outside_the_vocabulary_still_fails(home) -> None:
    from fermix_core.cli.doctor_cmd import app as doctor_app

    home.config_file.write_text(CLAMPED)
    result = CliRunner().invoke(doctor_app, ["--json"])
    report = json.loads(result.stdout)
    by_name = {check["label"]: check for check in report["checks"]}
    assert by_name["config.toml"]["status"] == "ok", by_name["config.toml"]
    assert by_name["provider xai"]["status"] == "warn"
    assert "'high'" in by_name["provider xai"]["detail"]
    assert "'low'" in by_name["provider anthropic"]["detail"]

    home.config_file.write_text(CLAMPED.replace('"xhigh"', '"turbo"'))
    result = invoke("--json")
    assert result.exit_code == 1
    assert "fermix_core.providers.xai.reasoning_effort" in result.stderr
