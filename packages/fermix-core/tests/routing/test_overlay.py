"""Routing overlays for sub-agents and scheduled jobs, and explicit pins on top of them."""

from __future__ import annotations

import logging

import pytest
from fermix_core.routing import RouteConfigError, RouteOverride
from fermix_core.routing.overlay import merge_overrides, routing_override
from fermix_core.routing.routes import resolve_routes

PROVIDERS = """
[fermix_core.providers.openai]
primary = true
api_key = "sk-o"
default_model = "gpt-new"
reasoning_effort = "max"

[fermix_core.providers.anthropic]
api_key = "sk-a"
reasoning_effort = "high"

[fermix_core.providers.gateway]
api_key = "gw"

[fermix_core.providers.local]
base_url = "http://127.0.0.1:11434/v1"
"""


def with_routing(body: str) -> str:
    return PROVIDERS + "\n[fermix_core.routing]\n" + body


def test_main_turns_ignore_the_routing_section(load, registry) -> None:
    config = load(with_routing('subagent_model = "gpt-mini"\ncron_provider = "gateway"\n'))
    plan = resolve_routes(config, registry, {})
    assert plan.primary.model == "gpt-new"
    assert routing_override(config, "main") is None


def test_no_overlay_means_workers_inherit_the_main_chain(load, registry) -> None:
    config = load(PROVIDERS)
    main = resolve_routes(config, registry, {})
    for purpose in ("subagent", "cron"):
        plan = resolve_routes(config, registry, {}, purpose=purpose)
        assert [(r.name, r.model, r.effort) for r in plan] == [
            (r.name, r.model, r.effort) for r in main
        ]
        assert plan.purpose == purpose


def test_a_model_without_a_provider_runs_on_the_primary_and_is_reclamped(load, registry) -> None:
    config = load(with_routing('subagent_model = "gpt-mini"\n'))
    plan = resolve_routes(config, registry, {}, purpose="subagent")
    assert plan.primary_provider == "openai"
    assert plan.primary.model == "gpt-mini"
    assert plan.primary.effort == "xhigh"  # max is above gpt-mini's ceiling
    assert plan.fallback_providers == ["anthropic", "gateway", "local"]
    assert plan.get("anthropic").model == "claude-a"  # fallbacks keep their own models


def test_an_explicit_provider_moves_the_head_and_keeps_catalog_order(load, registry) -> None:
    config = load(with_routing('cron_provider = "gateway"\n'))
    plan = resolve_routes(config, registry, {}, purpose="cron")
    assert plan.primary_provider == "gateway"
    assert plan.primary.model == "vendor/model-1"
    assert plan.primary.role == "primary"
    # The main primary becomes a fallback, in catalog order like the others.
    assert plan.fallback_providers == ["openai", "anthropic", "local"]
    assert all(r.role == "fallback" for r in plan.fallbacks)
    assert plan.chosen_by == "override"


def test_effort_overlays_skip_providers_without_efforts(load, registry) -> None:
    config = load(with_routing('cron_provider = "local"\ncron_reasoning_effort = "none"\n'))
    plan = resolve_routes(config, registry, {}, purpose="cron")
    assert plan.primary_provider == "local"
    assert plan.primary.effort is None  # the local server takes none
    assert plan.get("openai").effort == "none"
    assert plan.get("anthropic").effort == "low"  # floor: no "none" there
    assert plan.get("gateway").effort is None


def test_an_effort_only_overlay_lowers_the_whole_chain(load, registry) -> None:
    config = load(with_routing('subagent_reasoning_effort = "low"\n'))
    plan = resolve_routes(config, registry, {}, purpose="subagent")
    assert [(r.name, r.effort) for r in plan] == [
        ("openai", "low"),
        ("anthropic", "low"),
        ("gateway", None),
        ("local", None),
    ]


def test_a_mispaired_model_fails_loud(load, registry) -> None:
    # "qwen3" is a local-server model in the catalog, not a gateway one.
    config = load(with_routing('cron_provider = "gateway"\ncron_model = "qwen3"\n'))
    with pytest.raises(RouteConfigError) as info:
        resolve_routes(config, registry, {}, purpose="cron")
    message = str(info.value)
    assert "[fermix_core.routing] cron_*" in message
    assert '"qwen3"' in message and "local" in message and "gateway" in message


def test_a_model_unknown_to_every_catalog_passes_with_an_explicit_provider(load, registry) -> None:
    config = load(with_routing('cron_provider = "gateway"\ncron_model = "vendor/brand-new"\n'))
    plan = resolve_routes(config, registry, {}, purpose="cron")
    assert (plan.primary_provider, plan.primary.model) == ("gateway", "vendor/brand-new")


def test_an_implicit_provider_with_another_providers_model_only_warns(
    load, registry, caplog
) -> None:
    config = load(with_routing('subagent_model = "claude-a"\n'))
    with caplog.at_level(logging.WARNING, logger="fermix.routing"):
        plan = resolve_routes(config, registry, {}, purpose="subagent")
    assert (plan.primary_provider, plan.primary.model) == ("openai", "claude-a")
    assert any("runs on the primary" in r.getMessage() for r in caplog.records)


def test_an_unconfigured_overlay_provider_fails_loud(load, registry) -> None:
    config = load(with_routing('subagent_provider = "subscription"\n'))
    with pytest.raises(RouteConfigError) as info:
        resolve_routes(config, registry, {}, purpose="subagent")
    assert '"subscription" is not configured' in str(info.value)
    assert "fermix setup" in str(info.value)


def test_an_unknown_pin_provider_lists_the_known_ones(load, registry) -> None:
    config = load(PROVIDERS)
    with pytest.raises(RouteConfigError, match="unknown provider"):
        resolve_routes(config, registry, {}, override=RouteOverride(provider="nope", model="x"))


def test_a_job_pin_replaces_the_cron_overlay_but_keeps_its_effort(load, registry) -> None:
    config = load(with_routing('cron_provider = "gateway"\ncron_reasoning_effort = "medium"\n'))
    pin = RouteOverride(provider="anthropic", model="claude-a", origin="job 42")
    plan = resolve_routes(config, registry, {}, purpose="cron", override=pin)
    assert (plan.primary_provider, plan.primary.model, plan.primary.effort) == (
        "anthropic",
        "claude-a",
        "medium",
    )


def test_a_one_shot_model_runs_on_the_primary(load, registry) -> None:
    config = load(with_routing('subagent_provider = "anthropic"\n'))
    plan = resolve_routes(
        config, registry, {}, purpose="subagent", override=RouteOverride(model="gpt-old")
    )
    assert (plan.primary_provider, plan.primary.model, plan.primary.effort) == (
        "openai",
        "gpt-old",
        "xhigh",
    )


def test_an_empty_plan_stays_empty_under_an_overlay(load, registry) -> None:
    config = load('[fermix_core.routing]\ncron_provider = "gateway"\n')
    plan = resolve_routes(config, registry, {}, purpose="cron")
    assert plan.empty and plan.reason


def test_merge_rules() -> None:
    overlay = RouteOverride("gateway", "vendor/model-1", "low", origin="overlay")
    assert merge_overrides(None, None) is None
    assert merge_overrides(overlay, None) is overlay
    assert merge_overrides(overlay, RouteOverride()) is overlay
    effort_only = merge_overrides(overlay, RouteOverride(reasoning_effort="high"))
    assert (effort_only.provider, effort_only.model, effort_only.reasoning_effort) == (
        "gateway",
        "vendor/model-1",
        "high",
    )
    pinned = merge_overrides(overlay, RouteOverride(provider="openai", origin="pin"))
    assert (pinned.provider, pinned.model, pinned.reasoning_effort) == ("openai", None, "low")
    assert pinned.origin == "pin"
