"""The installed ``fermix`` script, run as a user would, against a fresh FERMIX_HOME."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

FERMIX = shutil.which("fermix", path=os.path.dirname(sys.executable)) or "fermix"

WEATHER_PLUGIN = """
import typer
from fermix_core import hookimpl
from fermix_core.specs import SetupOption, SetupStepSpec


@hookimpl
def fermix_cli(app):
    weather = typer.Typer(help="Weather plugin commands.")

    @weather.command()
    def now(city: str):
        print(f"sunny in {city}")

    app.add_typer(weather, name="weather")


@hookimpl
def fermix_setup_steps():
    yield SetupStepSpec(
        name="weather",
        label="Weather",
        run="fermix_weather_plugin:setup_step",
        order=100,
        options=(SetupOption(flag="--weather-city", help="Default city"),),
    )


def setup_step(context):
    city = context.ask("--weather-city", "Default city")
    context.table("fermix_weather")["city"] = city
"""

WEATHER_SECTION = """
from fermix_core import hookimpl
from fermix_core.specs import ConfigSectionSpec
from pydantic import BaseModel, ConfigDict


class WeatherConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    city: str = "Paris"


@hookimpl
def fermix_config_sections():
    yield ConfigSectionSpec(name="fermix_weather", model="fermix_weather_config:WeatherConfig")
"""


def run(args, env, check=True, stdin=subprocess.DEVNULL):
    result = subprocess.run(
        [FERMIX, *args], env=env, capture_output=True, text=True, stdin=stdin, timeout=60
    )
    if check and result.returncode != 0:
        raise AssertionError(
            f"fermix {args} exited {result.returncode}\n{result.stdout}\n{result.stderr}"
        )
    return result


@pytest.fixture
def env(tmp_path):
    environ = dict(os.environ)
    environ["FERMIX_HOME"] = str(tmp_path / "home")
    environ["PYTHON_KEYRING_BACKEND"] = "fermix_core.keyring_backend.MemoryKeyring"
    environ.pop("FERMIX_LOAD_PLUGINS", None)
    return environ


def test_setup_then_doctor_on_a_fresh_home(env, tmp_path) -> None:
    home = Path(env["FERMIX_HOME"])
    assert not home.exists()
    out = run(["setup", "--non-interactive"], env)
    assert "config.toml written" in out.stdout
    assert stat.S_IMODE(home.stat().st_mode) == 0o700
    assert stat.S_IMODE((home / "config.toml").stat().st_mode) == 0o600
    result = run(["doctor", "--json"], env, check=False)
    report = json.loads(result.stdout)
    # A fresh install has no provider yet: doctor flags exactly that, with the fix.
    failing = [check for check in report["checks"] if check["status"] == "fail"]
    assert [check["check"] for check in failing] == ["providers"], failing
    assert "fermix setup" in (failing[0]["fix"] or "") + failing[0]["detail"]
    assert result.returncode == 1
    labels = {check["check"] for check in report["checks"]}
    assert {"config", "plugins", "home", "keyring", "secrets"} <= labels
    assert (home / "logs" / "fermix.log").exists()


def test_read_only_commands_do_not_create_the_home(env) -> None:
    run(["plugins", "list", "--json"], env)
    run(["config", "show"], env)
    assert not Path(env["FERMIX_HOME"]).exists()


def test_doctor_fails_loudly_on_a_broken_config(env) -> None:
    home = Path(env["FERMIX_HOME"])
    home.mkdir(mode=0o700)
    (home / "config.toml").write_text(
        '[fermix_core.providers.openrouter]\nreasoning_effort = "high"\n'
    )
    result = run(["doctor", "--json"], env, check=False)
    assert result.returncode == 1
    report = json.loads(result.stdout)
    failing = [c for c in report["checks"] if c["status"] == "fail"]
    assert any(
        "fermix_core.providers.openrouter.reasoning_effort: not allowed for this provider"
        in c["detail"]
        for c in failing
    )


def test_plugin_command_and_setup_step(env, fake_distribution) -> None:
    dist = fake_distribution(
        "fermix-weather",
        "1.2.0",
        entry_points={
            "cli.weather": "fermix_weather_plugin",
            "config.weather": "fermix_weather_config",
        },
        modules={
            "fermix_weather_plugin.py": WEATHER_PLUGIN,
            "fermix_weather_config.py": WEATHER_SECTION,
        },
    )
    env["PYTHONPATH"] = str(dist.path)
    assert run(["weather", "now", "Lyon"], env).stdout.strip() == "sunny in Lyon"
    assert "weather" not in run(["--help"], env).stdout  # the fast help never loads plugins

    missing = run(["setup", "--non-interactive"], env, check=False)
    assert missing.returncode == 2
    assert "--weather-city" in missing.stderr
    assert not (Path(env["FERMIX_HOME"]) / "config.toml").exists()

    unknown = run(["setup", "--non-interactive", "--wether-city", "Oslo"], env, check=False)
    assert unknown.returncode == 2 and "--weather-city" in unknown.stderr

    run(["setup", "--non-interactive", "--weather-city", "Oslo"], env)
    config = (Path(env["FERMIX_HOME"]) / "config.toml").read_text()
    assert "[fermix_weather]" in config and 'city = "Oslo"' in config
    assert run(["config", "get", "fermix_weather.city"], env).stdout.strip().strip('"') == "Oslo"


def test_plugins_list_reports_a_broken_third_party_plugin(env, fake_distribution) -> None:
    dist = fake_distribution(
        "fermix-broken",
        "0.0.1",
        entry_points={"tools.broken": "fermix_broken_plugin"},
        modules={"fermix_broken_plugin.py": "import does_not_exist_anywhere\n"},
    )
    env["PYTHONPATH"] = str(dist.path)
    result = run(["plugins", "list", "--json"], env, check=False)
    assert result.returncode == 1
    plugins = {p["name"]: p for p in json.loads(result.stdout)["plugins"]}
    assert plugins["tools.broken"]["status"] == "failed"
    assert "does_not_exist_anywhere" in plugins["tools.broken"]["error"]
    assert plugins["providers.openai"]["status"] == "loaded"
    doctor = run(["doctor"], env, check=False)
    assert doctor.returncode == 1 and "tools.broken" in doctor.stdout


def test_migrate_secrets_without_a_keyring_refuses_and_keeps_the_file(env) -> None:
    home = Path(env["FERMIX_HOME"])
    home.mkdir(mode=0o700)
    env["PYTHON_KEYRING_BACKEND"] = "keyring.backends.fail.Keyring"
    (home / "config.toml").write_text(
        "# my providers\n[fermix_core.providers.anthropic]\n"
        'primary = true\napi_key = "sk-ant-plain-123"\n'
    )
    refused = run(["setup", "--migrate-secrets"], env, check=False)
    assert refused.returncode == 1
    assert "sk-ant-plain-123" not in refused.stdout + refused.stderr
    assert (home / "config.toml").read_text().startswith("# my providers\n")
    assert "sk-ant-plain-123" in (home / "config.toml").read_text()


def test_a_locked_keyring_is_a_doctor_warning_not_a_crash(env) -> None:
    env["PYTHON_KEYRING_BACKEND"] = "fermix_core.keyring_backend.LockedKeyring"
    result = run(["doctor", "--json"], env, check=False)
    report = json.loads(result.stdout)
    [row] = [check for check in report["checks"] if check["check"] == "keyring"]
    assert row["status"] == "warn"
    assert "KeyringLocked" in row["detail"] and "gnome-keyring" in row["fix"]
