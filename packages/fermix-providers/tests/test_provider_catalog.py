"""Effort subsets, per-model ceilings and the clamping rules built on the catalog."""

from __future__ import annotations

import importlib

import pytest
from fermix_core.routing.effort import EffortError, accepted_efforts, clamp_effort, find_model
from fermix_core.specs import REASONING_EFFORTS, ProviderSpec
from fermix_providers import catalog


def spec_of(name: str) -> ProviderSpec:
    return importlib.import_module(catalog.PLUGIN_MODULES[name]).SPEC


def test_catalog_re_exports_core_effort_rules() -> None:
    # Core owns the rules (it applies them at route resolution); the catalog only re-exports.
    assert catalog.clamp_effort is clamp_effort
    assert catalog.accepted_efforts is accepted_efforts
    assert catalog.find_model is find_model
    assert catalog.EffortError is EffortError


def test_provider_effort_subsets() -> None:
    assert spec_of("openai").reasoning_efforts == ("none", "low", "medium", "high", "xhigh", "max")
    assert spec_of("openai_codex").reasoning_efforts == spec_of("openai").reasoning_efforts
    assert spec_of("anthropic").reasoning_efforts == ("low", "medium", "high", "xhigh", "max")
    assert spec_of("xai").reasoning_efforts == ("none", "low", "medium", "high")
    for name in ("openrouter", "mistral", "ollama"):
        assert spec_of(name).reasoning_efforts == ()


@pytest.mark.parametrize("name", catalog.FALLBACK_ORDER)
def test_subsets_are_ordered_slices_of_the_canonical_vocabulary(name: str) -> None:
    efforts = spec_of(name).reasoning_efforts
    ranks = [REASONING_EFFORTS.index(e) for e in efforts]
    # Contiguous and ascending: a subset never skips a level in the middle.
    if ranks:
        assert ranks == list(range(ranks[0], ranks[0] + len(ranks)))


def test_anthropic_has_no_none() -> None:
    assert "none" not in spec_of("anthropic").reasoning_efforts


@pytest.mark.parametrize("name", ["openai", "openai_codex"])
def test_max_only_on_the_gpt_5_6_family(name: str) -> None:
    spec = spec_of(name)
    for model in spec.models:
        if model.id.startswith("gpt-5.6"):
            assert model.max_effort == "max", model.id
        else:
            assert model.max_effort == "xhigh", model.id
    for old in ("gpt-5.5", "gpt-5.4", "gpt-5.4-mini"):
        assert find_model(spec, old) is not None, f"{old} missing from {name}"
    assert any(m.id.startswith("gpt-5.6") for m in spec.models)


@pytest.mark.parametrize("name", catalog.FALLBACK_ORDER)
def test_model_ceilings_are_within_the_provider_subset(name: str) -> None:
    spec = spec_of(name)
    for model in spec.models:
        if model.max_effort is not None:
            assert model.max_effort in spec.reasoning_efforts, model.id


def test_accepted_efforts_follow_the_model_ceiling() -> None:
    spec = spec_of("openai")
    assert accepted_efforts(spec, "gpt-5.6") == REASONING_EFFORTS
    assert accepted_efforts(spec, "gpt-5.4-mini") == ("none", "low", "medium", "high", "xhigh")
    # Without a model, or for a model the catalog does not know, the provider subset applies.
    assert accepted_efforts(spec) == REASONING_EFFORTS
    assert accepted_efforts(spec, "gpt-9-experimental") == REASONING_EFFORTS
    assert accepted_efforts(spec_of("openrouter"), "anthropic/claude-sonnet-4.6") == ()


def test_over_reaching_effort_self_heals_to_the_model_ceiling() -> None:
    codex = spec_of("openai_codex")
    assert clamp_effort(codex, "gpt-5.5", "max") == "xhigh"
    assert clamp_effort(codex, "gpt-5.6-codex", "max") == "max"
    assert clamp_effort(codex, "gpt-5.4", "low") == "low"
    # An unknown model passes the effort through untouched.
    assert clamp_effort(codex, "gpt-6-preview", "max") == "max"


def test_provider_ceiling_and_floor_clamp() -> None:
    assert clamp_effort(spec_of("xai"), "grok-4", "max") == "high"
    assert clamp_effort(spec_of("xai"), None, "xhigh") == "high"
    assert clamp_effort(spec_of("anthropic"), "claude-opus-4-6", "none") == "low"
    assert clamp_effort(spec_of("anthropic"), "claude-opus-4-6", "max") == "max"


@pytest.mark.parametrize("name", ["openrouter", "mistral", "ollama"])
def test_no_effort_is_sent_where_the_provider_takes_none(name: str) -> None:
    assert clamp_effort(spec_of(name), spec_of(name).default_model, "high") is None


@pytest.mark.parametrize("bad", ["extreme", "HIGH", "", "minimal"])
def test_unknown_effort_words_are_errors_naming_the_vocabulary(bad: str) -> None:
    with pytest.raises(EffortError) as info:
        clamp_effort(spec_of("openai"), "gpt-5.6", bad)
    message = str(info.value)
    for level in REASONING_EFFORTS:
        assert level in message
    assert isinstance(info.value, ValueError)


def test_openrouter_ids_are_vendor_prefixed_with_dots() -> None:
    spec = spec_of("openrouter")
    for model in spec.models:
        vendor, _, slug = model.id.partition("/")
        assert vendor, model.id
        assert slug, model.id
    assert find_model(spec, "anthropic/claude-sonnet-4.6") is not None
    assert find_model(spec, "anthropic/claude-sonnet-4-6") is None


def test_mistral_ships_the_three_rolling_tiers() -> None:
    ids = {m.id for m in spec_of("mistral").models}
    assert ids == {"mistral-large-latest", "mistral-medium-latest", "mistral-small-latest"}


def test_anthropic_catalog() -> None:
    ids = {m.id for m in spec_of("anthropic").models}
    assert {"claude-opus-4-6", "claude-sonnet-4-6", "claude-haiku-4-5"} <= ids
    assert all(m.max_effort is None for m in spec_of("anthropic").models)


def test_ollama_vision_only_where_the_model_sees() -> None:
    vision = {m.id: m.vision for m in spec_of("ollama").models}
    assert vision["llama3.2-vision"] is True
    assert vision["gemma3"] is True
    assert vision["llama3.2"] is False
    assert vision["qwen3"] is False


def test_find_model_is_exact() -> None:
    spec = spec_of("openai")
    assert find_model(spec, "gpt-5.6") is not None
    assert find_model(spec, "GPT-5.6") is None
    assert find_model(spec, "gpt-5.6 ") is None


def test_config_keys_builder() -> None:
    assert catalog.config_keys(api_key=False) == catalog.BASE_KEYS
    keys = catalog.config_keys(api_key=True, effort=True, auth_mode=True, fast=True, wire=True)
    assert keys == catalog.BASE_KEYS | {"api_key", "reasoning_effort", "auth_mode", "fast", "wire"}


def test_catalog_is_dated() -> None:
    year, month = catalog.CATALOG_AS_OF.split("-")
    assert len(year) == 4
    assert 1 <= int(month) <= 12
