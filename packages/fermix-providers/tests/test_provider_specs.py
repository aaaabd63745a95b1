"""The seven first-party provider specs: soundness, key allowlists, auth and wiring."""

from __future__ import annotations

import importlib
import types

import pytest
from fermix_core.hookspecs import hookimpl
from fermix_core.plugins.host import PluginHost
from fermix_core.specs import ProviderSpec
from fermix_core.testing.imports import loaded_after
from fermix_providers import catalog

NAMES = catalog.FALLBACK_ORDER
KEYED = ("openai", "anthropic", "xai", "openrouter", "mistral")
EFFORT_CAPABLE = ("openai", "openai_codex", "anthropic", "xai")


def spec_of(name: str) -> ProviderSpec:
    return importlib.import_module(catalog.PLUGIN_MODULES[name]).SPEC


def all_specs() -> dict[str, ProviderSpec]:
    return {name: spec_of(name) for name in NAMES}


def loaded_host() -> PluginHost:
    host = PluginHost()
    for name, module in catalog.PLUGIN_MODULES.items():
        record = host.register(importlib.import_module(module), name=f"providers.{name}")
        assert record.status == "loaded", record.error
    return host


@pytest.mark.parametrize("name", NAMES)
def test_spec_is_sound(name: str) -> None:
    spec = spec_of(name)
    assert spec.name == name
    assert spec.problems() == []
    assert spec.label
    assert spec.default_base_url
    assert spec.models, "every provider ships a catalog"


@pytest.mark.parametrize("name", NAMES)
def test_hook_yields_exactly_the_module_spec(name: str) -> None:
    module = importlib.import_module(catalog.PLUGIN_MODULES[name])
    assert list(module.fermix_providers()) == [module.SPEC]


@pytest.mark.parametrize("name", NAMES)
def test_factory_names_the_adapter_inside_the_provider_package(name: str) -> None:
    factory = spec_of(name).factory
    assert isinstance(factory, str)
    module, _, attr = factory.partition(":")
    assert module == f"fermix_providers.{name}.adapter"
    assert attr.endswith("Provider")


def test_host_collects_all_seven_without_errors() -> None:
    registry = loaded_host().collect()
    assert registry.errors == []
    providers = registry.typed(ProviderSpec)
    assert set(providers) == set(NAMES)
    for name, spec in providers.items():
        # A first-party module registered in process keeps its distribution.
        assert registry.source_of(spec) == f"providers.{name} (fermix-providers 0.1.0)"


def test_fallback_order_is_the_catalog_order() -> None:
    providers = loaded_host().collect().typed(ProviderSpec)
    ordered = sorted(providers.values(), key=lambda s: s.order)
    assert [s.name for s in ordered] == [
        "openai_codex",
        "openai",
        "anthropic",
        "xai",
        "openrouter",
        "mistral",
        "ollama",
    ]
    assert [s.order for s in ordered] == [10, 20, 30, 40, 50, 60, 70]


def test_every_provider_takes_the_base_keys() -> None:
    for spec in all_specs().values():
        assert {"primary", "default_model", "base_url"} <= spec.config_keys, spec.name


def test_exact_key_allowlists() -> None:
    base = {"primary", "default_model", "base_url", "vision_models"}
    expected = {
        "openai_codex": base | {"reasoning_effort", "fast"},
        "openai": base | {"api_key", "reasoning_effort", "wire"},
        "anthropic": base | {"api_key", "reasoning_effort", "auth_mode"},
        "xai": base | {"api_key", "reasoning_effort", "auth_mode"},
        "openrouter": base | {"api_key"},
        "mistral": base | {"api_key"},
        "ollama": base,
    }
    assert {n: set(s.config_keys) for n, s in all_specs().items()} == expected


@pytest.mark.parametrize("name", ["openrouter", "mistral", "ollama"])
def test_providers_without_behaviour_knobs_reject_effort(name: str) -> None:
    spec = spec_of(name)
    assert "reasoning_effort" not in spec.config_keys
    assert spec.reasoning_efforts == ()


def test_only_codex_has_fast_and_only_openai_has_wire() -> None:
    specs = all_specs()
    assert [n for n, s in specs.items() if "fast" in s.config_keys] == ["openai_codex"]
    assert [n for n, s in specs.items() if "wire" in s.config_keys] == ["openai"]


def test_auth_mode_key_only_where_two_auth_modes_exist() -> None:
    for name, spec in all_specs().items():
        has_key = "auth_mode" in spec.config_keys
        assert has_key == (name in ("anthropic", "xai")), name
        assert has_key == (len(spec.auth_modes) > 1), name


def test_auth_modes() -> None:
    specs = all_specs()
    assert specs["openai_codex"].auth_modes == ("oauth",)
    assert specs["anthropic"].auth_modes == ("api_key", "oauth")
    assert specs["xai"].auth_modes == ("api_key", "oauth")
    assert specs["ollama"].auth_modes == ("none",)
    for name in ("openai", "openrouter", "mistral"):
        assert specs[name].auth_modes == ("api_key",)


def test_key_env_vars_and_keyless() -> None:
    expected = {
        "openai_codex": None,
        "openai": "OPENAI_API_KEY",
        "anthropic": "ANTHROPIC_API_KEY",
        "xai": "XAI_API_KEY",
        "openrouter": "OPENROUTER_API_KEY",
        "mistral": "MISTRAL_API_KEY",
        "ollama": None,
    }
    specs = all_specs()
    assert {n: s.env_var for n, s in specs.items()} == expected
    assert [n for n, s in specs.items() if s.keyless] == ["ollama"]
    assert [n for n, s in specs.items() if s.base_url_env] == ["ollama"]
    assert specs["ollama"].base_url_env == "OLLAMA_BASE_URL"


def test_api_key_key_exactly_for_providers_with_a_key_env_var() -> None:
    for name, spec in all_specs().items():
        assert ("api_key" in spec.config_keys) == (name in KEYED), name
        assert (spec.env_var is not None) == (name in KEYED), name


def test_wires() -> None:
    wires = {n: s.wire for n, s in all_specs().items()}
    assert wires == {
        "openai_codex": "responses",
        "openai": "responses",
        "anthropic": "anthropic_messages",
        "xai": "responses",
        "openrouter": "chat_completions",
        "mistral": "chat_completions",
        "ollama": "chat_completions",
    }
    assert catalog.OPENAI_WIRES[0] == wires["openai"]
    assert "chat_completions" in catalog.OPENAI_WIRES


def test_default_base_urls() -> None:
    urls = {n: s.default_base_url for n, s in all_specs().items()}
    assert urls["ollama"] == "http://localhost:11434/v1"
    for name, url in urls.items():
        if name != "ollama":
            assert url is not None
            assert url.startswith("https://"), name
        assert url is not None
        assert not url.endswith("/"), "adapters append the resource path"


@pytest.mark.parametrize("name", NAMES)
def test_default_model_is_in_the_catalog(name: str) -> None:
    spec = spec_of(name)
    assert spec.default_model in {m.id for m in spec.models}


@pytest.mark.parametrize("name", NAMES)
def test_catalog_ids_are_unique_and_windows_positive(name: str) -> None:
    ids = [m.id for m in spec_of(name).models]
    assert len(ids) == len(set(ids))
    assert all(m.context_window > 0 for m in spec_of(name).models)


def test_setup_fields_mask_every_api_key_and_offer_the_model() -> None:
    for name, spec in all_specs().items():
        by_key = {f.key: f for f in spec.setup_fields}
        assert set(by_key) <= spec.config_keys, name
        assert by_key["default_model"].default == spec.default_model, name
        if name in KEYED:
            assert by_key["api_key"].secret, name
        else:
            assert "api_key" not in by_key, name
        assert [f.key for f in spec.setup_fields if f.secret] == (
            ["api_key"] if name in KEYED else []
        )


def test_ollama_setup_asks_for_the_server_url() -> None:
    field = {f.key: f for f in spec_of("ollama").setup_fields}["base_url"]
    assert field.required
    assert field.default == "http://localhost:11434/v1"


def test_a_clashing_third_party_provider_is_reported_not_silently_kept() -> None:
    host = loaded_host()
    rogue = types.ModuleType("rogue_openai")

    @hookimpl
    def fermix_providers():
        yield ProviderSpec(name="openai", factory="rogue.adapter:Rogue")

    rogue.fermix_providers = fermix_providers  # type: ignore[attr-defined]
    host.register(rogue, name="rogue")
    registry = host.collect()
    # The first-party name is reserved: the built-in stays, the rogue one is refused.
    assert registry.typed(ProviderSpec)["openai"].factory != "rogue.adapter:Rogue"
    [error] = registry.errors
    assert error.name == "openai"
    assert "reserved by first-party providers.openai (fermix-providers 0.1.0)" in error.message
    assert error.sources == ("rogue (in-process)",)


def test_registration_imports_no_http_or_validation_stack() -> None:
    code = (
        "from fermix_providers import catalog\n"
        "import importlib\n"
        "for module in catalog.PLUGIN_MODULES.values():\n"
        "    importlib.import_module(module)\n"
    )
    heavy = ("httpx", "pydantic", "anyio", "openai", "anthropic")
    assert loaded_after(code, heavy) == []


def test_docs_cover_every_provider_model_and_env_var() -> None:
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[3] / "docs" / "providers.md").read_text()
    assert catalog.CATALOG_AS_OF in doc
    for name, spec in all_specs().items():
        assert f"`{name}`" in doc
        for key in spec.config_keys:
            assert f"`{key}`" in doc, key
        for var in (spec.env_var, spec.base_url_env):
            if var:
                assert f"`{var}`" in doc, var
        for model in spec.models:
            assert f"`{model.id}`" in doc, f"{name} model {model.id} is not documented"
        assert f"`{spec.default_base_url}`" in doc, name


def test_entry_point_table_loads_and_one_provider_can_be_disabled() -> None:
    from importlib.metadata import EntryPoint

    eps = [
        EntryPoint(name=f"providers.{name}", value=module, group="fermix")
        for name, module in catalog.PLUGIN_MODULES.items()
    ]
    host = PluginHost()
    records = host.load_entry_points(only=None, disabled=["providers.ollama"], entry_points=eps)
    status = {r.name: r.status for r in records}
    assert status.pop("providers.ollama") == "disabled"
    assert set(status.values()) == {"loaded"}
    registry = host.collect()
    assert registry.errors == []
    ordered = sorted(registry.typed(ProviderSpec).values(), key=lambda s: s.order)
    assert [s.name for s in ordered] == list(NAMES[:-1])
