"""Route selection: which provider is primary, which are fallbacks, and in what order.

Selection is primary-flag driven. Exactly one ``[fermix_core.providers.<name>]`` block carries
``primary = true`` (config validation rejects two) and every *other configured* provider is
an automatic fallback in catalog order (``spec.order``), so a hop never depends on plugin
load order or on which block was written first.

Without any flag — an install from before flags existed — the legacy
``[fermix_core.agent] provider`` decides, and without that the first provider in catalog
order whose block is written in config.toml *and* has a real credential. One exception: the
Realtime voice companion reuses the OpenAI key slot, so an OpenAI block holding nothing but
``api_key`` while ``[fermix_core.realtime] enabled = true`` is that Realtime key, and must
not quietly make OpenAI the chat provider. The key still counts as configured: OpenAI is a
fallback, just never promoted by it alone.

Main turns call :func:`resolve_routes` once at boot and keep the plan until restart;
scheduled jobs call it each run, so a job started after a config change already uses it.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from fermix_core.routing.overlay import apply_override, merge_overrides, routing_override
from fermix_core.routing.records import (
    NO_PROVIDER_MESSAGE,
    ProviderState,
    Purpose,
    RouteOverride,
    RoutePlan,
    RoutingError,
)
from fermix_core.routing.survey import make_route, survey

if TYPE_CHECKING:  # pragma: no cover - typing only
    from fermix_core.authfile import AuthStore
    from fermix_core.config import LoadedConfig
    from fermix_core.plugins.registry import SpecRegistry
    from fermix_core.secrets import SecretResolver

log = logging.getLogger("fermix.routing")

__all__ = ["REALTIME_KEY_PROVIDER", "choose_primary", "resolve_routes", "resolve_routes_async"]

#: The provider whose ``api_key`` slot the Realtime voice companion reuses.
REALTIME_KEY_PROVIDER = "openai"


def _realtime_key_only(state: ProviderState, config: LoadedConfig) -> bool:
    if state.name != REALTIME_KEY_PROVIDER or not config.core.fermix_core.realtime.enabled:
        return False
    # ``primary = false`` says nothing about what the block configures.
    return state.file_keys - {"primary"} == {"api_key"}


def _unavailable_primary(config: LoadedConfig) -> str | None:
    """A ``primary = true`` in a block whose plugin is not loaded (kept untouched)."""
    prefix = "fermix_core.providers."
    for path, raw in config.untouched.items():
        if path.startswith(prefix) and isinstance(raw, Mapping) and raw.get("primary") is True:
            return path[len(prefix) :]
    return None


def choose_primary(
    config: LoadedConfig, states: Mapping[str, ProviderState]
) -> tuple[str | None, str | None, str | None]:
    """``(name, chosen_by, reason)``: the primary provider, how it was chosen, or why none.

    ``chosen_by`` is ``flag``, ``legacy`` or ``auto``; ``reason`` explains an empty answer
    and is what callers show the operator.
    """
    flagged = [name for name, state in states.items() if state.flagged_primary]
    if len(flagged) > 1:  # validation rejects this; a hand-built config must not pick one
        raise RoutingError(
            f"more than one provider has primary = true ({', '.join(flagged)}); "
            "keep it on exactly one"
        )
    if flagged:
        return flagged[0], "flag", None
    missing = _unavailable_primary(config)
    if missing is not None:
        return (
            None,
            None,
            f'the primary provider "{missing}" is not available: its plugin is not loaded — '
            "install or re-enable it (`fermix plugins list`), or mark another provider primary",
        )
    legacy = config.core.fermix_core.agent.provider
    if legacy:
        if legacy in states:
            return legacy, "legacy", None
        return (
            None,
            None,
            f'[fermix_core.agent] provider names "{legacy}", which is not available: its plugin '
            "is not loaded — install or re-enable it, or run `fermix setup`",
        )
    for name, state in states.items():
        if state.in_file and state.configured and not _realtime_key_only(state, config):
            return name, "auto", None
    return None, None, NO_PROVIDER_MESSAGE


def resolve_routes(
    config: LoadedConfig,
    registry: SpecRegistry,
    environ: Mapping[str, str] | None = None,
    *,
    purpose: Purpose = "main",
    override: RouteOverride | None = None,
    resolver: SecretResolver | None = None,
    auth_store: AuthStore | None = None,
    host: Any = None,
    states: Mapping[str, ProviderState] | None = None,
) -> RoutePlan:
    """The route plan for *purpose*: primary plus configured fallbacks, overlays applied.

    ``purpose="subagent"``/``"cron"`` lays ``[fermix_core.routing] subagent_*``/``cron_*``
    over the head of the chain; *override* (a job's provider/model pin, a one-shot model)
    goes on top of that. An empty plan is not an error here — its ``reason`` says why, and
    :meth:`RoutePlan.require` raises it — but an overlay that cannot run raises
    :class:`~fermix_core.routing.records.RouteConfigError`.

    *states* lets a caller that already surveyed (the CLI, doctor) skip a second survey;
    *resolver* shares the boot's secret cache.
    """
    if auth_store is None:
        from fermix_core.authfile import AuthStore
        from fermix_core.home import FermixHome

        auth_store = AuthStore(FermixHome(config.path.parent).auth_file)
    if states is None:
        states = survey(
            config, registry, environ, resolver=resolver, auth_store=auth_store, host=host
        )
    name, chosen_by, reason = choose_primary(config, states)
    if name is None:
        return RoutePlan(None, reason=reason, purpose=purpose)
    primary = make_route(states[name], "primary", auth_store=auth_store)
    fallbacks = tuple(
        make_route(state, "fallback", auth_store=auth_store)
        for other, state in states.items()
        if other != name and state.configured
    )
    plan = RoutePlan(primary, fallbacks, purpose=purpose, chosen_by=chosen_by)
    merged = merge_overrides(routing_override(config, purpose), override)
    plan = apply_override(plan, merged, states, auth_store=auth_store)
    for route in plan.routes:
        for note in route.notes:
            line = f"route {route.name}: {note}"
            if line not in config.logged_notes:
                config.logged_notes.add(line)
                log.warning("%s", line)
    if not plan.primary.configured:  # type: ignore[union-attr]
        log.warning(
            "primary provider %s has no usable credential; its calls will fail until it is "
            "configured (run `fermix setup`)",
            plan.primary_provider,
        )
    return plan


async def resolve_routes_async(
    config: LoadedConfig, registry: SpecRegistry, *args: Any, **kwargs: Any
) -> RoutePlan:
    """:func:`resolve_routes` on a worker thread, for callers inside the event loop.

    Resolving may read the OS keyring or run a secret command (both bounded, both blocking),
    and a scheduled job resolving its chain at run time must not stall every other
    conversation while it does.
    """
    import anyio.to_thread

    call = functools.partial(resolve_routes, config, registry, *args, **kwargs)
    return await anyio.to_thread.run_sync(call)
