"""``fermix doctor``'s Ollama row: is the routed model served with the context it needs?

Ollama truncates a prompt that exceeds the context it serves a model with, and says
nothing. The catalog window drives compaction budgets, so a model served with less than
that window loses the start of long conversations without any error. The row asks the
server (:func:`fermix_providers.listing.probe_ollama`) for every Ollama model a turn can
actually reach: the primary, a fallback, or the head of a sub-agent or scheduled-job
overlay. An install that does not route to Ollama gets no row at all.

This module is loaded at every boot as a plugin, so it imports only the hook marker and
the spec type up front; routing, anyio and httpx are imported when the check runs.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from fermix_core.hookspecs import hookimpl
from fermix_core.specs import DoctorCheckSpec

if TYPE_CHECKING:  # pragma: no cover - typing only
    from fermix_core.doctor import CheckResult, DoctorContext

__all__ = ["OLLAMA_CHECK", "check_ollama", "fermix_doctor_checks"]

OLLAMA = "ollama"

OLLAMA_CHECK = DoctorCheckSpec(
    name="ollama",
    label="ollama",
    check="fermix_providers.doctor:check_ollama",
    order=65,
)

_USE_LABELS = {"subagent": "sub-agents", "cron": "scheduled jobs"}


@dataclass
class _Target:
    """One (server, model) pair to probe and every role it plays in routing."""

    base_url: str | None
    model: str
    uses: list[str] = field(default_factory=list)


@hookimpl
def fermix_doctor_checks() -> Iterable[DoctorCheckSpec]:
    return (OLLAMA_CHECK,)


def _shown(url: str) -> str:
    """*url* without a ``user:password@`` part, which is a credential."""
    from urllib.parse import urlsplit, urlunsplit

    try:
        parts = urlsplit(url)
        if parts.username is None and parts.password is None:
            return url
        host = parts.hostname or ""
        netloc = f"{host}:{parts.port}" if parts.port else host
    except ValueError:
        return "(unparseable URL)"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def _targets(ctx: DoctorContext) -> list[_Target]:
    """The Ollama routes a turn can reach, deduplicated by server and model.

    Survey once and reuse it for every purpose: surveying resolves secrets, which may read
    the keyring or run a command, and must not happen three times for one row.
    """
    from fermix_core.authfile import AuthStore
    from fermix_core.routing import RoutingError, resolve_routes
    from fermix_core.routing.overlay import routing_override
    from fermix_core.routing.survey import survey

    config = ctx.config
    auth_store = AuthStore(ctx.home.auth_file)
    states = survey(config, ctx.registry, ctx.environ, auth_store=auth_store, host=ctx.host)
    found: dict[tuple[str | None, str], _Target] = {}

    def add(route: Any, use: str) -> None:
        if route.name != OLLAMA:
            return
        model = route.model or route.spec.default_model
        if not model:
            return
        key = (route.settings.base_url, model)
        target = found.setdefault(key, _Target(route.settings.base_url, model))
        if use not in target.uses:
            target.uses.append(use)

    for purpose in ("main", "subagent", "cron"):
        if purpose != "main" and routing_override(config, purpose) is None:
            continue
        try:
            plan = resolve_routes(
                config,
                ctx.registry,
                ctx.environ,
                purpose=purpose,
                states=states,
                auth_store=auth_store,
                host=ctx.host,
            )
        except RoutingError:
            continue  # the providers row reports a plan that cannot be built
        if purpose == "main":
            for route in plan.routes:
                add(route, route.role)
        elif plan.primary is not None:
            add(plan.primary, _USE_LABELS[purpose])
    return list(found.values())


async def _probe_all(targets: list[_Target]) -> list[Any]:
    from fermix_providers.listing import ollama_catalog_entry, probe_ollama

    results = []
    for target in targets:
        entry = ollama_catalog_entry(target.model)
        window = entry.context_window if entry is not None else None
        results.append(await probe_ollama(target.base_url, target.model, window))
    return results


def check_ollama(ctx: DoctorContext) -> list[CheckResult]:
    """One row per Ollama model in routing: ok, warn (window unverifiable) or fail, with the fix."""
    from fermix_core.doctor import CheckResult, Status

    if ctx.config is None:
        return []  # the config row already fails; there is no routing to inspect
    targets = _targets(ctx)
    if not targets:
        return []
    import anyio

    from fermix_providers.listing import ollama_native_root

    probes = anyio.run(_probe_all, targets)
    rows = []
    for target, probe in zip(targets, probes, strict=True):
        root = ollama_native_root(target.base_url)
        shown = _shown(root)
        detail = probe.message.replace(root, shown)
        fix = probe.fix.replace(root, shown) if probe.fix else None
        if probe.ok:
            status = Status.OK
        elif not probe.verified:
            status = Status.WARN
        else:
            status = Status.FAIL
        rows.append(
            CheckResult(
                f"ollama {target.model} ({', '.join(target.uses)})",
                status,
                detail,
                fix=fix,
            )
        )
    return rows
