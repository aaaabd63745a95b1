"""The provider specs driving core's real config loader over a real config.toml."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest
from fermix_core.config.loader import check_config
from fermix_core.home import FermixHome
from fermix_core.plugins.host import PluginHost
from fermix_core.plugins.registry import SpecRegistry
from fermix_providers import catalog


@pytest.fixture
def registry() -> SpecRegistry:
    host = PluginHost()
    for name, module in catalog.PLUGIN_MODULES.items():
        host.register(importlib.import_module(module), name=f"providers.{name}")
    registry = host.collect()
    assert registry.errors == []
    return registry


def check(tmp_path: Path, registry: SpecRegistry, toml: str, environ: dict[str, str] | None = None):
    (tmp_path / "config.toml").write_text(toml)
    home = FermixHome.resolve({"FERMIX_HOME": str(tmp_path)})
    return check_config(home, registry, environ=environ or {})


def problems_of(report) -> dict[str, str]:
    return {p.path: p.message for p in report.problems}


def test_every_provider_with_all_its_keys_loads(tmp_path: Path, registry: SpecRegistry) -> None:
    report = check(
        tmp_path,
        registry,
        """
[fermix_core.providers.openai_codex]
primary = true
default_model = "gpt-5.6-codex"
reasoning_effort = "max"
fast = true

[fermix_core.providers.openai]
api_key = "@keyring"
wire = "chat_completions"
base_url = "https://gateway.example.com/v1"
reasoning_effort = "xhigh"

[fermix_core.providers.anthropic]
auth_mode = "oauth"
reasoning_effort = "low"

[fermix_core.providers.xai]
auth_mode = "api_key"
api_key = { source = "env", env = "WORK_XAI_KEY" }
reasoning_effort = "none"

[fermix_core.providers.openrouter]
api_key = "@keyring"
default_model = "anthropic/claude-sonnet-4.6"

[fermix_core.providers.mistral]
api_key = "@keyring"

[fermix_core.providers.ollama]
base_url = "http://localhost:11434/v1"
default_model = "qwen3"
""",
    )
    assert report.problems == []
    assert report.loaded is not None
    assert report.loaded.core.fermix_core.primary_provider() == "openai_codex"


@pytest.mark.parametrize(
    ("provider", "key", "value"),
    [
        ("openrouter", "reasoning_effort", '"high"'),
        ("mistral", "reasoning_effort", '"low"'),
        ("ollama", "reasoning_effort", '"medium"'),
        ("ollama", "api_key", '"sk-not-needed"'),
        ("openai_codex", "api_key", '"sk-not-used"'),
        ("openai", "fast", "true"),
        ("anthropic", "fast", "true"),
        ("anthropic", "wire", '"responses"'),
        ("openai", "auth_mode", '"oauth"'),
        ("mistral", "auth_mode", '"api_key"'),
    ],
)
def test_keys_outside_a_providers_allowlist_fail_load(
    tmp_path: Path, registry: SpecRegistry, provider: str, key: str, value: str
) -> None:
    report = check(
        tmp_path,
        registry,
        f"[fermix_core.providers.{provider}]\nprimary = true\n{key} = {value}\n",
    )
    assert f"fermix_core.providers.{provider}.{key}" in problems_of(report)
    assert "sk-not" not in str(report.problems)


def test_ollama_base_url_comes_from_its_env_var(tmp_path: Path, registry: SpecRegistry) -> None:
    report = check(
        tmp_path,
        registry,
        '[fermix_core.providers.ollama]\nprimary = true\nbase_url = "http://localhost:11434/v1"\n',
        environ={"OLLAMA_BASE_URL": "http://gpu-box.tailnet:11434/v1"},
    )
    assert report.loaded is not None
    assert str(report.loaded.provider_config("ollama").base_url).startswith(
        "http://gpu-box.tailnet"
    )
    assert "OLLAMA_BASE_URL" in report.loaded.env_applied


def test_provider_key_env_vars_override_the_file(tmp_path: Path, registry: SpecRegistry) -> None:
    report = check(
        tmp_path,
        registry,
        '[fermix_core.providers.mistral]\nprimary = true\napi_key = "@keyring"\n',
        environ={"MISTRAL_API_KEY": "env-mistral-key"},
    )
    assert report.loaded is not None
    assert "MISTRAL_API_KEY" in report.loaded.env_applied
