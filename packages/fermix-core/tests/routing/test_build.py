"""Lazy, cached provider construction from routes; closing everything once."""

from __future__ import annotations

from typing import Any

import pytest
from fermix_core.messages import Message
from fermix_core.provider import ChatRequest, Provider, ProviderSettings
from fermix_core.routing import (
    ProviderBuildError,
    ProviderPool,
    RouteChain,
    RoutingCaller,
    build_chain,
    build_provider,
)
from fermix_core.routing.records import Route, RoutePlan
from fermix_core.routing.routes import resolve_routes
from fermix_core.specs import ProviderSpec
from fermix_core.testing import ScriptedProvider

pytestmark = pytest.mark.anyio

OPENAI_AND_GATEWAY = """
[fermix_core.providers.openai]
primary = true
api_key = "sk-openai-SECRET"

[fermix_core.providers.gateway]
api_key = "gw-SECRET"
"""


def spec(name: str, factory: Any) -> ProviderSpec:
    return ProviderSpec(name=name, factory=factory, default_model="m")


def route_for(s: ProviderSpec, *, api_key: str | None = None, model: str = "m") -> Route:
    settings = ProviderSettings(name=s.name, default_model=model, api_key=api_key)
    return Route(name=s.name, spec=s, settings=settings, role="primary")


async def test_a_plan_builds_only_what_it_calls(load, registry, built) -> None:
    plan = resolve_routes(load(OPENAI_AND_GATEWAY), registry, {})
    pool = ProviderPool(registry, http="shared-client")
    providers = pool.for_plan(plan)
    assert len(pool) == 0 and list(providers) == ["openai", "gateway"]
    openai = providers["openai"]
    assert isinstance(openai, ScriptedProvider) and len(pool) == 1
    assert openai.settings.api_key == "sk-openai-SECRET"  # type: ignore[attr-defined]
    assert openai.settings.http == "shared-client"  # type: ignore[attr-defined]
    assert providers["openai"] is openai  # cached
    assert [p.name for p in built] == ["openai"]  # the fallback was never constructed
    with pytest.raises(KeyError):
        providers["anthropic"]
    await pool.aclose_all()
    assert openai.closed and len(pool) == 0


async def test_routes_differing_only_in_model_share_one_instance() -> None:
    made: list[ProviderSettings] = []

    def factory(s: ProviderSpec, settings: ProviderSettings) -> Provider:
        made.append(settings)
        return ScriptedProvider(name=s.name)

    s = spec("acme", factory)
    pool = ProviderPool()
    main = pool.build_provider(route_for(s, model="big"))
    worker = pool.build_provider(route_for(s, model="small"))
    assert main is worker and len(made) == 1


async def test_a_lazily_built_provider_serves_the_chain() -> None:
    s = spec("acme", lambda spec, settings: ScriptedProvider(["built lazily"], name=spec.name))
    plan = RoutePlan(route_for(s))
    async with ProviderPool() as pool:
        chain = RouteChain(plan, pool.for_plan(plan))
        turn, won = await chain.initial(ChatRequest(messages=[Message.user("hi")]))
        provider = pool.build_provider(won)
    assert turn.content == "built lazily"
    assert provider.closed  # type: ignore[attr-defined]


def test_a_factory_that_is_not_importable_is_a_typed_error() -> None:
    s = spec("ghost", "fermix_no_such_module.adapter:Ghost")
    with pytest.raises(ProviderBuildError) as info:
        build_provider(route_for(s))
    assert "ghost" in str(info.value) and "reinstall" in str(info.value)


def test_a_failing_factory_never_leaks_the_key() -> None:
    def factory(s: ProviderSpec, settings: ProviderSettings) -> Provider:
        raise ValueError(f"bad key {settings.api_key}")

    with pytest.raises(ProviderBuildError) as info:
        build_provider(route_for(spec("acme", factory), api_key="sk-LEAKY-123"))
    assert "sk-LEAKY-123" not in str(info.value)
    assert "[REDACTED]" in str(info.value)
    assert info.value.__cause__ is None and info.value.__suppress_context__


def test_a_factory_must_return_a_provider() -> None:
    with pytest.raises(ProviderBuildError, match=r"not a fermix_core\.provider\.Provider"):
        build_provider(route_for(spec("acme", lambda s, settings: object())))


def test_a_route_whose_provider_is_no_longer_registered(registry) -> None:
    s = spec("vanished", lambda s, settings: ScriptedProvider(name="vanished"))
    with pytest.raises(ProviderBuildError, match="not registered"):
        build_provider(route_for(s), registry)


async def test_closing_continues_past_a_provider_that_fails_to_close() -> None:
    class Stubborn(ScriptedProvider):
        async def aclose(self) -> None:
            raise RuntimeError("socket already gone")

    first = spec("first", lambda s, settings: Stubborn(name="first"))
    second = spec("second", lambda s, settings: ScriptedProvider(name="second"))
    pool = ProviderPool()
    pool.build_provider(route_for(first))
    other = pool.build_provider(route_for(second))
    await pool.aclose_all()
    assert other.closed  # type: ignore[attr-defined]
    await pool.aclose_all()  # idempotent


async def test_build_chain_owns_and_closes_what_it_built(load, registry, built) -> None:
    plan = resolve_routes(load(OPENAI_AND_GATEWAY), registry, {})
    sleeps: list[float] = []

    async def sleep(seconds: float) -> None:
        sleeps.append(seconds)

    chain = build_chain(plan, registry, sleep=sleep, retry_budget=1)
    caller = RoutingCaller(chain)
    assert caller.plan is plan and chain.retry_budget == 1
    assert built == []  # nothing is constructed before the first call
    chain.providers["openai"].add("hello")  # type: ignore[attr-defined]
    turn, route = await caller.initial(ChatRequest(messages=[Message.user("hi")]))
    assert (turn.content, route.name) == ("hello", "openai")
    chain.providers["openai"].add("again")  # type: ignore[attr-defined]
    follow = await caller.continuation(route, ChatRequest(messages=[Message.user("more")]))
    assert follow.content == "again"
    with pytest.raises(TypeError, match="Route its initial"):
        await caller.continuation("openai", ChatRequest(messages=[Message.user("x")]))
    await caller.aclose()
    assert [p.name for p in built] == ["openai"] and built[0].closed


async def test_a_chain_over_borrowed_providers_does_not_close_them() -> None:
    s = spec("acme", lambda spec, settings: ScriptedProvider(name="acme"))
    borrowed = ScriptedProvider(name="acme")
    chain = RouteChain(RoutePlan(route_for(s)), {"acme": borrowed})
    await chain.aclose()
    assert not borrowed.closed


async def test_an_unbuildable_fallback_is_skipped_not_surfaced(caplog) -> None:
    from fermix_core.provider import ErrorKind, ProviderError

    limit = ProviderError(ErrorKind.RATE_LIMIT, "slow down", retry_after_seconds=120)
    good = spec("good", lambda s, settings: ScriptedProvider([limit], name="good"))
    broken = spec("broken", "fermix_no_such_module.adapter:Broken")
    spare = spec("spare", lambda s, settings: ScriptedProvider(["spare answers"], name="spare"))
    events: list[tuple[str, dict]] = []
    plan = RoutePlan(
        route_for(good),
        (
            Route("broken", broken, ProviderSettings(name="broken"), "fallback"),
            Route("spare", spare, ProviderSettings(name="spare"), "fallback"),
        ),
    )
    chain = build_chain(plan, emit=lambda name, **data: events.append((name, data)))
    turn, won = await chain.initial(ChatRequest(messages=[Message.user("hi")]))
    assert (turn.content, won.name) == ("spare answers", "spare")
    assert [(d["from"], d["to"]) for n, d in events if n == "provider.failover"] == [
        ("good", "spare")
    ]
    assert any("broken cannot be used" in r.getMessage() for r in caplog.records)

    # With no usable fallback left, the error that needed one surfaces, not the build error.
    limit_again = ProviderError(ErrorKind.RATE_LIMIT, "slow down", retry_after_seconds=120)
    again = spec("good", lambda s, settings: ScriptedProvider([limit_again], name="good"))
    chain = build_chain(RoutePlan(route_for(again), plan.fallbacks[:1]))
    with pytest.raises(ProviderError) as info:
        await chain.initial(ChatRequest(messages=[Message.user("hi")]))
    assert info.value is limit_again


async def test_an_unbuildable_primary_is_loud() -> None:
    broken = spec("broken", "fermix_no_such_module.adapter:Broken")
    chain = build_chain(RoutePlan(route_for(broken)))
    with pytest.raises(ProviderBuildError):
        await chain.initial(ChatRequest(messages=[Message.user("hi")]))
