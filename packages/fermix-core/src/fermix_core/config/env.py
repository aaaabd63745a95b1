"""The environment overlay: the last layer over ``config.toml``, for secrets and flags only.

Precedence is built-in defaults < ``config.toml`` < environment. The environment may only
*supply secrets* (provider keys, channel tokens, any secret slot by its ENV name), the
deployment values the spec names (``OLLAMA_BASE_URL``-style base URLs, channel overlays
such as allowlists) and core flags. Everything else is config-file only, so the file stays
the one source of truth for how Fermix behaves. Values from the environment are applied in
memory and are never written back into ``config.toml``.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fermix_core.config.secret import SecretField
from fermix_core.config.slots import NEVER_FROM_ENV, ModelShapes, holds_list
from fermix_core.plugins.registry import SpecRegistry
from fermix_core.specs import ChannelSpec, ProviderSpec

#: Flags read where they are used (not overlaid onto config keys); listed for docs and doctor.
CORE_FLAGS: dict[str, str] = {
    "FERMIX_HOME": "Where Fermix keeps its state (default ~/.fermix).",
    "FERMIX_LOAD_PLUGINS": "Comma-separated plugin names to load; every other plugin is blocked. "
    "Empty loads none.",
    "FERMIX_TRACE_CONTENT": "1 captures full request/response bodies in local traces; 0 turns "
    "capture off even when Opik is enabled.",
    "FERMIX_OPIK_ENABLED": "1 exports traces to Opik (and turns content capture on unless "
    "FERMIX_TRACE_CONTENT=0).",
    "FERMIX_OPIK_BASE_URL": "Opik endpoint for the trace exporter.",
    "FERMIX_OPIK_PROJECT": "Opik project name for the trace exporter.",
    "FERMIX_HTTP_BIND": "Address the daemon's HTTP ingress binds (default 127.0.0.1); 0.0.0.0 "
    "exposes it on every interface and logs a warning.",
}


@dataclass(frozen=True)
class EnvOverlay:
    """One environment variable that may override one config key."""

    env: str
    path: tuple[str, ...]
    #: ``secret``, ``base_url`` or ``channel`` — what kind of override this is.
    kind: str
    #: Comma-separated value becomes a list (allowlists such as TELEGRAM_ALLOWED_USER_IDS).
    split_list: bool = False


def env_overlays(
    registry: SpecRegistry,
    slots: Sequence[SecretField],
    *,
    shapes: ModelShapes | None = None,
) -> list[EnvOverlay]:
    """Every overlay the loaded plugins and core declare, deduplicated, in a stable order.

    *shapes* answers whether a channel key holds a list from the cache instead of importing
    the channel's config model.
    """
    found: dict[tuple[str, tuple[str, ...]], EnvOverlay] = {}

    def add(overlay: EnvOverlay) -> None:
        if overlay.env in NEVER_FROM_ENV:
            return
        found.setdefault((overlay.env, overlay.path), overlay)

    for slot in slots:
        if slot.overridable:
            add(EnvOverlay(slot.env, slot.path, "secret"))
    for spec in registry.typed(ProviderSpec).values():
        if spec.base_url_env and "base_url" in spec.config_keys:
            add(
                EnvOverlay(
                    spec.base_url_env,
                    ("fermix_core", "providers", spec.name, "base_url"),
                    "base_url",
                )
            )
    for spec in registry.typed(ChannelSpec).values():
        for env, key in spec.env.items():
            rel = tuple(key.split("."))
            split = False
            if spec.config_model is not None:
                ref = spec.config_model
                split = shapes.is_list(ref, rel) if shapes is not None else holds_list(ref, rel)
            add(EnvOverlay(env, ("fermix_channels", spec.name, *rel), "channel", split))
    return sorted(found.values(), key=lambda o: (o.path, o.env))


def apply_env(
    data: Mapping[str, Any],
    overlays: Sequence[EnvOverlay],
    environ: Mapping[str, str] | None = None,
) -> tuple[dict[str, Any], list[str], dict[tuple[str | int, ...], str]]:
    """Return (data with the overlay applied, env names applied, path -> env name).

    An empty variable counts as unset (``OPENAI_API_KEY=`` in a unit file means "none").
    A key whose parent in the file is not a table is left alone; the file's own error is
    reported instead of being papered over.
    """
    env = os.environ if environ is None else environ
    merged: dict[str, Any] = copy.deepcopy(dict(data))
    applied: list[str] = []
    origins: dict[tuple[str | int, ...], str] = {}
    for overlay in overlays:
        if overlay.env in NEVER_FROM_ENV:
            continue
        raw = env.get(overlay.env)
        if raw is None or not raw.strip():
            continue
        value: Any = raw.strip()
        if overlay.split_list:
            value = [part.strip() for part in raw.split(",") if part.strip()]
        if not _put(merged, overlay.path, value):
            continue
        if overlay.env not in applied:
            applied.append(overlay.env)
        origins[overlay.path] = overlay.env
    return merged, applied, origins


def _put(data: dict[str, Any], path: tuple[str, ...], value: Any) -> bool:
    current = data
    for part in path[:-1]:
        nxt = current.get(part)
        if nxt is None:
            nxt = {}
            current[part] = nxt
        if not isinstance(nxt, dict):
            return False
        current = nxt
    current[path[-1]] = value
    return True
