"""One scheduled run: an isolated, bounded agent loop with its own prompt, memory and deadlines.

Isolation. The run sees no persona, no prompt memory (USER.md/MEMORY.md) and no chat
history: its system prompt is :data:`JOB_SYSTEM_PROMPT` with today's date stamped in, its
only user message is the job's task text, and its tool context carries ``origin="job"`` and
the job id, so memory tools read and write the job's own memory scope only. Its tools are
the creator-trust surface narrowed by ``allowed_tools``; a guest-created run never has
``subagents``.

Bounds. ``max_iterations`` model calls (100 by default); ``timeout_seconds`` on the whole
run's wall clock; and, when set, ``inactivity_timeout_seconds``: a watchdog that fails the
run when neither a model call nor a tool call has started or finished for that long. All
timing runs on the injected clock.

Retries, as the provider retry matrix has them for scheduled runs:

* every model request is sent with ``inner_retry=False``, so the route chain's same-provider
  retry is off (two retry loops never stack and a slow provider cannot overrun the job's
  own deadline); the chain still fails over on the first transient of any other kind, and
  the agent loop still re-issues a failed continuation in place;
* the runner itself re-runs the **whole loop** with bounded exponential backoff, only for
  a pool-checkout ``connection_unavailable`` (the host just woke, the network is not up
  yet), and only while no tool has run — once one has, the failure is reported instead of
  replaying the tool's side effects; the backoff never sleeps past the run's deadline;
* with ``[fermix_core.jobs] network_readiness_enabled`` (default on), before the first model
  call it waits on a short bounded TCP probe of the primary route's host.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

import anyio

from fermix_core.agent.observe import Observer
from fermix_core.channel import ConversationKey
from fermix_core.jobs.clock import Clock
from fermix_core.jobs.delivery import Deliverer
from fermix_core.jobs.records import JobRecord, JobStoreError, RunRecord
from fermix_core.jobs.store import JobStore
from fermix_core.messages import Message
from fermix_core.provider import ChatRequest, ErrorKind, ProviderError
from fermix_core.tool import ToolContext, Trust, services_with

__all__ = [
    "JOB_SYSTEM_PROMPT",
    "RETRY_ATTEMPTS",
    "JobRoute",
    "JobRunner",
    "RunOutcome",
    "probe_target",
    "probe_tcp",
]

log = logging.getLogger("fermix.jobs")

#: Whole-loop attempts for connection_unavailable (the first try included).
RETRY_ATTEMPTS = 4
RETRY_BASE_S = 2.0
RETRY_MAX_S = 30.0
#: The readiness probe: total budget, and the wait between connection attempts.
PROBE_BUDGET_S = 15.0
PROBE_STEP_S = 1.0
PROBE_CONNECT_S = 3.0

JOB_SYSTEM_PROMPT = """\
You are carrying out a scheduled job on the owner's behalf. This run is isolated: there is \
no chat history, nobody is watching as you work, and you cannot ask questions. Do the task \
below with the tools you have, then answer with the result itself — concise, complete and \
ready to read on its own{delivery}.

Today is {date} (UTC; the job's timezone is {timezone}). For the exact time, use a tool.
Job: {job_id}{description}
Memory: you read and write this job's own memory only; it persists between its runs."""

NO_TOOLS = "You have no tools in this run."


@dataclass
class JobRoute:
    """What one run calls: a model caller, where to probe, and how to let go of it."""

    caller: Any
    probe: tuple[str, int] | None = None
    close: Callable[[], Awaitable[None]] | None = None


RouteFactory = Callable[[JobRecord], Awaitable[JobRoute]]
Probe = Callable[[str, int, float], Awaitable[bool]]


@dataclass
class RunOutcome:
    status: str
    text: str | None = None
    error: str | None = None
    usage: dict[str, int] = field(default_factory=dict)
    model: str | None = None
    provider: str | None = None
    attempts: int = 0


def probe_target(base_url: str | None) -> tuple[str, int] | None:
    """``(host, port)`` of a provider base URL, or ``None`` when it names none."""
    if not base_url:
        return None
    parts = urlsplit(base_url)
    if not parts.hostname:
        return None
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return parts.hostname, port


async def probe_tcp(host: str, port: int, timeout: float) -> bool:
    """Can a TCP connection to *host*:*port* be opened within *timeout* seconds?"""
    with anyio.move_on_after(timeout):
        try:
            stream = await anyio.connect_tcp(host, port)
        except OSError:
            return False
        await stream.aclose()
        return True
    return False


class _Progress:
    """What the loop has done so far: for the watchdog and the retry rule."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.last = clock.now()
        self.tool_ran = False

    def mark(self) -> None:
        self.last = self.clock.now()


class _ProgressTracer:
    """The run's tracer, marking progress whenever the loop records or opens a span.

    ``tool_exec`` spans open as a tool starts, ``llm_call`` records land as a call ends, so
    the inactivity watchdog sees both starts and finishes.
    """

    def __init__(self, inner: Any, progress: _Progress) -> None:
        self.inner = inner
        self.progress = progress

    def record(self, type: str, **fields: Any) -> None:
        self.progress.mark()
        if self.inner is not None:
            self.inner.record(type, **fields)

    def error(self, exc: BaseException, **fields: Any) -> None:
        if self.inner is not None:
            self.inner.error(exc, **fields)

    def span(self, kind: str, name: str, **fields: Any) -> Any:
        self.progress.mark()
        if self.inner is None:
            return contextlib.nullcontext()
        return self.inner.span(kind, name, **fields)


class _TrackingCaller:
    """Marks progress around every model call; a continuation means tools have run."""

    def __init__(self, inner: Any, progress: _Progress) -> None:
        self.inner = inner
        self.progress = progress

    async def initial(self, request: ChatRequest) -> Any:
        self.progress.mark()
        try:
            return await self.inner.initial(request)
        finally:
            self.progress.mark()

    async def continuation(self, route: object, request: ChatRequest) -> Any:
        self.progress.tool_ran = True
        self.progress.mark()
        try:
            return await self.inner.continuation(route, request)
        finally:
            self.progress.mark()


class _Deadline(Exception):
    def __init__(self, status: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class JobSkillError(Exception):
    """A run's bound skill cannot confine it (gone, or granting nothing to a guest)."""


class JobRunner:
    """Runs a claimed run to its settled row, then delivers it. Called by the scheduler."""

    def __init__(
        self,
        *,
        store: JobStore,
        capabilities: Any,
        routes: RouteFactory,
        clock: Clock,
        home: Any,
        deliverer: Deliverer,
        services: Mapping[str, Any] | None = None,
        network_readiness: bool = True,
        probe: Probe = probe_tcp,
        emit: Callable[..., Any] | None = None,
        tracer: Any = None,
        config: Any = None,
        conversations: Any = None,
        skills: Any = None,
    ) -> None:
        self.store = store
        #: The running skill registry, for jobs bound with ``skill_name``.
        self.skills = skills
        self.capabilities = capabilities
        self.routes = routes
        self.clock = clock
        self.home = home
        self.deliverer = deliverer
        self.services = services_with(services or {})
        self.network_readiness = network_readiness
        self.probe = probe
        self.emit = emit
        self.tracer = tracer
        self.config = config
        #: The conversation store: each successful run's transcript is kept under the
        #: conversation ("job", <job id>), speaker "job" — the job's own history, which its
        #: later runs can recall through the job memory scope (it is never replayed).
        self.conversations = conversations

    # ------------------------------------------------------------------ entry

    async def __call__(self, job: JobRecord, run: RunRecord, release: str) -> None:
        config = run.config or {}
        try:
            snapshot = self.snapshot_for(job, config)
        except JobSkillError as exc:  # fails loud: never runs unconfined
            snapshot, system = None, ""
            outcome = RunOutcome(status="failed", error=str(exc))
        else:
            system = self.system_prompt(job, snapshot)
        await self.store.start_run(run.id, now=self.clock.now(), prompt_snapshot=system)
        self._trace("agent_event", run.session_id, event="job_run_start", job_id=job.id)
        if snapshot is not None:
            outcome = await self._execute(job, run, config, snapshot, system)
        with anyio.CancelScope(shield=True):
            try:
                await self.store.settle(
                    run.id,
                    status=outcome.status,
                    now=self.clock.now(),
                    job_status=release,
                    final_response=outcome.text,
                    error=outcome.error,
                    usage=outcome.usage,
                    model=outcome.model,
                    provider=outcome.provider,
                    attempts=outcome.attempts,
                )
            except JobStoreError:
                log.warning("job %s: run %s vanished before it settled (removed)", job.id, run.id)
                return
        self._trace(
            "agent_event",
            run.session_id,
            event="job_run_end",
            job_id=job.id,
            status=outcome.status,
            attempts=outcome.attempts,
        )
        text = outcome.text if outcome.status == "succeeded" else self._failure_text(job, outcome)
        await self.deliverer.deliver(job, run, text or "")

    @staticmethod
    def _failure_text(job: JobRecord, outcome: RunOutcome) -> str:
        label = job.description or job.id
        return f"Scheduled job '{label}' did not finish: {outcome.error}"

    # ------------------------------------------------------------------ pieces

    def snapshot_for(self, job: JobRecord, config: Mapping[str, Any]) -> Any:
        """The creator-trust surface, narrowed by ``allowed_tools`` and the bound skill's
        confinement (:func:`fermix_core.skills.skill_surface`); never wider.

        A bound skill that no longer loads raises :class:`JobSkillError`: the run fails
        loud instead of running unconfined.
        """
        from fermix_core.agent.capabilities import BRIDGE_NAMES, Capabilities

        trust = Trust(config.get("trust", job.trust))
        base = self.capabilities.snapshot(trust)
        allowed = config.get("allowed_tools", job.allowed_tools)
        specs = {n: s for n, s in base.specs.items() if n not in BRIDGE_NAMES}
        if allowed is not None:
            specs = {n: s for n, s in specs.items() if n in set(allowed)}
        skill_name = config.get("skill_name", job.skill_name)
        if skill_name:
            from fermix_core.skills import skill_surface

            skill = self.skills.get(skill_name) if self.skills is not None else None
            if skill is None:
                raise JobSkillError(
                    f"the job is bound to skill {skill_name!r}, which is not loaded now; fix "
                    "or restore the skill (skill_reload), or rebind the job with update_job"
                )
            confined = skill_surface(skill, self.capabilities, specs, trust)
            if trust is not Trust.OPERATOR and not confined.specs:
                raise JobSkillError(
                    f"skill {skill_name!r} grants nothing under guest trust; the run did not start"
                )
            trust = confined.trust
            base = self.capabilities.snapshot(trust)
            specs = {n: s for n, s in confined.specs.items() if n not in BRIDGE_NAMES}
        if trust is not Trust.OPERATOR:
            specs.pop("subagents", None)
        if specs.keys() == {n for n in base.specs if n not in BRIDGE_NAMES}:
            return base
        return Capabilities(base.registry, trust, specs)

    def system_prompt(self, job: JobRecord, snapshot: Any, today: Any = None) -> str:
        day = today or datetime.fromtimestamp(self.clock.now(), UTC).date()
        mode = job.delivery_mode
        delivery = {
            "origin": " (it is sent to the chat the job was created in)",
            "channel": " (it is sent to a chat as a message)",
            "local": " (it is stored for the owner to read later)",
            "none": " (it is recorded in the job's run history)",
        }.get(mode, "")
        prompt = JOB_SYSTEM_PROMPT.format(
            delivery=delivery,
            date=day.isoformat(),
            timezone=job.timezone,
            job_id=job.id,
            description=f" — {job.description}" if job.description else "",
        )
        skill = self.skills.get(job.skill_name) if job.skill_name and self.skills else None
        if skill is not None:
            prompt = f"{prompt}\n\n## Skill: {skill.name}\n\n{skill.body}"
        catalog = snapshot.catalog() if snapshot.specs else NO_TOOLS
        plugins = snapshot.plugins_section() if snapshot.specs else ""
        return "\n\n".join(part for part in (prompt, catalog, plugins) if part)

    def context_for(self, job: JobRecord, run: RunRecord, trust: Trust) -> ToolContext:
        return ToolContext(
            trust=trust,
            cwd=self.home.workspace,
            home=self.home,
            conversation_key=ConversationKey("job", job.id, None),
            session_id=run.session_id,
            attended=False,
            local=False,
            origin="job",
            state={"job_id": job.id},
            services=services_with(self.services, config=self.config, tracer=self.tracer),
        )

    # ------------------------------------------------------------------ the run

    async def _execute(
        self,
        job: JobRecord,
        run: RunRecord,
        config: Mapping[str, Any],
        snapshot: Any,
        system: str,
    ) -> RunOutcome:
        timeout = float(config.get("timeout_seconds") or job.timeout_seconds)
        inactivity = config.get("inactivity_timeout_seconds", job.inactivity_timeout_seconds)
        progress = _Progress(self.clock)
        outcome = RunOutcome(status="failed")
        started = self.clock.now()

        async def body() -> None:
            nonlocal outcome
            outcome = await self._attempts(job, run, config, snapshot, system, progress, started)

        try:
            async with anyio.create_task_group() as tg:

                async def main() -> None:
                    await body()
                    tg.cancel_scope.cancel()

                async def deadline() -> None:
                    await self.clock.sleep(timeout)
                    raise _Deadline(
                        "timed_out",
                        f"the run hit its timeout of {timeout:.0f} s (timeout_seconds) and was "
                        "stopped",
                    )

                async def watchdog() -> None:
                    assert inactivity is not None
                    while True:
                        wait = progress.last + float(inactivity) - self.clock.now()
                        if wait <= 0:
                            raise _Deadline(
                                "timed_out",
                                f"no progress for {float(inactivity):.0f} s "
                                "(inactivity_timeout_seconds): no model or tool call started or "
                                "finished, so the run was stopped",
                            )
                        # Progress only ever moves the deadline later: sleep, then look again.
                        await self.clock.sleep(wait)

                tg.start_soon(main)
                tg.start_soon(deadline)
                if inactivity:
                    tg.start_soon(watchdog)
        except* _Deadline as group:
            first = group.exceptions[0]
            assert isinstance(first, _Deadline)
            outcome = replace(outcome, status=first.status, error=first.message)
            log.warning("job %s: run %s %s", job.id, run.id, first.message)
        return outcome

    async def _attempts(
        self,
        job: JobRecord,
        run: RunRecord,
        config: Mapping[str, Any],
        snapshot: Any,
        system: str,
        progress: _Progress,
        started: float,
    ) -> RunOutcome:
        from fermix_core.agent import AgentLoop
        from fermix_core.routing.messages import user_message

        # The snapshot's trust: a plugin skill binding lowers an operator job to guest.
        trust = Trust(getattr(snapshot, "trust", None) or config.get("trust", job.trust))
        ctx = self.context_for(job, run, trust)
        task = str(config.get("task_prompt") or job.task_prompt)
        deadline = started + float(config.get("timeout_seconds") or job.timeout_seconds)
        attempt = 0
        try:
            route = await self.routes(job)
        except Exception as exc:
            return RunOutcome(status="failed", error=_route_error(exc), attempts=0)
        try:
            if self.network_readiness and route.probe is not None:
                await self._wait_for_network(job, *route.probe, deadline=deadline)
            emit = self._emit_with(progress)
            while True:
                attempt += 1
                caller = _TrackingCaller(route.caller, progress)
                loop = AgentLoop(
                    caller,
                    snapshot,
                    max_iterations=int(config.get("max_iterations") or job.max_iterations),
                    emit=emit,
                    tracer=_ProgressTracer(self.tracer, progress),
                )
                try:
                    result = await loop.run(
                        [Message.system(system), Message.user(task)], ctx, inner_retry=False
                    )
                except ProviderError as exc:
                    delay = min(RETRY_BASE_S * 2 ** (attempt - 1), RETRY_MAX_S)
                    retry = (
                        exc.kind is ErrorKind.CONNECTION_UNAVAILABLE
                        and not progress.tool_ran
                        and attempt < RETRY_ATTEMPTS
                        and self.clock.now() + delay < deadline
                    )
                    if self.tracer is not None:
                        self.tracer.error(
                            exc,
                            session_id=run.session_id,
                            kind=str(exc.kind),
                            provider=exc.provider,
                        )
                    if not retry:
                        why = user_message(exc)
                        if exc.kind is ErrorKind.CONNECTION_UNAVAILABLE and progress.tool_ran:
                            why += (
                                " (a tool had already run, so the run was not repeated; its "
                                "side effects are not replayed)"
                            )
                        return RunOutcome(
                            status="failed", error=why, provider=exc.provider, attempts=attempt
                        )
                    log.warning(
                        "job %s: no connection could be opened (%s); re-running the whole "
                        "loop in %.0f s (attempt %d of %d)",
                        job.id,
                        exc.message,
                        delay,
                        attempt + 1,
                        RETRY_ATTEMPTS,
                    )
                    self._emit("jobs.retry", job_id=job.id, attempt=attempt, delay=delay)
                    await self.clock.sleep(delay)
                    continue
                status = "succeeded"
                error = None
                if result.aborted:
                    status, error = "failed", f"stopped early ({result.aborted})"
                elif result.empty:
                    status, error = "failed", "the model returned an empty answer"
                else:
                    await self._keep_transcript(job, run, task, result)
                return RunOutcome(
                    status=status,
                    text=result.text,
                    error=error,
                    usage=result.usage.model_dump(),
                    model=result.model,
                    provider=result.provider,
                    attempts=attempt,
                )
        finally:
            if route.close is not None:
                with anyio.CancelScope(shield=True):
                    try:
                        await route.close()
                    except Exception:
                        log.exception("closing the route of job %s failed", job.id)

    async def _keep_transcript(
        self, job: JobRecord, run: RunRecord, task: str, result: Any
    ) -> None:
        if self.conversations is None or not result.messages:
            return
        try:
            store = self.conversations
            conversation = await store.conversation_id(ConversationKey("job", job.id, None))
            handle = await store.begin_turn(
                conversation,
                Message.user(task),
                speaker="job",
                sender_id=None,
                session_id=run.session_id,
                run_profile="job",
            )
            try:
                await store.commit_turn(
                    handle.turn_id,
                    result.messages,
                    usage=result.usage,
                    model=result.model,
                    provider=result.provider,
                )
            except Exception:
                await store.abandon_turn(handle.turn_id, "failed")
                raise
        except Exception:
            log.exception("job %s: run %s's transcript could not be kept", job.id, run.id)

    async def _wait_for_network(
        self, job: JobRecord, host: str, port: int, *, deadline: float
    ) -> None:
        budget_end = min(self.clock.now() + PROBE_BUDGET_S, deadline)
        tries = 0
        while True:
            tries += 1
            if await self.probe(host, port, PROBE_CONNECT_S):
                if tries > 1:
                    log.info("job %s: network ready after %d probes of %s", job.id, tries, host)
                return
            if self.clock.now() + PROBE_STEP_S >= budget_end:
                log.warning(
                    "job %s: %s:%d still unreachable after %d probes; trying the model anyway",
                    job.id,
                    host,
                    port,
                    tries,
                )
                return
            await self.clock.sleep(PROBE_STEP_S)

    # ------------------------------------------------------------------ observability

    def _emit_with(self, progress: _Progress) -> Callable[..., Any]:
        def emit(name: str, **data: Any) -> None:
            if name == "agent.tool_call":
                progress.tool_ran = True
                progress.mark()
            self._emit(name, **data)

        return emit

    def _emit(self, name: str, **data: Any) -> None:
        Observer(self.emit, None).emit(name, **data)

    def _trace(self, type: str, session_id: str, **fields: Any) -> None:
        Observer(None, self.tracer).record(type, session_id=session_id, **fields)


def _route_error(exc: Exception) -> str:
    from fermix_core.routing.records import NoProviderConfigured, RoutingError

    if isinstance(exc, NoProviderConfigured):
        return "no provider is configured — run `fermix setup`"
    if isinstance(exc, RoutingError):
        return f"the job's route cannot run: {exc}"
    return f"the job's route could not be built: {type(exc).__name__}: {exc}"
