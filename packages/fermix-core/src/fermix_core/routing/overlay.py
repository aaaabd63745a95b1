"""Overlays: running sub-agents, scheduled jobs or one call on another provider/model/effort.

An overlay changes the head of the chain, not the chain's rules. A model without a
provider runs on the primary (a cross-provider worker must say which provider); an explicit
provider must be configured; and a model the catalog files under a *different* provider
than the one named is a mis-pairing that fails loud here — sending an Ollama slug to
OpenRouter would otherwise fail on every run with a provider error that names neither
setting. Effort overlays apply wherever effort exists and skip the providers that take none.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from fermix_core.routing.effort import find_model
from fermix_core.routing.records import (
    ProviderState,
    Purpose,
    Route,
    RouteConfigError,
    RouteOverride,
    RoutePlan,
)
from fermix_core.routing.survey import make_route

if TYPE_CHECKING:  # pragma: no cover - typing only
    from fermix_core.config import LoadedConfig

log = logging.getLogger("fermix.routing")

__all__ = ["apply_override", "catalog_owners", "merge_overrides", "routing_override"]


def routing_override(config: LoadedConfig, purpose: Purpose) -> RouteOverride | None:
    """``[fermix_core.routing] subagent_*`` or ``cron_*`` as an override; ``None`` for main."""
    if purpose == "main":
        return None
    routing = config.core.fermix_core.routing
    prefix = "subagent" if purpose == "subagent" else "cron"
    found = RouteOverride(
        provider=getattr(routing, f"{prefix}_provider"),
        model=getattr(routing, f"{prefix}_model"),
        reasoning_effort=getattr(routing, f"{prefix}_reasoning_effort"),
        origin=f"[fermix_core.routing] {prefix}_*",
    )
    return None if found.empty else found


def merge_overrides(
    overlay: RouteOverride | None, override: RouteOverride | None
) -> RouteOverride | None:
    """Lay an explicit *override* (a job pin, a one-shot model) over the routing *overlay*.

    A pin that names a provider or model replaces the overlay's provider and model outright
    — mixing a pinned provider with the overlay's model would invent a pairing nobody
    configured — while the overlay's effort still applies unless the pin sets its own.
    """
    if override is None or override.empty:
        return overlay
    if overlay is None:
        return override
    effort = override.reasoning_effort or overlay.reasoning_effort
    if override.provider is None and override.model is None:
        return replace(overlay, reasoning_effort=effort)
    return replace(override, reasoning_effort=effort)


def catalog_owners(states: Mapping[str, ProviderState], model: str) -> list[str]:
    """Providers whose catalog lists *model*, in catalog order."""
    return [name for name, state in states.items() if find_model(state.spec, model) is not None]


def _check_pairing(states: Mapping[str, ProviderState], provider: str, model: str, origin: str):
    owners = catalog_owners(states, model)
    if not owners or provider in owners:
        return
    owner = owners[0]
    raise RouteConfigError(
        f'{origin}: model "{model}" is a {owner} model in the catalog, not a {provider} one; '
        f'set the provider to "{owner}" or choose a {provider} model'
    )


def apply_override(
    plan: RoutePlan,
    override: RouteOverride | None,
    states: Mapping[str, ProviderState],
    *,
    auth_store: Any = None,
) -> RoutePlan:
    """*plan* with *override* applied to its head (and its effort to every effort route).

    An empty plan stays empty: an overlay cannot conjure a primary the operator never set up.
    """
    if override is None or override.empty or plan.primary is None:
        return plan
    origin = override.origin
    primary = plan.primary
    head_name = override.provider or primary.name
    state = states.get(head_name)
    if state is None:
        known = ", ".join(f'"{n}"' for n in states) or "none"
        raise RouteConfigError(
            f'{origin}: unknown provider "{head_name}"; known providers: {known}'
        )
    if override.model:
        model = override.model
        if override.provider:
            _check_pairing(states, head_name, model, origin)
        elif find_model(state.spec, model) is None and catalog_owners(states, model):
            log.warning(
                "%s: model %s is not in %s's catalog but runs on the primary as configured; "
                "name its provider to run it elsewhere",
                origin,
                model,
                head_name,
            )
    else:
        model = primary.model if head_name == primary.name else state.model
    # After the pairing check: a mis-paired model is wrong whatever the credentials.
    if override.provider and head_name != primary.name and not state.configured:
        detail = f" ({state.credential.problem})" if state.credential.problem else ""
        raise RouteConfigError(
            f'{origin}: provider "{head_name}" is not configured{detail} — run `fermix setup` '
            "to configure it, or remove the setting to use the primary provider"
        )

    effort = override.reasoning_effort
    head = make_route(
        state,
        "primary",
        model=model,
        effort=effort if effort and state.spec.reasoning_efforts else None,
        auth_store=auth_store,
    )
    fallbacks: list[Route] = []
    for route in plan.routes:
        if route.name == head_name:
            continue
        fallback = make_route(
            states[route.name],
            "fallback",
            model=route.model,
            effort=effort if effort and route.spec.reasoning_efforts else None,
            auth_store=auth_store,
        )
        fallbacks.append(fallback)
    fallbacks.sort(key=lambda r: (r.spec.order, r.name))
    return replace(plan, primary=head, fallbacks=tuple(fallbacks), chosen_by="override")
