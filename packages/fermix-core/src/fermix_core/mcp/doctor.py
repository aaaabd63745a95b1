"""``fermix doctor`` rows for ``[mcp.servers.<name>]``: one per configured server.

Offline: is the SDK installed, is the server enabled, can its program be found. With a
daemon running: the live state it reports (``ready`` with its tool count, or the error
that keeps it from starting).
"""

from __future__ import annotations

import importlib.util
import shutil
from typing import Any

from fermix_core.doctor import CheckResult, DoctorContext, Status

__all__ = ["check_mcp"]


def check_mcp(ctx: DoctorContext) -> list[CheckResult]:
    if ctx.config is None:
        return [CheckResult("MCP servers", Status.SKIP, "config did not load")]
    servers = ctx.config.core.mcp.servers
    if not servers:
        return [CheckResult("MCP servers", Status.SKIP, "none configured (see docs/mcp.md)")]
    if importlib.util.find_spec("mcp") is None:
        return [
            CheckResult(
                "MCP servers",
                Status.FAIL,
                f"{len(servers)} configured, but the mcp client is not installed",
                fix="pip install 'fermix-agent[mcp]'",
            )
        ]
    from fermix_core.channels.doctor import daemon_status

    status = daemon_status(ctx.home)
    live = None
    if status is not None and isinstance(status.get("mcp"), list):
        live = {row.get("name"): row for row in status["mcp"] if isinstance(row, dict)}
    return [_row(name, server, live) for name, server in sorted(servers.items())]


def _row(name: str, server: Any, live: dict[str, Any] | None) -> CheckResult:
    label = f"mcp {name}"
    if not server.enabled:
        fix = f"set enabled = true in [mcp.servers.{name}]"
        return CheckResult(label, Status.SKIP, "disabled", fix=fix)
    if server.command is not None and shutil.which(server.argv[0]) is None:
        return CheckResult(
            label,
            Status.FAIL,
            f"program {server.argv[0]!r} is not found",
            fix=f"install it, or put its full path in [mcp.servers.{name}] command",
        )
    if live is None:
        return CheckResult(label, Status.OK, "configured (no daemon running to report its state)")
    row = live.get(name)
    if row is None:
        return CheckResult(
            label, Status.WARN, "not running in the daemon", fix="`fermix restart` to start it"
        )
    if row.get("state") == "ready":
        count = len(row.get("tools", []))
        return CheckResult(label, Status.OK, f"ready ({row.get('transport')}, {count} tools)")
    log = f"logs/mcp-{name}.log" if server.command is not None else "the daemon log"
    return CheckResult(
        label,
        Status.WARN,
        f"{row.get('state')}: {row.get('error') or 'no error recorded'}",
        fix=f"check {log}; fix the config, then `fermix mcp restart {name}`",
    )
