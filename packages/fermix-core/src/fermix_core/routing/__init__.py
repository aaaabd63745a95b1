"""Provider routing: which provider answers, what happens when it fails, what effort it gets.

* :mod:`~fermix_core.routing.effort` — the reasoning-effort vocabulary and its clamping.
* :mod:`~fermix_core.routing.routes` — :func:`resolve_routes`: primary, fallbacks, overlays.
* :mod:`~fermix_core.routing.policy` — the retry/failover decision tables.
* :mod:`~fermix_core.routing.chain` — :class:`RouteChain`, which acts on those decisions.
* :mod:`~fermix_core.routing.build` — :class:`ProviderPool`, lazy provider construction.
* :mod:`~fermix_core.routing.messages` — :func:`user_message` for failed turns.

Names resolve lazily: provider registration modules import :mod:`.effort` at boot, and that
must not drag pydantic models, anyio or the config system in with it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fermix_core.lazyexports import lazy_exports

if TYPE_CHECKING:  # pragma: no cover - typing only
    from fermix_core.routing.build import ProviderBuildError as ProviderBuildError
    from fermix_core.routing.build import ProviderPool as ProviderPool
    from fermix_core.routing.build import RoutingCaller as RoutingCaller
    from fermix_core.routing.build import build_chain as build_chain
    from fermix_core.routing.build import build_provider as build_provider
    from fermix_core.routing.chain import RouteChain as RouteChain
    from fermix_core.routing.effort import EffortError as EffortError
    from fermix_core.routing.effort import accepted_efforts as accepted_efforts
    from fermix_core.routing.effort import clamp_effort as clamp_effort
    from fermix_core.routing.effort import find_model as find_model
    from fermix_core.routing.effort import resolve_effort as resolve_effort
    from fermix_core.routing.messages import user_message as user_message
    from fermix_core.routing.policy import Action as Action
    from fermix_core.routing.policy import continuation_action as continuation_action
    from fermix_core.routing.policy import initial_action as initial_action
    from fermix_core.routing.records import NO_PROVIDER_MESSAGE as NO_PROVIDER_MESSAGE
    from fermix_core.routing.records import NoProviderConfigured as NoProviderConfigured
    from fermix_core.routing.records import ProviderState as ProviderState
    from fermix_core.routing.records import Route as Route
    from fermix_core.routing.records import RouteConfigError as RouteConfigError
    from fermix_core.routing.records import RouteOverride as RouteOverride
    from fermix_core.routing.records import RoutePlan as RoutePlan
    from fermix_core.routing.records import RoutingError as RoutingError
    from fermix_core.routing.routes import resolve_routes as resolve_routes
    from fermix_core.routing.routes import resolve_routes_async as resolve_routes_async

_LAZY: dict[str, str] = {
    "ProviderBuildError": "build",
    "ProviderPool": "build",
    "RoutingCaller": "build",
    "build_chain": "build",
    "build_provider": "build",
    "RouteChain": "chain",
    "EffortError": "effort",
    "accepted_efforts": "effort",
    "clamp_effort": "effort",
    "find_model": "effort",
    "resolve_effort": "effort",
    "user_message": "messages",
    "Action": "policy",
    "continuation_action": "policy",
    "initial_action": "policy",
    "NO_PROVIDER_MESSAGE": "records",
    "NoProviderConfigured": "records",
    "ProviderState": "records",
    "Route": "records",
    "RouteConfigError": "records",
    "RouteOverride": "records",
    "RoutePlan": "records",
    "RoutingError": "records",
    "resolve_routes": "routes",
    "resolve_routes_async": "routes",
}

__all__ = sorted(_LAZY)


__getattr__ = lazy_exports(__name__, _LAZY, globals())


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
