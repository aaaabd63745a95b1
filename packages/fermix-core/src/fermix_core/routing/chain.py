"""The route chain: runs one model call across a plan, applying the retry/failover policy.

:meth:`RouteChain.initial` is the first call of a turn. It spends each route's retry budget
before hopping to the next, and returns the route that answered: the agent loop pins it for
every continuation of that turn, because switching models mid tool loop would hand one
model's half-finished plan to another. :meth:`RouteChain.continuation` only ever re-issues
in place.

Every decision comes from :mod:`fermix_core.routing.policy`; this module only acts on them
— sleeping (through the injected ``sleep``, so tests never wait), emitting telemetry and
choosing the next route.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import anyio

from fermix_core.messages import Turn
from fermix_core.provider import ChatRequest, Provider, ProviderError
from fermix_core.routing.policy import (
    DEFAULT_RETRY_BUDGET,
    Action,
    continuation_action,
    initial_action,
)
from fermix_core.routing.records import Route, RoutePlan, RoutingError

log = logging.getLogger("fermix.routing")

__all__ = ["Emit", "RouteChain"]

#: What :meth:`RouteChain._request_for` sets on each call's copy of the request.
_ROUTED = frozenset({"model", "reasoning_effort", "initial"})
_new_request = object.__new__
_set = object.__setattr__

#: ``emit(name, **data)``, e.g. :meth:`fermix_core.plugins.host.PluginHost.emit`.
Emit = Callable[..., Any]
Sleep = Callable[[float], Awaitable[Any]]


class RouteChain:
    """One plan plus the providers that serve it.

    *providers* maps a route's provider name to its :class:`~fermix_core.provider.Provider`;
    a lazily building mapping (:meth:`ProviderPool.for_plan`) means a fallback that is never
    needed is never constructed. The route is the authority on model and effort: each call
    is sent with the route's model and clamped effort, so a hop to another provider never
    carries the first provider's model id with it.
    """

    def __init__(
        self,
        plan: RoutePlan,
        providers: Mapping[str, Provider],
        emit: Emit | None = None,
        *,
        sleep: Sleep = anyio.sleep,
        retry_budget: int = DEFAULT_RETRY_BUDGET,
        base_delay: float = 0.25,
        max_delay: float = 4.0,
    ) -> None:
        if retry_budget < 0:
            raise ValueError("retry_budget must be zero or more")
        self.plan = plan
        self.providers = providers
        self._emit = emit
        self._sleep = sleep
        self.retry_budget = retry_budget
        self.base_delay = base_delay
        self.max_delay = max_delay
        #: Set by :func:`~fermix_core.routing.build.build_chain`: the pool :meth:`aclose`
        #: closes. A chain given ready-made providers leaves closing them to their owner.
        self.pool: Any = None

    # ------------------------------------------------------------------ public

    async def initial(self, request: ChatRequest) -> tuple[Turn, Route]:
        """Run the first call of a turn; return the answer and the route to pin.

        Raises :class:`~fermix_core.routing.records.NoProviderConfigured` for an empty plan
        and the deciding :class:`ProviderError` when the chain gives up (chained to the
        previous hop's error, when there was one, through ``__cause__``). A primary that
        cannot be built raises :class:`~fermix_core.routing.build.ProviderBuildError`; a
        fallback that cannot be built is skipped, so a broken spare never hides the error
        that sent the turn looking for one.
        """
        routes = self.plan.require().routes
        job = not request.inner_retry
        #: The failure that is moving the turn on: (route it happened on, error, retries).
        hop: tuple[Route, ProviderError, int] | None = None
        for route in routes:
            try:
                provider = self.providers[route.name]
            except RoutingError as exc:
                if hop is None:
                    raise
                log.error("fallback %s cannot be used (%s); skipping it", route.name, exc)
                continue
            if hop is not None:
                self._failover(hop[0], route, hop[1], hop[2])
            call = self._request_for(route, request, initial=True)
            attempt = 0
            while True:
                try:
                    return await provider.chat(call), route
                except ProviderError as error:
                    action = initial_action(
                        error, attempt=attempt, job=job, budget=self.retry_budget
                    )
                    if action is Action.RETRY_SAME:
                        await self._retry(route, error, attempt, phase="initial")
                        attempt += 1
                        continue
                    if action is Action.FAILOVER and route is not routes[-1]:
                        previous = hop[1] if hop is not None else None
                        if previous not in (None, error) and error.__cause__ is None:
                            error.__cause__ = previous
                        hop = (route, error, attempt)
                        break
                    self._give_up(route, error, attempt, phase="initial", action=action)
                    if hop is not None and error is not hop[1]:
                        raise error from hop[1]
                    raise
        # Every remaining fallback was unusable: surface the failure that needed them.
        assert hop is not None
        self._give_up(hop[0], hop[1], hop[2], phase="initial", action=Action.FAILOVER)
        raise hop[1]

    async def continuation(self, route: Route, request: ChatRequest) -> Turn:
        """Run a call inside the tool loop on the pinned *route*; never switches provider."""
        provider = self.providers[route.name]
        call = self._request_for(route, request, initial=False)
        attempt = 0
        while True:
            try:
                return await provider.chat(call)
            except ProviderError as error:
                judged = _as_measured(error, provider)
                action = continuation_action(judged, attempt=attempt, budget=self.retry_budget)
                if action is Action.RETRY_SAME:
                    await self._retry(route, error, attempt, phase="continuation")
                    attempt += 1
                    continue
                self._give_up(route, error, attempt, phase="continuation", action=action)
                raise

    async def aclose(self) -> None:
        """Close the providers this chain built (a no-op for borrowed providers)."""
        if self.pool is not None:
            await self.pool.aclose_all()

    def delay(self, attempt: int) -> float:
        """Backoff before retry number *attempt* + 1: short, exponential, capped."""
        return min(self.base_delay * (2**attempt), self.max_delay)

    # ------------------------------------------------------------------ internals

    @staticmethod
    def _request_for(route: Route, request: ChatRequest, *, initial: bool) -> ChatRequest:
        """*request* with the route's model and effort: a shallow copy, as ``model_copy``
        makes it (same fields set, nothing revalidated), written out since it runs on
        every model call."""
        if type(request) is not ChatRequest or request.__pydantic_extra__:
            return request.model_copy(
                update={"model": route.model, "reasoning_effort": route.effort, "initial": initial}
            )
        copy = _new_request(ChatRequest)
        _set(
            copy,
            "__dict__",
            {
                **request.__dict__,
                "model": route.model,
                "reasoning_effort": route.effort,
                "initial": initial,
            },
        )
        _set(copy, "__pydantic_fields_set__", request.__pydantic_fields_set__ | _ROUTED)
        _set(copy, "__pydantic_extra__", None)
        _set(copy, "__pydantic_private__", None)
        return copy

    async def _retry(self, route: Route, error: ProviderError, attempt: int, *, phase: str) -> None:
        wait = self.delay(attempt)
        log.info(
            "%s call to %s failed (%s); retrying on the same route in %.2fs (retry %d of %d)",
            phase,
            route.name,
            error.kind.value,
            wait,
            attempt + 1,
            self.retry_budget,
        )
        self._telemetry(
            "provider.retry",
            provider=route.name,
            model=route.model,
            kind=error.kind.value,
            status=error.status,
            attempt=attempt + 1,
            delay=wait,
            phase=phase,
        )
        await self._sleep(wait)

    def _failover(self, route: Route, following: Route, error: ProviderError, attempt: int) -> None:
        log.warning(
            "initial call to %s failed (%s) after %d retr%s; failing over to %s",
            route.name,
            error.kind.value,
            attempt,
            "y" if attempt == 1 else "ies",
            following.name,
        )
        self._telemetry(
            "provider.failover",
            **{
                "from": route.name,
                "to": following.name,
                "kind": error.kind.value,
                "status": error.status,
                "from_model": route.model,
                "to_model": following.model,
                "retries": attempt,
            },
        )

    def _give_up(
        self, route: Route, error: ProviderError, attempt: int, *, phase: str, action: Action
    ) -> None:
        log.warning(
            "%s call to %s failed (%s) after %d retr%s; surfacing (%s)",
            phase,
            route.name,
            error.kind.value,
            attempt,
            "y" if attempt == 1 else "ies",
            "no route left" if action is Action.FAILOVER else "not retryable here",
        )

    def _telemetry(self, name: str, **data: Any) -> None:
        if self._emit is None:
            return
        try:
            self._emit(name, **data)
        except Exception:  # telemetry never takes down a turn
            log.exception("telemetry emit of %s failed", name)


def _as_measured(error: ProviderError, provider: Provider) -> ProviderError:
    """*error* as the policy may judge it: ``pre_response`` only from chunk-counting adapters.

    A buffered adapter cannot know whether the server had started answering, so its claim
    of a pre-response timeout is dropped rather than trusted into a duplicate reply.
    """
    if not error.pre_response or provider.counts_chunks:
        return error
    return ProviderError(
        error.kind,
        error.message,
        provider=error.provider,
        status=error.status,
        retry_after_seconds=error.retry_after_seconds,
        pre_response=False,
        visible_output=error.visible_output,
    )
