"""Delegation: bounded sub-agent workers (``subagents``, ``skill_run``) and their surfaces.

A worker is a fresh :class:`~fermix_core.agent.loop.AgentLoop` over a narrowed snapshot, run
inside the *calling tool's* task — so it lives in the turn's cancel scope and ``/stop``
cancels every worker with the turn. Rules (docs/subagents.md):

* **Caps.** A regular call takes at most :data:`MAX_TASKS` tasks, runs at most
  :data:`MAX_CONCURRENCY` at once (default :data:`DEFAULT_CONCURRENCY`), each bounded to
  :data:`WORKER_ITERATIONS` model calls. An ``ultra`` turn widens that to
  :data:`ULTRA_MAX_TASKS` narrow probes, :data:`ULTRA_MAX_CONCURRENCY` at once, with a
  reduced per-probe depth. More tasks than the cap is refused, never silently cut.
* **Surface.** A worker's tools are the delegation baseline ∩ the caller's own snapshot:
  never computer use, never a channel side effect (a worker has no chat), never wider than
  the caller (a job or skill confined by ``allowed_tools`` spawns workers confined the same
  way), and no further delegation once the nesting depth reaches :data:`MAX_DEPTH`.
* **Answer.** One structured result: each task's outcome, failures named with their error.
* **Traces.** Each worker gets a random hex ``session_id``; the parent session records a
  ``subagent_spawn`` event naming it and the worker's first event names its parent.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio

from fermix_core.agent.capabilities import BRIDGE_NAMES, Capabilities
from fermix_core.specs import PolicyClass
from fermix_core.tool import ToolContext, Trust, services_with

__all__ = [
    "DEFAULT_CONCURRENCY",
    "DELEGATING_TOOLS",
    "DEPTH_STATE",
    "MAX_CONCURRENCY",
    "MAX_DEPTH",
    "MAX_TASKS",
    "NEVER_DELEGATED",
    "PROFILE_STATE",
    "ULTRA_ADDENDUM",
    "ULTRA_ITERATIONS",
    "ULTRA_MAX_CONCURRENCY",
    "ULTRA_MAX_TASKS",
    "WORKER_ITERATIONS",
    "DelegationError",
    "Delegator",
    "Limits",
    "WorkerOutcome",
    "limits_for",
    "narrowed",
    "worker_surface",
]

log = logging.getLogger("fermix.agent.delegation")

MAX_TASKS = 10
MAX_CONCURRENCY = 8
DEFAULT_CONCURRENCY = 4
WORKER_ITERATIONS = 100
ULTRA_MAX_TASKS = 50
ULTRA_MAX_CONCURRENCY = 12
#: Ultra probes are narrow: a lower per-probe depth keeps fifty of them affordable.
ULTRA_ITERATIONS = 25
#: Nesting depth a delegation may reach (main turn = 0; skill_run / subagents add one).
MAX_DEPTH = 4
DEPTH_STATE = "delegation_depth"
PROFILE_STATE = "run_profile"
#: The tools that delegate; a worker at the depth cap loses them.
DELEGATING_TOOLS = frozenset({"subagents", "skill_run"})
#: Never handed to a worker, whoever the caller is.
NEVER_DELEGATED = frozenset({"computer_use", "screen_share"})
_RESULT_LIMIT = 8000

WORKER_PROMPT = (
    "You are a sub-agent of Fermix working on one delegated task. You cannot talk to the "
    "user and nobody will answer questions: do the task with the tools listed below, then "
    "reply with a concise, factual result (what you found or did, and anything that failed). "
    "Stay brief and on the task."
)

ULTRA_ADDENDUM = (
    "## Exhaustive mode (ultra)\n\n"
    "This request runs in ultra mode: be exhaustive. Break the problem into many narrow, "
    "independent probes and run them in parallel with the subagents tool (up to "
    f"{ULTRA_MAX_TASKS} tasks per call, {ULTRA_MAX_CONCURRENCY} at once; each probe is "
    "short, so keep every task small and specific). For the hardest sub-problem, run "
    "best-of-N: give several independent sub-agents the same question and keep the "
    "best-supported answer. Reconcile conflicting findings before you answer, and say "
    "what you could not establish."
)


class DelegationError(Exception):
    """A delegation that cannot start (caps, depth, routing); the message says what to do."""


@dataclass(frozen=True)
class Limits:
    max_tasks: int
    max_concurrency: int
    default_concurrency: int
    iterations: int


def limits_for(profile: str | None) -> Limits:
    if profile == "ultra":
        return Limits(
            ULTRA_MAX_TASKS, ULTRA_MAX_CONCURRENCY, ULTRA_MAX_CONCURRENCY, ULTRA_ITERATIONS
        )
    return Limits(MAX_TASKS, MAX_CONCURRENCY, DEFAULT_CONCURRENCY, WORKER_ITERATIONS)


def narrowed(base: Capabilities, names: Collection[str]) -> Capabilities:
    """*base* restricted to *names* (never wider); *base* itself when nothing is removed."""
    allowed = set(names)
    own = {n: s for n, s in base.specs.items() if n not in BRIDGE_NAMES}
    specs = {n: s for n, s in own.items() if n in allowed}
    if specs.keys() == own.keys():
        return base
    return Capabilities(base.registry, base.trust, specs)


def worker_surface(
    capabilities: Any, ceiling: Mapping[str, Any] | Collection[str], trust: Trust, depth: int
) -> Capabilities:
    """The delegation baseline ∩ the caller's *ceiling* for a worker at nesting *depth*."""
    trust = Trust(trust)
    base = capabilities.snapshot(trust)
    names = {n for n in ceiling if n not in BRIDGE_NAMES and n not in NEVER_DELEGATED}
    names = {
        n
        for n in names
        if n in base.specs and base.specs[n].policy is not PolicyClass.CHANNEL_SIDE_EFFECT
    }
    if depth >= MAX_DEPTH or trust is not Trust.OPERATOR:
        names -= DELEGATING_TOOLS
    if trust is not Trust.OPERATOR:
        names = {n for n in names if not base.specs[n].owner_only}
    return narrowed(base, names)


@dataclass
class WorkerOutcome:
    index: int
    task: str
    status: str
    session_id: str
    text: str = ""
    error: str | None = None
    iterations: int = 0
    tool_calls: list[str] = field(default_factory=list)
    model: str | None = None
    provider: str | None = None

    def as_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "task": self.index + 1,
            "status": self.status,
            "session_id": self.session_id,
            "iterations": self.iterations,
            "tool_calls": self.tool_calls,
        }
        if self.text:
            text = self.text
            data["result"] = text if len(text) <= _RESULT_LIMIT else text[:_RESULT_LIMIT] + "…"
        if self.error:
            data["error"] = self.error
        if self.model:
            data["model"] = self.model
        return data


CallerFactory = Callable[[str | None], Awaitable[Any]]


class Delegator:
    """Runs workers for one service. *callers* builds the sub-agent model caller.

    ``callers(model)`` resolves the sub-agent route (``[fermix_core.routing] subagent_*``,
    with a one-shot *model* laid on top) and raises on a mis-paired or unusable route, which
    becomes a :class:`DelegationError` before any worker starts.
    """

    def __init__(
        self,
        capabilities: Any,
        callers: CallerFactory,
        *,
        emit: Callable[..., Any] | None = None,
        tracer: Any = None,
    ) -> None:
        self.capabilities = capabilities
        self.callers = callers
        self.emit = emit
        self.tracer = tracer

    async def caller(self, model: str | None) -> Any:
        try:
            return await self.callers(model)
        except DelegationError:
            raise
        except Exception as exc:
            raise DelegationError(f"the sub-agent route cannot run: {exc}") from None

    def check_depth(self, ctx: ToolContext) -> int:
        depth = int(ctx.state.get(DEPTH_STATE, 0))
        if depth >= MAX_DEPTH:
            raise DelegationError(
                f"delegation is nested {depth} deep, the cap is {MAX_DEPTH}: do this part "
                "yourself instead of delegating again"
            )
        return depth

    async def run(
        self,
        tasks: Sequence[str],
        ctx: ToolContext,
        *,
        surface: Capabilities,
        concurrency: int,
        iterations: int,
        model: str | None = None,
        system: str = WORKER_PROMPT,
        kind: str = "subagent",
        trust: Trust | None = None,
    ) -> list[WorkerOutcome]:
        """Run every task (≤ *concurrency* at once) and return one outcome per task, in order.

        *trust* lowers the workers' trust below the caller's (a plugin skill runs as guest).
        """
        depth = self.check_depth(ctx)
        caller = await self.caller(model)
        limiter = anyio.CapacityLimiter(max(1, concurrency))
        outcomes: list[WorkerOutcome | None] = [None] * len(tasks)

        async def one(index: int, task: str) -> None:
            async with limiter:
                outcomes[index] = await self._worker(
                    index, task, ctx, caller, surface, iterations, depth, system, kind, trust
                )

        async with anyio.create_task_group() as tg:
            for index, task in enumerate(tasks):
                tg.start_soon(one, index, task)
        return [o for o in outcomes if o is not None]

    async def _worker(
        self,
        index: int,
        task: str,
        ctx: ToolContext,
        caller: Any,
        surface: Capabilities,
        iterations: int,
        depth: int,
        system: str,
        kind: str,
        trust: Trust | None,
    ) -> WorkerOutcome:
        from fermix_core.agent.loop import AgentLoop
        from fermix_core.messages import Message
        from fermix_core.provider import ProviderError

        session_id = secrets.token_hex(8)
        started = time.monotonic()
        self._trace(
            ctx.session_id, event=f"{kind}_spawn", child_session_id=session_id, task=index + 1
        )
        self._trace(
            session_id,
            event=f"{kind}_start",
            parent_session_id=ctx.session_id,
            depth=depth + 1,
            tools=len(surface.specs),
        )
        state: dict[str, Any] = {
            DEPTH_STATE: depth + 1,
            PROFILE_STATE: ctx.state.get(PROFILE_STATE),
        }
        if "job_id" in ctx.state:
            state["job_id"] = ctx.state["job_id"]
        worker_ctx = ToolContext(
            trust=trust or ctx.trust,
            cwd=ctx.cwd,
            home=ctx.home,
            conversation_key=ctx.conversation_key,
            session_id=session_id,
            attended=False,
            state=state,
            local=ctx.local,
            origin="subagent",
            services=services_with(ctx.services, drop=("reply",)),
        )
        prompt = "\n\n".join(part for part in (system, surface.catalog()) if part)
        loop = AgentLoop(
            caller, surface, max_iterations=iterations, emit=self.emit, tracer=self.tracer
        )
        outcome = WorkerOutcome(index, task, "failed", session_id)
        try:
            result = await loop.run([Message.system(prompt), Message.user(task)], worker_ctx)
        except ProviderError as exc:
            outcome.error = f"model call failed: {exc}"
        except Exception as exc:
            log.exception("%s worker %s failed", kind, session_id)
            outcome.error = f"{type(exc).__name__}: {exc}"
        else:
            outcome.text = result.text
            outcome.iterations = result.iterations
            outcome.tool_calls = [c.name for c in result.tool_calls]
            outcome.model = result.model
            outcome.provider = result.provider
            if result.empty:
                outcome.error = "the worker came back with an empty answer"
            elif result.aborted:
                outcome.status = "incomplete"
                outcome.error = f"stopped by {result.aborted.replace('_', ' ')}"
            else:
                outcome.status = "ok"
        self._trace(
            session_id,
            event=f"{kind}_end",
            parent_session_id=ctx.session_id,
            status=outcome.status,
            seconds=round(time.monotonic() - started, 3),
        )
        return outcome

    def _trace(self, session_id: str, **fields: Any) -> None:
        if self.tracer is not None:
            self.tracer.record("agent_event", session_id=session_id, **fields)


def summarize(outcomes: Sequence[WorkerOutcome]) -> dict[str, Any]:
    """The one structured answer for the caller: counts, each task, failures named."""
    failed = [o for o in outcomes if o.status != "ok"]
    return {
        "tasks": len(outcomes),
        "succeeded": len(outcomes) - len(failed),
        "failed": [o.index + 1 for o in failed],
        "results": [o.as_dict() for o in outcomes],
    }


def routed_callers(runtime: Any) -> tuple[CallerFactory, list[Callable[[], Awaitable[Any]]]]:
    """The service's sub-agent caller factory over ``purpose="subagent"`` routes.

    ``[fermix_core.routing] subagent_*`` is read from the running config; a one-shot
    *model* (the ``subagents`` argument) replaces the overlay's model and, naming no provider,
    runs on the primary (the overlay's effort still applies). A
    mis-paired provider/model fails here, loud, at spawn. Returns (factory, closers).
    """
    from fermix_core.authfile import AuthStore
    from fermix_core.httpclient import runtime_client
    from fermix_core.routing import (
        ProviderPool,
        RouteChain,
        RouteOverride,
        RoutingCaller,
        resolve_routes_async,
    )

    auth_store = AuthStore(runtime.home.auth_file)
    http = runtime_client()
    pool = ProviderPool(runtime.registry, http=http, auth_store=auth_store)
    cached: dict[str | None, Any] = {}

    async def factory(model: str | None) -> Any:
        if model in cached:
            return cached[model]
        override = RouteOverride(model=model, origin="subagents model argument") if model else None
        plan = await resolve_routes_async(
            runtime.config,
            runtime.registry,
            runtime.environ,
            purpose="subagent",
            override=override,
            host=runtime.host,
            auth_store=auth_store,
        )
        plan.require()
        caller = cached[model] = RoutingCaller(RouteChain(plan, pool.for_plan(plan), runtime.emit))
        return caller

    return factory, [pool.aclose_all, http.aclose]
