"""``model_routing_config`` against a real config.toml, a real registry and real routing."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any, ClassVar

import pytest
from fermix_core.config import load_config
from fermix_core.home import FermixHome
from fermix_core.hookspecs import hookimpl
from fermix_core.plugins import PluginHost, SpecRegistry
from fermix_core.specs import ModelInfo, ProviderSpec
from fermix_core.testing import ScriptedProvider, ToolContract
from fermix_core.tool import ToolContext, Trust, build_tool
from fermix_tools.meta.plugin import MODEL_ROUTING_CONFIG
from fermix_tools.meta.routing_config import ModelRoutingConfig

pytestmark = pytest.mark.anyio

ENV = {"OPENAI_API_KEY": "sk-test-0123456789"}
BASE = frozenset({"primary", "default_model", "base_url"})


def factory(spec: ProviderSpec, settings: Any) -> ScriptedProvider:
    return ScriptedProvider(name=spec.name)


SPECS = (
    ProviderSpec(
        name="openai",
        factory=factory,
        env_var="OPENAI_API_KEY",
        config_keys=BASE | {"api_key", "reasoning_effort"},
        reasoning_efforts=("none", "low", "medium", "high", "xhigh"),
        default_model="gpt-new",
        default_base_url="https://api.openai.example.test/v1",
        models=(ModelInfo("gpt-new", 400_000), ModelInfo("gpt-mini", 400_000)),
        order=20,
    ),
    ProviderSpec(
        name="gateway",
        factory=factory,
        env_var="GATEWAY_API_KEY",
        config_keys=BASE | {"api_key"},
        default_model="vendor/model-1",
        default_base_url="https://gateway.example.test/v1",
        models=(ModelInfo("vendor/model-1", 128_000),),
        order=50,
    ),
    ProviderSpec(
        name="local",
        factory=factory,
        auth_modes=("none",),
        keyless=True,
        config_keys=BASE,
        default_model="qwen3",
        default_base_url="http://localhost:11434/v1",
        models=(ModelInfo("qwen3", 40_960),),
        order=70,
    ),
)

CONFIG = """# my settings — keep this comment
[fermix_core.providers.openai]
primary = true

[fermix_core.providers.local]
base_url = "http://localhost:11434/v1"  # the laptop's server
"""


class FakeProviders:
    @hookimpl
    def fermix_providers(self) -> Iterable[ProviderSpec]:
        return SPECS


def make_registry() -> SpecRegistry:
    host = PluginHost()
    host.register(FakeProviders(), "providers.fake", distribution="fermix-fake", version="1.0")
    registry = host.collect()
    assert registry.errors == []
    return registry


def context_for(home: FermixHome, text: str | None = CONFIG, **overrides: Any) -> ToolContext:
    if text is not None:
        home.config_file.write_text(text, encoding="utf-8")
    registry = make_registry()
    loaded = load_config(home, registry, environ=ENV)
    values: dict[str, Any] = {
        "trust": Trust.OPERATOR,
        "cwd": home.path,
        "home": home,
        "session_id": "main-1",
        "attended": True,
        "services": {"config": loaded},
    }
    values.update(overrides)
    return ToolContext(**values)


@pytest.fixture
def tool() -> ModelRoutingConfig:
    return ModelRoutingConfig(MODEL_ROUTING_CONFIG, environ=ENV)


@pytest.fixture
def ctx(fermix_home: FermixHome) -> ToolContext:
    return context_for(fermix_home)


class TestModelRoutingConfigContract(ToolContract):
    valid_args: ClassVar[dict[str, Any]] = {"action": "show"}
    invalid_args: ClassVar[dict[str, Any]] = {"action": "show", "subagent_model": "x"}
    invalid_field: ClassVar[str] = "show"

    def make_tool(self) -> ModelRoutingConfig:
        return ModelRoutingConfig(MODEL_ROUTING_CONFIG, environ=ENV)

    def make_context(self, tmp_path: Path) -> ToolContext:
        home = FermixHome(tmp_path / "fermix-home")
        home.ensure()
        return context_for(home)


async def test_show_reports_settings_and_the_route_they_give(tool, ctx) -> None:
    out = await tool.invoke({"action": "show"}, ctx)
    assert not out.is_error, out.text
    assert out.data["routing"] == {
        "subagent_model": None,
        "subagent_provider": None,
        "subagent_reasoning_effort": None,
    }
    assert out.data["effective"]["provider"] == "openai"
    assert out.data["effective"]["model"] == "gpt-new"
    assert "Sub-agents run on openai with model gpt-new" in out.text


async def test_set_writes_through_the_config_writer_keeping_comments(
    tool, ctx, fermix_home
) -> None:
    out = await tool.invoke(
        {"action": "set", "subagent_model": "gpt-mini", "subagent_reasoning_effort": "low"}, ctx
    )
    assert not out.is_error, out.text
    text = fermix_home.config_file.read_text()
    assert "# my settings — keep this comment" in text and "# the laptop's server" in text
    routing = load_config(fermix_home, make_registry(), environ=ENV).core.fermix_core.routing
    assert routing.subagent_model == "gpt-mini" and routing.subagent_reasoning_effort == "low"
    assert "Sub-agents will run on openai with model gpt-mini at effort low" in out.text
    assert out.data["changed"] == ["subagent_model", "subagent_reasoning_effort"]
    shown = await tool.invoke({"action": "show"}, ctx)  # reads the file, not the boot snapshot
    assert shown.data["routing"]["subagent_model"] == "gpt-mini"


async def test_a_cross_provider_worker_with_its_provider(tool, ctx, fermix_home) -> None:
    out = await tool.invoke(
        {"action": "set", "subagent_provider": "local", "subagent_model": "qwen3"}, ctx
    )
    assert not out.is_error, out.text
    assert "Sub-agents will run on local with model qwen3" in out.text


async def test_a_mis_pairing_is_rejected_and_nothing_is_written(tool, ctx, fermix_home) -> None:
    before = fermix_home.config_file.read_bytes()
    out = await tool.invoke(
        {"action": "set", "subagent_provider": "openai", "subagent_model": "qwen3"}, ctx
    )
    assert out.is_error and "Not saved" in out.text
    assert 'model "qwen3" is a local model in the catalog, not a openai one' in out.text
    assert fermix_home.config_file.read_bytes() == before


async def test_the_merged_routing_is_validated_not_just_the_new_value(tool, fermix_home) -> None:
    ctx = context_for(
        fermix_home, CONFIG + '\n[fermix_core.routing]\nsubagent_provider = "openai"\n'
    )
    before = fermix_home.config_file.read_bytes()
    out = await tool.invoke({"action": "set", "subagent_model": "vendor/model-1"}, ctx)
    assert out.is_error and "is a gateway model" in out.text
    assert fermix_home.config_file.read_bytes() == before


async def test_an_unconfigured_provider_is_rejected(tool, ctx, fermix_home) -> None:
    before = fermix_home.config_file.read_bytes()
    out = await tool.invoke({"action": "set", "subagent_provider": "gateway"}, ctx)
    assert out.is_error and "not configured" in out.text and "fermix setup" in out.text
    assert fermix_home.config_file.read_bytes() == before


async def test_an_unknown_provider_is_a_config_error(tool, ctx, fermix_home) -> None:
    before = fermix_home.config_file.read_bytes()
    out = await tool.invoke({"action": "set", "subagent_provider": "nosuch"}, ctx)
    assert out.is_error and "nosuch" in out.text
    assert fermix_home.config_file.read_bytes() == before


async def test_empty_strings_clear_fields(tool, fermix_home) -> None:
    ctx = context_for(
        fermix_home,
        CONFIG + '\n[fermix_core.routing]\nsubagent_model = "gpt-mini"\ncron_model = "gpt-mini"\n',
    )
    out = await tool.invoke({"action": "set", "subagent_model": ""}, ctx)
    assert not out.is_error, out.text
    routing = load_config(fermix_home, make_registry(), environ=ENV).core.fermix_core.routing
    assert routing.subagent_model is None
    assert routing.cron_model == "gpt-mini", "cron routing is not this tool's to touch"


@pytest.mark.parametrize(
    "value", ['gpt"; [sandbox]\nmode = "open', "model\nprimary = true", "[not, a, list]", "true"]
)
async def test_hostile_model_ids_stay_one_quoted_string(tool, ctx, fermix_home, value) -> None:
    out = await tool.invoke({"action": "set", "subagent_model": value}, ctx)
    assert not out.is_error, out.text
    loaded = load_config(fermix_home, make_registry(), environ=ENV)
    assert loaded.core.fermix_core.routing.subagent_model == value
    assert loaded.core.sandbox.mode == "standard"


@pytest.mark.parametrize(
    "args",
    [
        {"action": "set"},
        {"action": "show", "subagent_provider": "openai"},
        {"action": "reset"},
        {"action": "set", "subagent_reasoning_effort": "extreme"},
        {"action": "set", "cron_model": "x"},
    ],
)
async def test_invalid_calls_are_readable_errors(tool, ctx, args) -> None:
    out = await tool.invoke(args, ctx)
    assert out.is_error and "invalid arguments" in out.text


async def test_guests_and_contexts_without_config_are_refused(tool, fermix_home) -> None:
    guest = context_for(fermix_home, trust=Trust.GUEST)
    out = await tool.invoke({"action": "show"}, guest)
    assert out.is_error and "Only the owner" in out.text
    bare = context_for(fermix_home, services={})
    out = await tool.invoke({"action": "show"}, bare)
    assert out.is_error and "config is not available" in out.text


def test_the_spec_is_owner_only_write() -> None:
    assert MODEL_ROUTING_CONFIG.owner_only and not MODEL_ROUTING_CONFIG.read_only
    assert MODEL_ROUTING_CONFIG.policy.value == "write"
    assert isinstance(build_tool(MODEL_ROUTING_CONFIG), ModelRoutingConfig)
