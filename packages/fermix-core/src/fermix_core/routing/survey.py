"""Surveying every registered provider: is it configured, with what, and how would it route.

"Configured" is decided from three kinds of evidence, one per auth mode, because each
provider family proves itself differently: an API key that actually resolves (from the
config value or the slot's environment variable), an OAuth login stored in ``auth.json``
for a provider whose ``auth_mode`` is ``oauth``, or — for a keyless local server — a
``base_url`` someone wrote down (a keyless provider whose spec says ``needs_server=False``
answers in process and is configured by its block alone). The default URL alone is not
configuration: every install would otherwise "have" an Ollama route pointing at a server
that is not there.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from fermix_core.provider import ProviderSettings
from fermix_core.routing.effort import resolve_effort
from fermix_core.routing.records import Credential, ProviderState, Role, Route
from fermix_core.specs import ProviderSpec

if TYPE_CHECKING:  # pragma: no cover - typing only
    from fermix_core.authfile import AuthStore
    from fermix_core.config import LoadedConfig
    from fermix_core.config.secret import SecretField
    from fermix_core.plugins.registry import SpecRegistry
    from fermix_core.secrets import SecretResolver

log = logging.getLogger("fermix.routing")

__all__ = ["make_route", "oauth_profile", "survey"]


def oauth_profile(spec: ProviderSpec) -> str:
    """The ``auth.json`` profile an OAuth provider's login is stored under.

    A spec may name it (``oauth_profile``); otherwise the convention is ``<name>_oauth``
    (``anthropic_oauth``, ``xai_oauth``).
    """
    named = getattr(spec, "oauth_profile", None)
    return named if isinstance(named, str) and named else f"{spec.name}_oauth"


def _auth_mode(spec: ProviderSpec, configured: str | None) -> str:
    if configured:
        return configured
    if spec.keyless:
        return "none"
    return spec.auth_modes[0] if spec.auth_modes else "api_key"


def _key_slots(config: LoadedConfig, registry: SpecRegistry) -> dict[str, SecretField]:
    from fermix_core.config import secret_fields

    slots: dict[str, SecretField] = {}
    for slot in secret_fields(config, registry):
        path = slot.path
        if len(path) == 4 and path[:2] == ("fermix_core", "providers") and path[3] == "api_key":
            slots[path[2]] = slot
    return slots


def _api_key_credential(
    spec: ProviderSpec,
    slot: SecretField | None,
    resolver: SecretResolver,
    environ: Mapping[str, str],
) -> Credential:
    if slot is None:  # the spec declares no api_key key: only its env var can carry one
        value = environ.get(spec.env_var) if spec.env_var else None
        if value and value.strip():
            return Credential(True, f"env:{spec.env_var}", api_key=value.strip())
        hint = f"set {spec.env_var}" if spec.env_var else "it accepts no api_key"
        return Credential(False, "missing", problem=f"no API key; {hint}")
    resolved = resolver.resolve(slot)
    if resolved.value is None:
        problem = resolved.problem or f"no API key; run `fermix setup` or set {slot.env}"
        return Credential(False, "missing", problem=problem)
    source: str = resolved.source
    if source == "env":
        stored_env = getattr(slot.value, "env", None)
        name = slot.env if environ.get(slot.env) else stored_env or slot.env
        source = f"env:{name}"
    return Credential(True, source, api_key=resolved.value)


def _oauth_credential(spec: ProviderSpec, auth_store: AuthStore | None) -> Credential:
    from fermix_core.authfile import AuthFileError

    profile = oauth_profile(spec)
    source = f"oauth:{profile}"
    login = f"run `fermix auth login --provider {spec.name}`"
    if auth_store is None:
        return Credential(False, source, problem=f"no auth store to read; {login}")
    try:
        stored = auth_store.get(profile)
    except AuthFileError as exc:
        return Credential(False, source, problem=str(exc))
    if not stored:
        return Credential(False, source, problem=f"no {profile} login stored; {login}")
    return Credential(True, source)


def _keyless_credential(
    spec: ProviderSpec, written_url: str | None, environ: Mapping[str, str], *, in_file: bool
) -> Credential:
    if not spec.needs_server:
        # In process: nothing to reach, so the written block is the whole configuration.
        if in_file:
            return Credential(True, "in-process")
        return Credential(
            False,
            "in-process",
            problem=f"not configured; add a [fermix_core.providers.{spec.name}] block "
            "(primary = true to use it for main turns)",
        )
    env_url = environ.get(spec.base_url_env, "").strip() if spec.base_url_env else ""
    if written_url or env_url:
        return Credential(True, "keyless")
    hint = f"set base_url in [fermix_core.providers.{spec.name}]"
    if spec.base_url_env:
        hint += f" or {spec.base_url_env}"
    return Credential(False, "keyless", problem=f"no server configured; {hint}")


def survey(
    config: LoadedConfig,
    registry: SpecRegistry,
    environ: Mapping[str, str] | None = None,
    *,
    resolver: SecretResolver | None = None,
    auth_store: AuthStore | None = None,
    host: Any = None,
) -> dict[str, ProviderState]:
    """The state of every registered provider, in catalog (``spec.order``) order.

    Resolving a key may consult the OS keyring or run a secret command; the resolver caches
    each answer, so pass the boot's resolver to avoid asking twice.
    """
    from fermix_core.authfile import AuthStore
    from fermix_core.config.document import dig, plain
    from fermix_core.home import FermixHome
    from fermix_core.secrets import SecretResolver

    env = os.environ if environ is None else environ
    if resolver is None:
        resolver = SecretResolver(environ=env, profile=config.core.fermix_core.profile, host=host)
    if auth_store is None:
        auth_store = AuthStore(FermixHome(config.path.parent).auth_file)
    file_data = plain(config.source)
    slots = _key_slots(config, registry)
    specs = sorted(registry.typed(ProviderSpec).values(), key=lambda s: (s.order, s.name))

    states: dict[str, ProviderState] = {}
    for spec in specs:
        block = config.provider_config(spec.name)
        written = dig(file_data, ("fermix_core", "providers", spec.name), None)
        written = written if isinstance(written, Mapping) else None
        auth_mode = _auth_mode(spec, block.auth_mode if block else None)
        if spec.keyless or auth_mode == "none":
            credential = _keyless_credential(
                spec, block.base_url if block else None, env, in_file=written is not None
            )
        elif auth_mode == "oauth":
            credential = _oauth_credential(spec, auth_store)
        else:
            credential = _api_key_credential(spec, slots.get(spec.name), resolver, env)
        env_url = env.get(spec.base_url_env, "").strip() if spec.base_url_env else ""
        base_url = (block.base_url if block else None) or env_url or spec.default_base_url
        states[spec.name] = ProviderState(
            name=spec.name,
            spec=spec,
            credential=credential,
            auth_mode=auth_mode,
            base_url=base_url,
            model=(block.default_model if block else None) or spec.default_model,
            configured_effort=block.reasoning_effort if block else None,
            fast=bool(block.fast) if block and "fast" in spec.config_keys else False,
            wire=(block.wire if block else None) or spec.wire,
            in_file=written is not None,
            file_keys=frozenset(written) if written is not None else frozenset(),
            flagged_primary=bool(block.primary) if block else False,
            options=config.provider_options(spec.name),
            vision_models=tuple(block.vision_models) if block else (),
        )
    return states


def make_route(
    state: ProviderState,
    role: Role,
    *,
    model: str | None = None,
    effort: str | None = None,
    auth_store: Any = None,
    http: Any = None,
) -> Route:
    """A :class:`Route` for *state*, on *model* (default: its configured model) and *effort*.

    *effort* defaults to the block's ``reasoning_effort``; either way it is clamped to what
    the provider and model accept, and a provider without efforts gets ``None``.
    """
    chosen_model = model or state.model
    requested = effort if effort is not None else state.configured_effort
    resolution = resolve_effort(state.spec, chosen_model, requested)
    settings = ProviderSettings(
        name=state.name,
        base_url=state.base_url,
        api_key=state.credential.api_key if state.auth_mode == "api_key" else None,
        default_model=chosen_model,
        reasoning_effort=resolution.effort,
        auth_mode=state.auth_mode,
        fast=state.fast,
        wire=state.wire,
        http=http,
        auth_store=auth_store,
        options=state.options,
        vision_models=state.vision_models,
    )
    return Route(
        name=state.name,
        spec=state.spec,
        settings=settings,
        role=role,
        key_source=state.credential.source,
        notes=(resolution.note,) if resolution.note else (),
        configured=state.configured,
    )


def with_role(route: Route, role: Role) -> Route:
    return route if route.role == role else replace(route, role=role)
