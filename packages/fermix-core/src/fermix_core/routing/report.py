"""The routing picture for people: ``fermix providers list`` and the doctor's routes row.

Both read the same survey and plan the runtime would build, so what the operator is shown
is what a turn would actually do — including an effort that will be clamped and an overlay
that would fail at spawn. Key *sources* are shown, never key values.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from fermix_core.routing.effort import resolve_effort
from fermix_core.routing.records import RoutePlan, RoutingError
from fermix_core.routing.routes import resolve_routes
from fermix_core.routing.survey import survey

if TYPE_CHECKING:  # pragma: no cover - typing only
    from fermix_core.config import LoadedConfig
    from fermix_core.doctor import CheckResult, DoctorContext
    from fermix_core.plugins.registry import SpecRegistry

__all__ = ["STATUS_LABELS", "check_routes", "providers_report"]

STATUS_LABELS = {"primary": "Primary", "fallback": "Fallback", None: "Not configured"}


def _shown_url(url: str | None) -> str | None:
    """A base URL without any ``user:password@`` part, which would be a credential."""
    if not url:
        return url
    try:
        parts = urlsplit(url)
    except ValueError:
        return None
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def _overlay(config: LoadedConfig, registry: SpecRegistry, purpose: str, **kw: Any) -> Any:
    from fermix_core.routing.overlay import routing_override

    if routing_override(config, purpose) is None:  # type: ignore[arg-type]
        return None
    try:
        plan = resolve_routes(config, registry, purpose=purpose, **kw)  # type: ignore[arg-type]
    except RoutingError as exc:
        return {"error": str(exc)}
    if plan.primary is None:
        return {"error": plan.reason}
    head = plan.primary
    return {"provider": head.name, "model": head.model, "reasoning_effort": head.effort}


def providers_report(
    config: LoadedConfig,
    registry: SpecRegistry,
    environ: Mapping[str, str] | None = None,
    *,
    host: Any = None,
    auth_store: Any = None,
) -> dict[str, Any]:
    """Every registered provider with its routing status, as plain data for JSON or a table."""
    if auth_store is None:
        from fermix_core.authfile import AuthStore
        from fermix_core.home import FermixHome

        auth_store = AuthStore(FermixHome(config.path.parent).auth_file)
    states = survey(config, registry, environ, auth_store=auth_store, host=host)
    problem: str | None = None
    plan: RoutePlan | None
    try:
        plan = resolve_routes(config, registry, environ, states=states, auth_store=auth_store)
    except RoutingError as exc:
        plan, problem = None, str(exc)
    if plan is not None and plan.primary is None:
        problem = plan.reason
    rows = []
    for name, state in states.items():
        route = plan.get(name) if plan is not None else None
        if route is not None:
            model, effort, notes = route.model, route.effort, list(route.notes)
        else:
            resolution = resolve_effort(state.spec, state.model, state.configured_effort)
            model, effort = state.model, resolution.effort
            notes = [resolution.note] if resolution.note else []
        rows.append(
            {
                "name": name,
                "label": state.label,
                "status": STATUS_LABELS[route.role if route is not None else None],
                "model": model,
                "reasoning_effort": effort,
                "auth_mode": state.auth_mode,
                "key_source": state.credential.source,
                "configured": state.configured,
                "problem": None if state.configured else state.credential.problem,
                "base_url": _shown_url(state.base_url),
                "wire": state.wire,
                "notes": notes,
            }
        )
    kw = {"states": states, "auth_store": auth_store}
    return {
        "primary": plan.primary_provider if plan is not None else None,
        "fallbacks": plan.fallback_providers if plan is not None else [],
        "chosen_by": plan.chosen_by if plan is not None else None,
        "problem": problem,
        "routing": {
            "subagent": _overlay(config, registry, "subagent", **kw),
            "cron": _overlay(config, registry, "cron", **kw),
        },
        "providers": rows,
    }


def check_routes(ctx: DoctorContext) -> list[CheckResult]:
    """Doctor rows: the primary, the configured fallbacks, clamps and overlay problems."""
    from fermix_core.doctor import CheckResult, Status

    if ctx.config is None:
        return [CheckResult("providers", Status.SKIP, "config did not load")]
    report = providers_report(ctx.config, ctx.registry, ctx.environ, host=ctx.host)
    rows_by_name = {row["name"]: row for row in report["providers"]}
    primary = report["primary"]
    if primary is None:
        return [
            CheckResult(
                "providers",
                Status.FAIL,
                report["problem"] or "no provider configured",
                fix="run `fermix setup` to configure a provider",
            )
        ]
    row = rows_by_name[primary]
    effort = f", effort {row['reasoning_effort']}" if row["reasoning_effort"] else ""
    detail = f"{primary} ({row['model']}{effort}; key: {row['key_source']})"
    results = []
    if row["configured"]:
        results.append(CheckResult("primary provider", Status.OK, detail))
    else:
        results.append(
            CheckResult(
                "primary provider",
                Status.FAIL,
                f"{detail}: {row['problem'] or 'not configured'}",
                fix="run `fermix setup` to add its credentials, or mark a configured provider "
                "primary",
            )
        )
    fallbacks = report["fallbacks"]
    results.append(
        CheckResult(
            "fallback providers",
            Status.OK,
            ", ".join(fallbacks) if fallbacks else "none configured (no failover)",
        )
    )
    for item in report["providers"]:
        if item["status"] == "Not configured":
            continue
        for note in item["notes"]:
            results.append(
                CheckResult(
                    f"provider {item['name']}",
                    Status.WARN,
                    note,
                    fix="set a reasoning_effort the model accepts in "
                    f"[fermix_core.providers.{item['name']}]",
                )
            )
    for purpose, overlay in report["routing"].items():
        if isinstance(overlay, dict) and overlay.get("error"):
            results.append(
                CheckResult(
                    f"routing ({purpose})",
                    Status.FAIL,
                    overlay["error"],
                    fix=f"fix [fermix_core.routing] {purpose}_* in config.toml",
                )
            )
    return results
