"""How the agent loop reaches a model: the :class:`ModelCaller` seam and its one-provider form.

The loop makes two kinds of call. The *initial* call of a turn may fail over across routes
(the routing chain owns that); every later *continuation* call is pinned to the route that
answered first, because switching models in the middle of a tool loop would silently hand a
half-finished task to a different, often weaker, model.

A continuation that fails transiently is re-issued in place on the same route, with a short
bounded backoff, only for failures a retry can actually cure and only when the failed attempt
showed the user nothing (a retry after visible output would print it twice):

* a timeout the adapter *measured* as pre-response (zero chunks seen);
* a transport cut or network error;
* a provider-declared overload / unavailability.

Everything else — unmeasured timeouts, ``connection_unavailable``, rate limits, auth — is
raised on the first failure. A retry re-sends the same request; it never replays a tool.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import anyio

from fermix_core.messages import Turn
from fermix_core.provider import ChatRequest, ErrorKind, Provider, ProviderError

__all__ = [
    "ModelCaller",
    "ProviderRoute",
    "SingleProviderCaller",
    "continuation_backoff",
    "continuation_retryable",
]

log = logging.getLogger("fermix.agent.caller")

Sleep = Callable[[float], Awaitable[Any]]


@runtime_checkable
class ModelCaller(Protocol):
    """What the agent loop calls; the routing chain and :class:`SingleProviderCaller` fit it."""

    async def initial(self, request: ChatRequest) -> tuple[Turn, object]:
        """The turn's first call; returns the turn and the route to pin for the rest."""
        ...

    async def continuation(self, route: object, request: ChatRequest) -> Turn:
        """A later call inside the tool loop, on the pinned *route*."""
        ...


@dataclass(frozen=True, slots=True)
class ProviderRoute:
    """The pinned route of a :class:`SingleProviderCaller`: which provider, which model."""

    provider: str
    model: str | None = None


def continuation_retryable(error: ProviderError) -> bool:
    """Whether a failed continuation may be re-issued in place on the same route."""
    if error.visible_output:
        return False
    if error.kind is ErrorKind.TIMEOUT:
        return error.pre_response
    return error.kind in (ErrorKind.TRANSPORT, ErrorKind.OVERLOADED)


def continuation_backoff(
    attempt: int, error: ProviderError, *, base: float = 0.25, cap: float = 2.0
) -> float:
    """Seconds to wait before retry number ``attempt + 1``: exponential, never above *cap*.

    A provider's ``retry_after`` is honoured when it is longer than the computed step, but
    still capped: a continuation holds a user waiting mid-answer, and a long server-requested
    pause is better surfaced as an error than sat through silently.
    """
    delay = base * (2**attempt)
    if error.retry_after_seconds is not None and error.retry_after_seconds > delay:
        delay = error.retry_after_seconds
    return max(0.0, min(delay, cap))


class SingleProviderCaller:
    """A :class:`ModelCaller` over one provider (embedding, tests, subagents on a fixed route).

    ``initial`` calls the provider exactly once; retry and failover for initial calls belong
    to the routing chain. ``continuation`` applies the in-place retry rule with at most
    ``retry_budget`` extra attempts. ``sleep`` is injectable so tests never wait.
    """

    def __init__(
        self,
        provider: Provider,
        *,
        sleep: Sleep = anyio.sleep,
        retry_budget: int = 2,
        base_delay: float = 0.25,
        max_delay: float = 2.0,
        emit: Callable[..., object] | None = None,
    ) -> None:
        if retry_budget < 0:
            raise ValueError("retry_budget cannot be negative")
        self.provider = provider
        self.sleep = sleep
        self.retry_budget = retry_budget
        self.base_delay = base_delay
        self.max_delay = max_delay
        self.emit = emit

    async def initial(self, request: ChatRequest) -> tuple[Turn, object]:
        turn = await self.provider.chat(request)
        return turn, ProviderRoute(provider=self.provider.name, model=turn.model or request.model)

    async def continuation(self, route: object, request: ChatRequest) -> Turn:
        if not isinstance(route, ProviderRoute):
            raise TypeError(
                "SingleProviderCaller.continuation() needs the route its own initial() "
                f"returned, not {type(route).__name__}"
            )
        attempt = 0
        while True:
            try:
                return await self.provider.chat(request)
            except ProviderError as exc:
                if attempt >= self.retry_budget or not continuation_retryable(exc):
                    raise
                delay = continuation_backoff(attempt, exc, base=self.base_delay, cap=self.max_delay)
                attempt += 1
                log.warning(
                    "continuation call to %s failed (%s); retrying in place, attempt %d of %d "
                    "in %.2fs",
                    route.provider,
                    exc.kind.value,
                    attempt,
                    self.retry_budget,
                    delay,
                )
                self._emit(
                    "provider.retry",
                    provider=route.provider,
                    model=route.model,
                    kind=exc.kind.value,
                    status=exc.status,
                    attempt=attempt,
                    delay=delay,
                    phase="continuation",
                )
                await self.sleep(delay)

    def _emit(self, name: str, **data: Any) -> None:
        if self.emit is None:
            return
        try:
            self.emit(name, **data)
        except Exception:
            log.exception("telemetry emit %s failed", name)
