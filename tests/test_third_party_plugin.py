"""A third-party distribution extends Fermix through entry points alone, with no core change.

The distributions here are real on-disk installs (dist-info + modules) made by
``fake_distribution``; the loader, the registry and the CLI read them exactly as they would
read a wheel installed by pip.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from fermix_core.home import FermixHome
from fermix_core.messages import Message
from fermix_core.plugins.discovery import PluginRecord
from fermix_core.plugins.host import PluginHost
from fermix_core.provider import ChatRequest, Provider
from fermix_core.specs import PolicyClass, ProviderSpec, ToolSpec, resolve_ref
from fermix_core.testing.fakedist import FakeDistribution
from fermix_core.tool import ToolContext, Trust, build_tool

MakeDist = Callable[..., FakeDistribution]

WEATHER_MODULES = {
    "fermix_weather.tools": """
        from fermix_core import hookimpl
        from fermix_core.specs import PolicyClass, ToolSpec

        @hookimpl
        def fermix_tools():
            yield ToolSpec(
                name="weather_now",
                description="Current weather for a city.",
                factory="fermix_weather.tool:WeatherNow",
                args_model="fermix_weather.tool:WeatherArgs",
                policy=PolicyClass.NETWORK,
            )
    """,
    "fermix_weather.providers": """
        from fermix_core import hookimpl
        from fermix_core.specs import ModelInfo, ProviderSpec

        @hookimpl
        def fermix_providers():
            yield ProviderSpec(
                name="acme",
                label="Acme AI",
                factory="fermix_weather.acme:AcmeProvider",
                env_var="ACME_API_KEY",
                default_model="acme-large",
                models=(ModelInfo(id="acme-large", context_window=128_000),),
            )
    """,
    # The heavy parts: only imported when a spec's factory is resolved.
    "fermix_weather.tool": """
        from pydantic import BaseModel
        from fermix_core.tool import Tool

        class WeatherArgs(BaseModel):
            city: str

        class WeatherNow(Tool[WeatherArgs]):
            async def run(self, args, ctx):
                return f"{args.city}: 21°C and clear"
    """,
    "fermix_weather.acme": """
        from fermix_core.messages import Turn
        from fermix_core.provider import Provider

        class AcmeProvider(Provider):
            name = "acme"

            async def chat(self, request):
                return Turn(content="Acme says hi", model=request.model or "acme-large")
    """,
}

WEATHER_ENTRY_POINTS = {
    "tools.weather": "fermix_weather.tools",
    "providers.acme": "fermix_weather.providers",
}


@pytest.fixture(autouse=True)
def _no_load_filter(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FERMIX_LOAD_PLUGINS", raising=False)


@pytest.fixture
def weather(fake_distribution: MakeDist) -> FakeDistribution:
    return fake_distribution("fermix-weather", "1.0.0", WEATHER_ENTRY_POINTS, WEATHER_MODULES)


def records_named(host: PluginHost, *names: str) -> dict[str, PluginRecord]:
    return {r.name: r for r in host.records if r.name in names}


@pytest.mark.anyio
async def test_specs_appear_with_their_source(weather: FakeDistribution, tmp_path: Path) -> None:
    with weather.activate():
        host = PluginHost()
        host.load_entry_points()
        registry = host.collect()

        tool_spec = registry.typed(ToolSpec)["weather_now"]
        provider_spec = registry.typed(ProviderSpec)["acme"]
        assert registry.source_of(tool_spec) == "tools.weather (fermix-weather 1.0.0)"
        assert registry.source_of(provider_spec) == "providers.acme (fermix-weather 1.0.0)"
        assert tool_spec.policy is PolicyClass.NETWORK
        assert "fermix_weather.tool" not in sys.modules, "collecting specs imports no factory"

        # The specs are usable as they are: core builds and runs what the plugin declared.
        tool = build_tool(tool_spec)
        ctx = ToolContext(trust=Trust.OPERATOR, cwd=tmp_path, home=FermixHome(tmp_path))
        output = await tool.invoke({"city": "Lisbon"}, ctx)
        assert output.text == "Lisbon: 21°C and clear"
        provider = resolve_ref(provider_spec.factory)()
        assert isinstance(provider, Provider)
        turn = await provider.chat(ChatRequest(messages=[Message.user("hi")]))
        assert (turn.content, turn.model) == ("Acme says hi", "acme-large")

    for record in records_named(host, "tools.weather", "providers.acme").values():
        assert record.status == "loaded"
        assert (record.distribution, record.version) == ("fermix-weather", "1.0.0")


def test_a_broken_plugin_is_isolated_and_reported(
    weather: FakeDistribution, fake_distribution: MakeDist
) -> None:
    broken = fake_distribution(
        "fermix-broken",
        "0.3.0",
        {"tools.broken": "fermix_broken.plugin", "tools.raising": "fermix_broken.raising"},
        {
            "fermix_broken.plugin": "from fermix_broken import missing_helper\n",
            "fermix_broken.raising": """
                from fermix_core import hookimpl

                @hookimpl
                def fermix_tools():
                    raise RuntimeError("registration blew up")
            """,
        },
    )
    with weather.activate(), broken.activate():
        host = PluginHost()
        host.load_entry_points()
        registry = host.collect()

    records = records_named(host, "tools.broken", "tools.raising", "tools.weather")
    failed = records["tools.broken"]
    assert failed.status == "failed"
    assert "ImportError" in failed.error
    assert "missing_helper" in failed.error
    assert failed in host.unavailable()
    assert records["tools.weather"].status == "loaded"
    assert "weather_now" in registry.typed(ToolSpec)
    assert "acme" in registry.typed(ProviderSpec)
    [error] = [e for e in registry.errors if "registration blew up" in e.message]
    assert error.sources == ("tools.raising (fermix-broken 0.3.0)",)


def test_a_duplicate_name_across_distributions_reports_both(
    weather: FakeDistribution, fake_distribution: MakeDist
) -> None:
    rival = fake_distribution(
        "fermix-weather-plus",
        "2.1.0",
        {"tools.weather": "fermix_weather_plus.tools"},
        {"fermix_weather_plus.tools": "raise AssertionError('conflicting plugins never load')"},
    )
    with weather.activate(), rival.activate():
        host = PluginHost()
        host.load_entry_points()
        registry = host.collect()

    clashing = [r for r in host.records if r.name == "tools.weather"]
    assert {r.distribution for r in clashing} == {"fermix-weather", "fermix-weather-plus"}
    for record in clashing:
        assert record.status == "conflict"
        assert "fermix-weather 1.0.0" in (record.error or "")
        assert "fermix-weather-plus 2.1.0" in (record.error or "")
    assert "weather_now" not in registry.typed(ToolSpec)
    # The distribution's other, unambiguous plugin still loads.
    assert records_named(host, "providers.acme")["providers.acme"].status == "loaded"


def test_empty_load_filter_loads_nothing(
    weather: FakeDistribution, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FERMIX_LOAD_PLUGINS", "")
    with weather.activate():
        host = PluginHost()
        host.load_entry_points()
        registry = host.collect()
        assert "fermix_weather.tools" not in sys.modules
    assert host.loaded() == []
    weather_records = records_named(host, "tools.weather", "providers.acme")
    assert len(weather_records) == 2
    assert all(r.status == "blocked" for r in host.records)
    assert "weather_now" not in registry.typed(ToolSpec)


def test_cli_lists_the_plugin_as_json(weather: FakeDistribution, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "FERMIX_LOAD_PLUGINS"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(weather.path), env.get("PYTHONPATH")]))
    env["FERMIX_HOME"] = str(tmp_path / "home")
    env["PYTHON_KEYRING_BACKEND"] = "keyring.backends.null.Keyring"
    proc = subprocess.run(
        [sys.executable, "-m", "fermix_core.cli", "plugins", "list", "--json"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        check=False,
    )
    report = json.loads(proc.stdout)
    assert set(report) == {"plugins", "errors"}
    by_name = {p["name"]: p for p in report["plugins"]}
    assert by_name["tools.weather"] == {
        "name": "tools.weather",
        "distribution": "fermix-weather",
        "version": "1.0.0",
        "module": "fermix_weather.tools",
        "status": "loaded",
        "hooks": ["fermix_tools"],
        "error": None,
        "warning": None,
    }
    assert by_name["providers.acme"]["status"] == "loaded"
    unhealthy = [p for p in report["plugins"] if p["status"] in ("failed", "conflict")]
    assert proc.returncode == (1 if unhealthy or report["errors"] else 0), proc.stderr


ROGUE_MODULES = {
    "fermix_rogue.tools": """
        from fermix_core import hookimpl
        from fermix_core.specs import ToolSpec

        @hookimpl
        def fermix_tools():
            yield ToolSpec(
                name="rogue_text",
                description="Takes a bare string, which no provider wire can send.",
                factory="fermix_rogue.tool:RogueText",
                args_model="fermix_rogue.tool:BareString",
            )
            yield ToolSpec(
                name="rogue_fine",
                description="A well-formed tool next to the broken one.",
                factory="fermix_rogue.tool:RogueFine",
            )
            yield ToolSpec(
                name="shell",
                description="A shell that wants to replace the built-in one.",
                factory="fermix_rogue.tool:RogueFine",
            )
    """,
    "fermix_rogue.tool": """
        from pydantic import RootModel
        from fermix_core.tool import Tool

        class BareString(RootModel[str]):
            pass

        class RogueText(Tool[BareString]):
            async def run(self, args, ctx):
                return args.root

        class RogueFine(Tool):
            async def run(self, args, ctx):
                return "fine"
    """,
}


def test_bad_and_clashing_tools_are_dropped_and_reported_by_plugins_list(
    fake_distribution: MakeDist, tmp_path: Path
) -> None:
    rogue = fake_distribution(
        "fermix-rogue", "0.2.0", {"tools.rogue": "fermix_rogue.tools"}, ROGUE_MODULES
    )
    env = {k: v for k, v in os.environ.items() if k != "FERMIX_LOAD_PLUGINS"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(rogue.path), env.get("PYTHONPATH")]))
    env["FERMIX_HOME"] = str(tmp_path / "home")
    env["PYTHON_KEYRING_BACKEND"] = "keyring.backends.null.Keyring"
    proc = subprocess.run(
        [sys.executable, "-m", "fermix_core.cli", "plugins", "list", "--json"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        check=False,
    )
    assert proc.returncode == 1, proc.stderr
    errors = {e["name"]: e for e in json.loads(proc.stdout)["errors"]}
    assert set(errors) == {"rogue_text", "shell"}
    assert errors["rogue_text"]["message"].startswith("dropped: its argument schema is unusable")
    assert errors["rogue_text"]["sources"] == ["tools.rogue (fermix-rogue 0.2.0)"]
    assert "reserved by first-party" in errors["shell"]["message"]
    assert "fermix-rogue" in errors["shell"]["message"]


def test_a_tool_with_a_non_object_schema_does_not_break_the_others(
    fake_distribution: MakeDist,
) -> None:
    from fermix_core.agent import CapabilityRegistry

    rogue = fake_distribution(
        "fermix-rogue", "0.2.0", {"tools.rogue": "fermix_rogue.tools"}, ROGUE_MODULES
    )
    with rogue.activate():
        host = PluginHost()
        host.load_entry_points()
        registry = host.collect()
        # Registration alone lets it through; assembling the tool registry catches it.
        assert "rogue_text" in registry.typed(ToolSpec)
        [dropped] = registry.check_tool_schemas()
        assert registry.check_tool_schemas() == []  # idempotent, reported once
        assert dropped.name == "rogue_text"
        assert dropped in registry.errors
        specs = registry.typed(ToolSpec)
        assert "rogue_text" not in specs and "rogue_fine" in specs
        caps = CapabilityRegistry(specs.values(), deferral=False).snapshot(Trust.OPERATOR)
        assert "rogue_fine" in {d.name for d in caps.definitions()}


def test_a_registry_built_from_specs_leaves_a_non_object_schema_off_the_wire(
    fake_distribution: MakeDist,
) -> None:
    from fermix_core.agent import CapabilityRegistry
    from fermix_core.tool import ToolBuildError

    rogue = fake_distribution(
        "fermix-rogue", "0.2.0", {"tools.rogue": "fermix_rogue.tools"}, ROGUE_MODULES
    )
    with rogue.activate():
        host = PluginHost()
        host.load_entry_points()
        specs = host.collect().typed(ToolSpec)
        caps = CapabilityRegistry(specs.values(), deferral=False).snapshot(Trust.OPERATOR)
        wire = {d.name for d in caps.definitions()}
        assert "rogue_fine" in wire and "rogue_text" not in wire
        with pytest.raises(ToolBuildError, match="argument schema is unusable"):
            caps.tool("rogue_text")
