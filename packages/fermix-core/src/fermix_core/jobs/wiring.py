"""Assembling jobs inside the running service: store, routes, runner, scheduler, service.

:class:`FermixService` opens one :class:`JobsRuntime` next to the conversation store when
it runs as the daemon (``running(runtime, scheduler=True)``) and starts its scheduler. A
one-shot caller (an in-process ``fermix ask``, an embedding app by default) opens no jobs at
all — it costs that path nothing — and the job tools answer that jobs live in the daemon.

Routes: a job without a pin resolves the chain **at every run** (``purpose="cron"``, so
``[fermix_core.routing] cron_*`` applies), a pinned job lays its provider/model on top. The
providers built for runs come from one pool owned here, so runs share connections.

Delivery reaches channels through *ports*, a lookup from channel name to that running
channel's reply port; the service passes :func:`~fermix_core.jobs.delivery.channel_port`
over its channel runtime. A channel that is not running (not configured, or an in-process
``ask`` with no channels) answers ``None``: the delivery is retried and then recorded on the
run as failed ("no running adapter"), with the result kept on the run.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from fermix_core.jobs.clock import Clock, SystemClock
from fermix_core.jobs.delivery import Deliverer
from fermix_core.jobs.records import JobRecord
from fermix_core.jobs.runner import JobRoute, JobRunner, probe_target
from fermix_core.jobs.scheduler import Scheduler
from fermix_core.jobs.service import JobService
from fermix_core.jobs.store import SqliteJobStore
from fermix_core.tool import Trust

__all__ = ["JobsRuntime"]

log = logging.getLogger("fermix.jobs")


class JobsRuntime:
    """Everything jobs need in one running service; :meth:`aclose` releases it all."""

    def __init__(
        self,
        *,
        store: SqliteJobStore,
        scheduler: Scheduler,
        service: JobService,
        closers: list[Any],
    ) -> None:
        self.store = store
        self.scheduler = scheduler
        self.service = service
        self._closers = closers

    @classmethod
    async def open(
        cls,
        runtime: Any,
        *,
        capabilities: Any,
        services: Mapping[str, Any],
        tracer: Any = None,
        conversations: Any = None,
        skills: Any = None,
        clock: Clock | None = None,
        ports: Callable[[str], Any] | None = None,
    ) -> JobsRuntime:
        from fermix_core.agent.capabilities import BRIDGE_NAMES
        from fermix_core.authfile import AuthStore
        from fermix_core.httpclient import runtime_client
        from fermix_core.routing import (
            ProviderPool,
            RouteChain,
            RouteOverride,
            RoutingCaller,
            resolve_routes_async,
        )
        from fermix_core.specs import ChannelSpec

        config = runtime.config
        settings = config.core.fermix_core.jobs
        clock = clock or SystemClock()
        store = await SqliteJobStore.open(runtime.home.memory_db)
        auth_store = AuthStore(runtime.home.auth_file)
        http = runtime_client()
        pool = ProviderPool(runtime.registry, http=http, auth_store=auth_store)

        async def plan_for(provider: str | None, model: str | None, origin: str) -> Any:
            override = (
                RouteOverride(provider=provider, model=model, origin=origin) if provider else None
            )
            return await resolve_routes_async(
                config,
                runtime.registry,
                runtime.environ,
                purpose="cron",
                override=override,
                host=runtime.host,
                auth_store=auth_store,
            )

        async def routes(job: JobRecord) -> JobRoute:
            plan = await plan_for(job.provider, job.model, f"job {job.id} route pin")
            plan.require()
            chain = RouteChain(plan, pool.for_plan(plan), runtime.emit)
            return JobRoute(RoutingCaller(chain), probe_target(plan.primary.settings.base_url))

        async def check_pin(provider: str, model: str) -> None:
            plan = await plan_for(provider, model, "route pin")
            if plan.primary is None:
                raise ValueError(plan.reason or "no provider is configured — run `fermix setup`")
            if not plan.primary.configured:
                raise ValueError(
                    f'provider "{provider}" has no usable credential — run `fermix setup`'
                )

        def visible(trust: Trust) -> set[str]:
            return {n for n in capabilities.snapshot(trust).specs if n not in BRIDGE_NAMES}

        deliverer = Deliverer(store, ports or (lambda name: None), clock)
        runner = JobRunner(
            store=store,
            capabilities=capabilities,
            routes=routes,
            clock=clock,
            home=runtime.home,
            deliverer=deliverer,
            services=services,
            network_readiness=settings.network_readiness_enabled,
            emit=runtime.emit,
            tracer=tracer,
            config=config,
            conversations=conversations,
            skills=skills,
        )
        # The runner reads the service's live services mapping (memory, sandbox …) per run.
        runner.services = services  # type: ignore[assignment]
        scheduler = Scheduler(
            store,
            runner,
            clock=clock,
            freshness_window_s=settings.run_freshness_window_seconds,
            emit=runtime.emit,
        )
        service = JobService(
            store,
            scheduler,
            clock,
            default_timezone=config.core.fermix_core.agent.timezone,
            visible_tools=visible,
            channels=set(runtime.registry.typed(ChannelSpec)),
            check_pin=check_pin,
            skills=skills,
        )
        return cls(
            store=store,
            scheduler=scheduler,
            service=service,
            closers=[pool.aclose_all, http.aclose, store.aclose],
        )

    async def aclose(self) -> None:
        for close in self._closers:
            try:
                await close()
            except Exception:
                log.exception("closing jobs: %r failed", close)
