"""The records routing hands around: a provider's state, a route, a plan, an override.

They are frozen on purpose. Main turns snapshot a plan at boot and keep it until restart;
a record that could change under a running turn would make "which model answered" a
question with no stable answer.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

from fermix_core.provider import ProviderSettings
from fermix_core.specs import ProviderSpec

__all__ = [
    "NO_PROVIDER_MESSAGE",
    "Credential",
    "NoProviderConfigured",
    "ProviderState",
    "Purpose",
    "Role",
    "Route",
    "RouteConfigError",
    "RouteOverride",
    "RoutePlan",
    "RoutingError",
]

Role = Literal["primary", "fallback"]
#: Who the plan is for: main turns, sub-agent workers, or scheduled jobs.
Purpose = Literal["main", "subagent", "cron"]

NO_PROVIDER_MESSAGE = "no provider configured — run `fermix setup`"


class RoutingError(Exception):
    """Routing cannot produce a usable plan; the message says what to change."""


class NoProviderConfigured(RoutingError):
    """No provider could be chosen as primary, so there is nothing to call."""

    def __init__(self, message: str = NO_PROVIDER_MESSAGE) -> None:
        super().__init__(message)


class RouteConfigError(RoutingError):
    """A routing overlay or pin names a provider/model pairing that cannot run."""


@dataclass(frozen=True, slots=True)
class Credential:
    """Whether a provider has what it needs to authenticate, and where that came from.

    ``source`` names the origin — ``env:OPENAI_API_KEY``, ``keyring``, ``plaintext``,
    ``command``, ``plugin``, ``oauth:<profile>``, ``keyless`` or ``missing`` — and is what
    ``fermix providers list`` shows. The value itself never appears in a repr.
    """

    configured: bool
    source: str
    problem: str | None = None
    api_key: str | None = field(default=None, repr=False)


@dataclass(frozen=True, slots=True)
class ProviderState:
    """Everything routing knows about one registered provider, configured or not."""

    name: str
    spec: ProviderSpec
    credential: Credential
    auth_mode: str
    base_url: str | None
    model: str | None
    #: The effort configured in the provider's block (before clamping), if any.
    configured_effort: str | None
    fast: bool
    wire: str
    #: The ``[fermix_core.providers.<name>]`` block is written in config.toml itself (the
    #: environment can supply a key or base URL, but only the file promotes a primary).
    in_file: bool
    #: Keys of that block as written in the file.
    file_keys: frozenset[str]
    flagged_primary: bool = False
    #: The provider's own settings (its spec's ``config_model``), or ``None``.
    options: Any = field(default=None, compare=False)
    #: ``vision_models`` of the block: models that read images beyond the catalog's.
    vision_models: tuple[str, ...] = ()

    @property
    def configured(self) -> bool:
        return self.credential.configured

    @property
    def label(self) -> str:
        return self.spec.label or self.name


@dataclass(frozen=True, slots=True)
class Route:
    """One provider, ready to call: its spec, resolved settings and place in the chain."""

    name: str
    spec: ProviderSpec
    settings: ProviderSettings
    role: Role
    key_source: str = "missing"
    #: Adjustments made while resolving (an effort clamped to the model's ceiling …).
    notes: tuple[str, ...] = ()
    #: False only for an explicitly chosen primary that lacks credentials: it stays the
    #: primary (the operator chose it) and its calls fail with an auth error that says so.
    configured: bool = True

    @property
    def model(self) -> str | None:
        return self.settings.default_model

    @property
    def effort(self) -> str | None:
        return self.settings.reasoning_effort

    @property
    def auth_mode(self) -> str:
        return self.settings.auth_mode

    @property
    def label(self) -> str:
        return self.spec.label or self.name

    @property
    def key(self) -> tuple[Any, ...]:
        """What makes two routes share one provider instance: everything but model/effort.

        Model and effort travel on each request, so a sub-agent on a smaller model reuses
        the main route's connections instead of opening its own.
        """
        s = self.settings
        return (self.name, s.base_url, s.auth_mode, s.wire, s.fast)

    def __hash__(self) -> int:
        # ProviderSettings holds a dict (``extra``) and cannot be hashed; these fields can.
        return hash((self.key, self.model, self.effort, self.role))

    def telemetry(self) -> dict[str, Any]:
        """The route as telemetry fields; ``reasoning_effort`` is ``None`` when none is sent."""
        return {
            "provider": self.name,
            "model": self.model,
            "reasoning_effort": self.effort,
            "role": self.role,
            "auth_mode": self.auth_mode,
        }


@dataclass(frozen=True, slots=True)
class RoutePlan:
    """The primary route and its fallbacks, in the order a failing initial call walks them."""

    primary: Route | None
    fallbacks: tuple[Route, ...] = ()
    #: Why the plan is empty; ``None`` when there is a primary.
    reason: str | None = None
    purpose: Purpose = "main"
    #: How the primary was chosen: ``flag``, ``legacy`` (``[fermix_core.agent] provider``),
    #: ``auto`` (first configured block in catalog order) or ``override``.
    chosen_by: str | None = None

    @property
    def routes(self) -> tuple[Route, ...]:
        return () if self.primary is None else (self.primary, *self.fallbacks)

    @property
    def empty(self) -> bool:
        return self.primary is None

    @property
    def primary_provider(self) -> str | None:
        return None if self.primary is None else self.primary.name

    @property
    def fallback_providers(self) -> list[str]:
        return [r.name for r in self.fallbacks]

    def __iter__(self) -> Iterator[Route]:
        return iter(self.routes)

    def __len__(self) -> int:
        return len(self.routes)

    def get(self, name: str) -> Route | None:
        return next((r for r in self.routes if r.name == name), None)

    def require(self) -> RoutePlan:
        """Return self, or raise :class:`NoProviderConfigured` with the reason it is empty."""
        if self.primary is None:
            raise NoProviderConfigured(self.reason or NO_PROVIDER_MESSAGE)
        return self


@dataclass(frozen=True, slots=True)
class RouteOverride:
    """A provider/model/effort laid over a plan: a routing overlay, a job pin, a one-shot model.

    ``origin`` names where it came from so an error can point at the setting to fix.
    """

    provider: str | None = None
    model: str | None = None
    reasoning_effort: str | None = None
    origin: str = "route override"

    @property
    def empty(self) -> bool:
        return self.provider is None and self.model is None and self.reasoning_effort is None
