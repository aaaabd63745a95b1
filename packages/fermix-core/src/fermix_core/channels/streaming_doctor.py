"""``fermix doctor``'s channel streaming row: a configured mode the channel cannot run.

An explicit ``streaming = "draft"`` on a channel that cannot edit its own messages is not
an error (config load accepts it) and does not fall back to ``"block"`` at runtime: the
turn simply does not stream. This row is where that mismatch surfaces.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fermix_core.doctor import CheckResult, DoctorContext, Status
from fermix_core.gateway.reply import streaming_mode
from fermix_core.specs import ChannelSpec

__all__ = ["check_channel_streaming"]

LABEL = "channel streaming"


def _value(section: Any, key: str, default: Any = None) -> Any:
    if isinstance(section, Mapping):
        return section.get(key, default)
    return getattr(section, key, default)


def check_channel_streaming(ctx: DoctorContext) -> list[CheckResult]:
    if ctx.config is None:
        return [CheckResult(LABEL, Status.SKIP, "config.toml did not load")]
    rows: list[CheckResult] = []
    modes: list[str] = []
    for name, spec in sorted(ctx.registry.typed(ChannelSpec).items()):
        section = ctx.config.section(f"fermix_channels.{name}")
        configured = _value(section, "streaming") if section is not None else None
        enabled = _value(section, "enabled", spec.enabled_by_default)
        if configured == "draft" and not spec.supports_draft:
            state = "enabled" if enabled else "disabled"
            rows.append(
                CheckResult(
                    f"{LABEL} ({name})",
                    Status.WARN,
                    f'[fermix_channels.{name}] streaming = "draft", but {spec.label or name} '
                    f"cannot edit its messages, so replies there do not stream at all "
                    f"(channel {state})",
                    fix=f'set [fermix_channels.{name}] streaming = "block" (or "off"), or '
                    "remove the key to use the channel's default",
                )
            )
            continue
        if enabled and spec.remote and (configured is None or isinstance(configured, str)):
            try:
                mode = streaming_mode(configured, can_draft=spec.supports_draft)
            except ValueError:
                continue  # config load reports a bad value; nothing to add here
            modes.append(f"{name}: {mode}")
    if not rows:
        detail = ", ".join(modes) if modes else "no remote channel enabled"
        rows.append(CheckResult(LABEL, Status.OK, detail))
    return rows
