"""Building providers from routes, lazily, one instance per route, closed together.

A plan names up to seven providers but a healthy turn uses one, so adapters (and the HTTP
stacks behind them) are imported and constructed on first use only. Instances are cached
per :attr:`Route.key` — the connection-relevant part of a route — so a sub-agent on a
smaller model shares the main route's connection pool instead of opening another.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from fermix_core.provider import Provider
from fermix_core.routing.records import Route, RoutePlan, RoutingError
from fermix_core.specs import ProviderSpec, resolve_ref

if TYPE_CHECKING:  # pragma: no cover - typing only
    from fermix_core.messages import Turn
    from fermix_core.plugins.registry import SpecRegistry
    from fermix_core.provider import ChatRequest
    from fermix_core.routing.chain import RouteChain

log = logging.getLogger("fermix.routing")

__all__ = ["ProviderBuildError", "ProviderPool", "RoutingCaller", "build_chain", "build_provider"]


class ProviderBuildError(RoutingError):
    """A route's provider could not be constructed (adapter missing, factory failed)."""


def _scrub(text: str, secret: str | None) -> str:
    # Below a few characters a "key" is no credential, and replacing it would garble words.
    return text.replace(secret, "[REDACTED]") if secret and len(secret) >= 8 else text


def build_provider(
    route: Route,
    registry: SpecRegistry | None = None,
    *,
    http: Any = None,
    auth_store: Any = None,
) -> Provider:
    """Construct the provider for *route*: ``factory(spec, settings)``, uncached.

    The spec comes from *registry* when given (the route must still be registered there),
    else from the route itself. *http* and *auth_store* fill the route's settings when it
    carries none, so one runtime-wide client and auth store serve every adapter.
    """
    spec = route.spec
    if registry is not None:
        registered = registry.typed(ProviderSpec).get(route.name)
        if registered is None:
            raise ProviderBuildError(
                f'provider "{route.name}" is not registered; its plugin may have been disabled '
                "— check `fermix plugins list`"
            )
        spec = registered
    settings = route.settings
    updates: dict[str, Any] = {}
    if settings.http is None and http is not None:
        updates["http"] = http
    if settings.auth_store is None and auth_store is not None:
        updates["auth_store"] = auth_store
    if updates:
        settings = replace(settings, **updates)
    if spec.factory is None:
        raise ProviderBuildError(f'provider "{route.name}" names no factory; report it upstream')
    try:
        factory = resolve_ref(spec.factory)
        provider = factory(spec, settings)
    except Exception as exc:
        message = _scrub(str(exc), settings.api_key)
        raise ProviderBuildError(
            f'could not build provider "{route.name}": {type(exc).__name__}: {message} — '
            "reinstall its plugin or check `fermix doctor`"
        ) from None
    if not isinstance(provider, Provider):
        raise ProviderBuildError(
            f'provider "{route.name}": factory returned {type(provider).__name__}, not a '
            "fermix_core.provider.Provider"
        )
    return provider


class ProviderPool:
    """Builds providers on first use and keeps one per route key until :meth:`aclose_all`."""

    def __init__(
        self,
        registry: SpecRegistry | None = None,
        *,
        http: Any = None,
        auth_store: Any = None,
    ) -> None:
        self.registry = registry
        self.http = http
        self.auth_store = auth_store
        self._built: dict[tuple[Any, ...], Provider] = {}

    def build_provider(self, route: Route) -> Provider:
        """The cached provider for *route*, building it on first request."""
        provider = self._built.get(route.key)
        if provider is None:
            provider = build_provider(
                route, self.registry, http=self.http, auth_store=self.auth_store
            )
            self._built[route.key] = provider
        return provider

    get = build_provider

    def for_plan(self, plan: RoutePlan) -> Mapping[str, Provider]:
        """A mapping for :class:`~fermix_core.routing.chain.RouteChain` that builds lazily."""
        return _LazyProviders(self, plan)

    def __len__(self) -> int:
        return len(self._built)

    async def aclose_all(self) -> None:
        """Close every built provider; one that fails to close never stops the others."""
        built, self._built = list(self._built.values()), {}
        for provider in built:
            try:
                await provider.aclose()
            except Exception:
                log.exception("closing provider %s failed", provider.name or provider)

    async def __aenter__(self) -> ProviderPool:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose_all()


class _LazyProviders(Mapping[str, Provider]):
    def __init__(self, pool: ProviderPool, plan: RoutePlan) -> None:
        self._pool = pool
        self._routes = {route.name: route for route in plan.routes}

    def __getitem__(self, name: str) -> Provider:
        route = self._routes.get(name)
        if route is None:
            raise KeyError(name)
        return self._pool.build_provider(route)

    def __iter__(self) -> Iterator[str]:
        return iter(self._routes)

    def __len__(self) -> int:
        return len(self._routes)


def build_chain(
    plan: RoutePlan,
    registry: SpecRegistry | None = None,
    *,
    emit: Any = None,
    http: Any = None,
    auth_store: Any = None,
    **options: Any,
) -> RouteChain:
    """A :class:`RouteChain` over *plan* whose providers are built lazily and owned by it.

    ``await chain.aclose()`` closes whatever was built. *options* go to the chain
    (``sleep``, ``retry_budget``, ``base_delay``, ``max_delay``).
    """
    from fermix_core.routing.chain import RouteChain

    pool = ProviderPool(registry, http=http, auth_store=auth_store)
    chain = RouteChain(plan, pool.for_plan(plan), emit, **options)
    chain.pool = pool
    return chain


class RoutingCaller:
    """The agent loop's model-caller seam over a :class:`RouteChain`.

    ``initial`` returns the answering :class:`Route`; ``continuation`` takes it back, so a
    tool loop stays pinned to the route that answered first.
    """

    def __init__(self, chain: RouteChain) -> None:
        self.chain = chain

    @property
    def plan(self) -> RoutePlan:
        return self.chain.plan

    async def initial(self, request: ChatRequest) -> tuple[Turn, Route]:
        return await self.chain.initial(request)

    async def continuation(self, route: object, request: ChatRequest) -> Turn:
        if not isinstance(route, Route):
            raise TypeError(
                "RoutingCaller.continuation() needs the Route its initial() returned, not "
                f"{type(route).__name__}"
            )
        return await self.chain.continuation(route, request)

    async def aclose(self) -> None:
        await self.chain.aclose()
