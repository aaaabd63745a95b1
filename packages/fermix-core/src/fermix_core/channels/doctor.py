"""``fermix doctor`` rows for channels: one per registered channel, plus streaming mismatches.

Offline checks first — is it enabled, does its section authorize anyone, can its adapter be
imported — then, when a daemon is running, the live health it reports (state, last error,
the last delivery failure such as a closed WhatsApp 24-hour window).
"""

from __future__ import annotations

import logging
from typing import Any

from fermix_core.channels.runtime import (
    build_problem,
    channel_enabled,
    channel_section,
    trust_refusal,
)
from fermix_core.doctor import CheckResult, DoctorContext, Status
from fermix_core.specs import ChannelSpec, resolve_ref

__all__ = ["check_channels", "daemon_channel_health", "daemon_status"]

log = logging.getLogger("fermix.doctor")

_LIVE_STATUS = {
    "ready": Status.OK,
    "starting": Status.WARN,
    "degraded": Status.WARN,
    "stopped": Status.WARN,
    "refused": Status.WARN,
}


def daemon_status(home: Any, timeout: float = 3.0) -> dict[str, Any] | None:
    """The running daemon's ``status`` answer; ``None`` when none answers."""
    if not home.daemon_sock.exists():
        return None
    import anyio

    from fermix_core.daemon.client import DaemonClient, DaemonUnavailable

    async def ask() -> dict[str, Any]:
        with anyio.fail_after(timeout):
            async with DaemonClient(home.daemon_sock) as client:
                return await client.call("status")

    try:
        result = anyio.run(ask)
    except (DaemonUnavailable, TimeoutError, OSError, RuntimeError) as exc:
        log.debug("no daemon status: %s", exc)
        return None
    except Exception as exc:  # a daemon answering garbage must not break doctor
        log.debug("no daemon status: %s: %s", type(exc).__name__, exc)
        return None
    return result if isinstance(result, dict) else None


def daemon_channel_health(home: Any, timeout: float = 3.0) -> dict[str, dict[str, Any]] | None:
    """Channel health from the running daemon, by name; ``None`` when none answers."""
    result = daemon_status(home, timeout)
    channels = result.get("channels") if result is not None else None
    if not isinstance(channels, list):
        return None
    return {c["name"]: c for c in channels if isinstance(c, dict) and "name" in c}


def check_channels(ctx: DoctorContext) -> list[CheckResult]:
    if ctx.config is None:
        return [CheckResult("channels", Status.SKIP, "config did not load")]
    specs = ctx.registry.typed(ChannelSpec)
    if not specs:
        return [
            CheckResult(
                "channels",
                Status.WARN,
                "no channel is registered",
                fix='install the channels: pip install "fermix-agent[channels]"',
            )
        ]
    live = daemon_channel_health(ctx.home)
    rows: list[CheckResult] = []
    for name, spec in specs.items():
        rows.extend(_rows(ctx, spec, live.get(name) if live is not None else None, live))
    return rows


def _rows(
    ctx: DoctorContext,
    spec: ChannelSpec,
    health: dict[str, Any] | None,
    live: dict[str, Any] | None,
) -> list[CheckResult]:
    label = f"channel {spec.name}"
    section = channel_section(spec, ctx.config)
    if not channel_enabled(spec, section):
        return [
            CheckResult(
                label,
                Status.SKIP,
                "disabled",
                fix=f"set enabled = true in [fermix_channels.{spec.name}] to use it",
            )
        ]
    rows: list[CheckResult] = []
    refusal = trust_refusal(spec, section)
    problem = None
    try:
        if spec.factory is not None:
            resolve_ref(spec.factory)
    except Exception as exc:
        problem = build_problem(spec, ctx.registry.source_of(spec), exc)
    if problem is not None:
        rows.append(CheckResult(label, Status.WARN, problem, fix=_fix_of(problem)))
    elif refusal is not None:
        rows.append(
            CheckResult(
                label,
                Status.WARN,
                f"refused: {refusal}",
                fix="`fermix setup --reconfigure`, or set owner_user_id in config.toml",
            )
        )
    elif health is not None:
        rows.append(_live_row(label, health))
    else:
        where = "no daemon is running" if live is None else "the daemon does not report it"
        rows.append(CheckResult(label, Status.OK, f"enabled, adapter importable ({where})"))
    mismatch = _streaming_mismatch(spec, section)
    if mismatch is not None:
        rows.append(mismatch)
    return rows


def _live_row(label: str, health: dict[str, Any]) -> CheckResult:
    state = str(health.get("state") or "unknown")
    parts = [state]
    if health.get("error"):
        parts.append(str(health["error"]))
    if health.get("last_inbound"):
        parts.append(f"last inbound {health['last_inbound']}")
    if health.get("last_outbound"):
        parts.append(f"last outbound {health['last_outbound']}")
    status = _LIVE_STATUS.get(state, Status.WARN)
    delivery = health.get("last_delivery_error")
    if delivery:
        parts.append(f"last undelivered reply: {delivery}")
        status = Status.WARN if status is Status.OK else status
    fix = None
    if status is not Status.OK:
        fix = "see `fermix logs` for the channel's errors; `fermix restart` after fixing config"
    return CheckResult(label, status, "; ".join(parts), fix=fix)


def _fix_of(problem: str) -> str:
    if "pip install" in problem:
        start = problem.index("pip install")
        return problem[start:].split("`", 1)[0]
    return "upgrade the plugin that registers the channel, or disable the channel"


def _streaming_mismatch(spec: ChannelSpec, section: Any) -> CheckResult | None:
    """An explicit ``streaming = "draft"`` on a channel that cannot edit does not stream."""
    if getattr(section, "streaming", None) != "draft" or spec.supports_draft:
        return None
    return CheckResult(
        f"channel {spec.name} streaming",
        Status.WARN,
        'streaming = "draft" needs a channel that can edit its messages; '
        f"{spec.name} cannot, so its turns do not stream at all",
        fix=f'set streaming = "block" (or remove the key) in [fermix_channels.{spec.name}]',
    )
