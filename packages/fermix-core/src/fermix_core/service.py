"""The running service: store, capabilities, routes, turn runner, queue and gateway, wired.

The daemon (``fermix run``), the in-process ``fermix ask`` and embedding apps
(:class:`fermix_core.api.Fermix`) all run this same object, so a turn behaves the same
whichever way it arrives.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio

from fermix_core.channel import (
    Attachment,
    AttachmentKind,
    ConversationKey,
    InboundMessage,
    OutboundMessage,
    SentMessage,
)
from fermix_core.inbox import InboxReply, LocalInbox
from fermix_core.messages import built_instance
from fermix_core.runtime import Runtime
from fermix_core.specs import ChannelSpec, CommandSpec, ToolSpec
from fermix_core.turns import TurnOutcome, TurnRunner

log = logging.getLogger("fermix.service")

CLI_CHANNEL = "cli"
LOCAL_SENDER = "local"
#: Context windows remembered per model name before the memo starts over.
_WINDOWS_KEPT = 64


@dataclass
class CollectingReply:
    """A reply port for local callers (CLI, embedding): collects what the turn sends.

    *inbox* (a :class:`~fermix_core.inbox.InboxReply`) is where work this conversation
    starts but does not wait for (``/background``) posts its result; without one that work
    answers here too.
    """

    features: Any
    messages: list[OutboundMessage] = field(default_factory=list)
    inbox: Any = None

    async def send(self, message: OutboundMessage) -> SentMessage:
        self.messages.append(message)
        # SentMessage(message_id=…) for a count that is never empty: made unvalidated.
        return built_instance(SentMessage, {"message_id": str(len(self.messages))}, {"message_id"})

    #: Turns a command started on this request that the caller waits for (``/ultra``),
    #: each with the port its answer is collected on.
    followed: list[tuple[Any, CollectingReply]] = field(default_factory=list)

    async def approval(self, chat_id: str, thread_id: str | None, proposal: Any) -> SentMessage:
        """The sandbox's directory-access prompt, shown to the person at the terminal with
        its ``/confirm TOKEN`` line (no button here delivers the token privately)."""
        return await self.send(
            OutboundMessage(
                chat_id=chat_id,
                thread_id=thread_id,
                text=proposal.prompt(include_token=True),
                plain=True,
            )
        )

    def detached(self) -> Any:
        """The port for results that arrive after this request has been answered."""
        return self.inbox if self.inbox is not None else self

    def follow(self, job: Any) -> None:
        """Wait for *job* as part of this request: its answer is collected apart (after the
        command's own acknowledgement, whichever is sent first) and returned with it."""
        own = CollectingReply(self.features, inbox=self.inbox)
        job.reply = own
        self.followed.append((job, own))

    @property
    def text(self) -> str:
        messages = self.messages
        if len(messages) == 1:  # a turn's one reply
            return messages[0].text
        return "\n\n".join(m.text for m in messages if m.text)


class FermixService:
    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.store: Any = None
        self.runner: TurnRunner | None = None
        self.queue: Any = None
        self.gateway: Any = None
        self.routes: Any = None
        self.available = True
        self.cli_features: Any = None
        #: The daemon's ChannelRuntime once channels run (``None`` for ask and embedding).
        self.channels: Any = None
        #: Where the daemon's HTTP ingress listens (an IngressInfo), once it runs.
        self.ingress: Any = None
        #: Scheduled jobs (:class:`fermix_core.jobs.wiring.JobsRuntime`).
        self.jobs: Any = None
        #: Loaded skills (:class:`fermix_core.skills.SkillRegistry`).
        self.skills: Any = None
        #: The operator's MCP servers (:class:`fermix_core.mcp.manager.McpManager`), if any.
        self.mcp: Any = None
        #: Indexes committed replies for recall (a ``memory.history_index.HistoryIndexer``).
        self.history_index: Any = None
        #: The runtime's shared HTTP client (``None`` until a provider route exists).
        self.http: Any = None
        #: Late results for CLI sessions (``/background``), read by ``fermix chat``.
        self.inbox = LocalInbox()
        self._closers: list[Any] = []

    @property
    def home(self) -> Any:
        return self.runtime.home

    # ------------------------------------------------------------------ assembly

    @classmethod
    @asynccontextmanager
    async def running(
        cls, runtime: Runtime, *, scheduler: bool = False
    ) -> AsyncIterator[FermixService]:
        """Open everything a turn needs; close it all (in reverse) on exit.

        *scheduler* opens scheduled jobs and starts their scheduler (the daemon does); a
        one-shot caller has no job service, and the job tools tell it to start the daemon.
        """
        from fermix_core.agent import CapabilityRegistry
        from fermix_core.agent.definition_cache import DefinitionCache
        from fermix_core.commands import CommandRouter
        from fermix_core.gateway import ChannelFeatures, ConversationQueue, Gateway, TrustPolicy
        from fermix_core.gateway.trust import LazyPolicies
        from fermix_core.prompt import PromptComposer, reconcile_agent_name
        from fermix_core.store import ConversationStore
        from fermix_core.traces import Tracer

        service = cls(runtime)
        config = runtime.config
        from fermix_core.secrets import remember_configured_secrets

        # Before anything can fail with a provider's error body: the redactor must know
        # the configured keys, whatever their shape (error replies, traces, logs).
        remember_configured_secrets(config, runtime.registry, runtime.environ)
        reconcile_agent_name(runtime.home, config.core.fermix_core.agent.name)
        service.store = await ConversationStore.open(runtime.home.memory_db)
        registry = runtime.registry
        if scheduler:
            # The daemon reports tools dropped for an unusable schema (status, doctor). A
            # one-shot caller builds only the tools its turn sends, and the capability
            # registry leaves an unusable one off the wire all the same.
            registry.check_tool_schemas()
        tool_specs = registry.typed(ToolSpec)
        tool_search = config.core.fermix_core.tools.tool_search.enabled
        # [sandbox] expose_commands: local programs as tools of their own (core's, first-party).
        exposed: list[ToolSpec] = []
        if config.core.sandbox.expose_commands:
            from fermix_core.sandbox.command_tools import command_tool_specs

            exposed = list(command_tool_specs(config.core.sandbox.expose_commands))
        capabilities = CapabilityRegistry(
            [*tool_specs.values(), *exposed],
            sources={
                **{name: registry.source_of(spec) or "" for name, spec in tool_specs.items()},
                **{spec.name: "core.sandbox (fermix-core 0.1.0)" for spec in exposed},
            },
            deferral=tool_search is not False,
            max_result_chars=config.core.fermix_core.tools.max_result_chars,
            timeout_seconds=config.core.fermix_core.tools.timeout_seconds,
            definition_cache=DefinitionCache(runtime.home),
        )

        async def save_definitions() -> None:
            capabilities.definition_cache.save(set(capabilities.specs))

        service._closers.append(save_definitions)
        caller, windows = service._build_caller()
        tracer = Tracer(runtime.home)
        skills = await service._open_skills(capabilities)
        runner = TurnRunner(
            store=service.store,
            capabilities=capabilities,
            composer=PromptComposer(
                runtime.home, agent_name=config.core.fermix_core.agent.name, tracer=tracer
            ),
            caller=caller,
            home=runtime.home,
            config=config,
            emit=runtime.emitter,
            tracer=tracer,
            context_window=windows,
        )
        service.runner = runner
        runner.skills = skills
        if caller is not None:

            def delegator() -> Any:
                from fermix_core.agent.delegation import Delegator, routed_callers

                callers, closers = routed_callers(runtime)
                service._closers.extend(closers)
                return Delegator(capabilities, callers, emit=runtime.emit, tracer=tracer)

            # Built by the first `subagents`/`skill_run` call: its routes, HTTP client
            # and module would cost every turn that never delegates.
            runner.services.provide("delegation", delegator)
        from fermix_core.secrets import SecretResolver

        resolver = SecretResolver(
            environ=runtime.environ, profile=config.core.fermix_core.profile, host=runtime.host
        )

        def sandbox_policy() -> Any:
            from fermix_core.sandbox import approval as sandbox_approval
            from fermix_core.sandbox.policy import SandboxPolicy, log_confinement

            approved = sandbox_approval.check(runtime.home)
            if approved.pending:
                log.warning("sandbox: %s", approved.message())
            policy = SandboxPolicy.from_config(
                config,
                runtime.home.path,
                environ=runtime.environ,
                tracer=runner.tracer,
                resolver=resolver,
                section=sandbox_approval.effective_section(config, approved),
            )
            policy.ensure_workspace()
            log_confinement(policy)
            return policy

        # The policy (approval record, workspace, the confinement probe) is built on first
        # use: a turn that calls no tool never needs it. The daemon and MCP servers (which
        # launch children at start) build it now, off the event loop.
        runner.services.provide("sandbox", sandbox_policy)
        if scheduler or config.core.mcp.servers:
            await anyio.to_thread.run_sync(runner.services.__getitem__, "sandbox")
        from fermix_core.memory.history_index import HistoryIndexer
        from fermix_core.memory.plugin import open_backend
        from fermix_core.memory.review_gate import ReviewOnDemand, review_state_path

        memory = await open_backend(runtime.home, config, registry)
        service._closers.append(memory.aclose)
        # Replies are indexed for recall in bursts, off the turn path; closing catches up.
        service.history_index = HistoryIndexer(memory)
        service._closers.append(service.history_index.flush)
        runner.on_reply.append(service.history_index.note_reply)
        review = config.core.fermix_core.memory
        if caller is not None and review.review_enabled:

            def reviewer() -> Any:
                # Made when a review is due (about once a day), not by every service.
                from fermix_core.memory.review import MemoryReviewer

                return MemoryReviewer.from_config(
                    memory, caller, runtime.home, config, emit=runtime.emit
                )

            gate = ReviewOnDemand(
                reviewer, review_state_path(runtime.home), review.review_interval_hours * 3600.0
            )
            runner.post_reply_hooks.append(gate.review_after_reply)
            runner.post_reply_wanted[gate.review_after_reply] = gate.may_be_due
        runner.services["memory"] = memory

        def confirmations() -> Any:
            # Pending /confirm tokens: the first grant proposal or sandbox command makes
            # the store, so a turn that never asks for access imports none of it.
            from fermix_core.sandbox.grants import ConfirmationStore

            store = ConfirmationStore()
            store.listeners.append(runner.resume_after_grant)
            runner.confirmations = store
            return store

        runner.services.provide("confirmations", confirmations)
        runner.services.update(skills=skills, registry=registry, secrets=resolver)
        if config.core.mcp.servers:  # the manager's modules load only when there are servers
            from fermix_core.mcp import manager as mcp_manager

            service.mcp = mcp_manager.build(
                config,
                registry,
                capabilities,
                sandbox=runner.services["sandbox"],
                resolver=resolver,
                home=runtime.home,
            )
        if scheduler:
            # Jobs live in the daemon; a one-shot caller does not pay to open them.
            from fermix_core.jobs.delivery import channel_port
            from fermix_core.jobs.wiring import JobsRuntime

            service.jobs = await JobsRuntime.open(
                runtime,
                capabilities=capabilities,
                services=runner.services,
                tracer=tracer,
                conversations=service.store,
                ports=lambda name: channel_port(service, name),
                skills=skills,
            )
            service._closers.append(service.jobs.aclose)
            runner.services["jobs"] = service.jobs.service
        channel_specs = registry.typed(ChannelSpec)

        def channel_policy(name: str) -> TrustPolicy:
            # Every registered channel gets a policy; a remote one without a section (or
            # with nobody in it) authorizes nobody, a local one (acp) authorizes its socket.
            from fermix_core.channels.runtime import channel_section

            spec = channel_specs[name]
            section = channel_section(spec, config)
            return TrustPolicy.from_section(section, local=not spec.remote, channel=name)

        cli_policy = TrustPolicy(owner_id=None, allowed_ids=(), command_allowlist=(), local=True)
        policies = LazyPolicies({CLI_CHANNEL: cli_policy}, channel_specs, channel_policy)
        if scheduler:  # the daemon serves every channel: a bad section fails it at start
            for name in policies:
                policies[name]
        from fermix_core.authfile import AuthStore
        from fermix_core.transcription.engine import Transcriber

        transcriber = Transcriber(
            config,
            registry,
            environ=runtime.environ,
            host=runtime.host,
            auth_store=AuthStore(runtime.home.auth_file),
            http=service.http,
        )
        service._closers.append(transcriber.aclose)
        try:
            async with anyio.create_task_group() as tg, ConversationQueue(runner) as queue:
                runner.queue = queue
                runner.task_group = tg
                service.queue = queue
                service.gateway = Gateway(
                    policies=policies,
                    commands=CommandRouter(registry.typed(CommandSpec).values()),
                    queue=queue,
                    services=runner,
                    emit=runtime.emitter,
                    agent_available=lambda: service.available,
                    transcriber=transcriber,
                    images=functools.partial(image_intake, runtime.home, runtime.emit),
                )
                service.cli_features = ChannelFeatures(local=True)
                await tg.start(service.history_index.serve)
                if service.jobs is not None:
                    await tg.start(service.jobs.scheduler.serve)
                if service.mcp is not None:
                    # Servers connect in the background: readiness never waits for them.
                    await tg.start(service.mcp.serve)
                yield service
                tg.cancel_scope.cancel()
        finally:
            with anyio.CancelScope(shield=True):
                for close in reversed(service._closers):
                    try:
                        await close()
                    except Exception:
                        log.exception("closing %r failed", close)
                await service.store.close()

    async def _open_skills(self, capabilities: Any) -> Any:
        """Scan every skill root (problems are logged and kept, never fatal)."""
        from fermix_core.skills import SkillRegistry, default_roots

        roots = default_roots(self.runtime.home, self.runtime.registry)
        from fermix_core.derived_cache import DerivedCache

        front_cache = DerivedCache(self.runtime.home, "skill-front-matter.json", 1)
        skills = SkillRegistry(roots, reserved=capabilities.specs, front_cache=front_cache)
        await anyio.to_thread.run_sync(skills.load)
        self.skills = skills
        return skills

    def _build_caller(self) -> tuple[Any, Any]:
        """The main-turn route chain, snapshotted now (restart to apply provider changes)."""
        from fermix_core.authfile import AuthStore
        from fermix_core.httpclient import provider_client
        from fermix_core.routing import RoutingCaller, build_chain, resolve_routes

        runtime = self.runtime
        auth_store = AuthStore(runtime.home.auth_file)
        plan = resolve_routes(
            runtime.config,
            runtime.registry,
            runtime.environ,
            host=runtime.host,
            auth_store=auth_store,
        )
        self.routes = plan
        if plan.primary is None:
            log.warning("%s", plan.reason)  # the reason already says "no provider configured"
            return None, lambda model: None
        # One HTTP client per runtime, shared by every adapter; idle keep-alive connections
        # older than 15 s are discarded at checkout. The providers' calls go straight onto
        # the HTTP/1.1 pool (asyncio protocols, httptools); httpx's client is built only for
        # anything else (speech to text's uploads).
        http = provider_client()
        chain = build_chain(
            plan, runtime.registry, emit=runtime.emit, http=http, auth_store=auth_store
        )
        self._closers += [chain.aclose, http.aclose]
        self.http = http  # shared with speech-to-text

        # Asked twice a turn (the pre-call overflow check, the compaction check); the plan
        # and its catalog are fixed for this service, so each model's answer is kept.
        windows: dict[str | None, int | None] = {}

        def window(model: str | None) -> int | None:
            if model in windows:
                return windows[model]
            route = plan.primary
            wanted = model or route.settings.default_model
            info = next((m for m in route.spec.models if m.id == wanted), None)
            if len(windows) >= _WINDOWS_KEPT:  # model names come back from the provider
                windows.clear()
            size = windows[model] = info.context_window if info else None
            return size

        return RoutingCaller(chain), window

    # ------------------------------------------------------------------ local turns

    async def ask(
        self,
        text: str,
        *,
        session: str = "default",
        cwd: Path | None = None,
        images: Sequence[Path | bytes] = (),
    ) -> TurnOutcome:
        """Run one local (operator) turn or slash command and return what it produced.

        *images* are local image files or their bytes; the gateway's image step checks and
        stores them like any channel's (a refused one is the outcome's reply).
        """
        attachments = [
            Attachment(kind=AttachmentKind.IMAGE, data=image)
            if isinstance(image, bytes | bytearray)
            else Attachment(kind=AttachmentKind.IMAGE, path=Path(image), filename=Path(image).name)
            for image in images
        ]
        message = local_message(session, text, attachments)
        reply = CollectingReply(
            self.cli_features, inbox=InboxReply(self.inbox, session, self.cli_features)
        )
        outcome = await self.gateway.ingest(message, reply, cwd=cwd)
        job = getattr(outcome, "job", None)
        if job is not None:
            try:
                await job.done.wait()
            except anyio.get_cancelled_exc_class():
                # The caller gave up: stop its turn exactly as /stop would, so the model
                # call ends, the reply is not committed and the session is free again.
                with anyio.CancelScope(shield=True):
                    await self.queue.cancel(job)
                raise
            if isinstance(job.result, TurnOutcome):
                job.result.text = reply.text or job.result.text
                return job.result
        key = ConversationKey(CLI_CHANNEL, session, None)
        status = "stopped" if job is not None and job.stopped else str(outcome.status)
        if reply.followed:
            return await self._followed(reply, key)
        return TurnOutcome(reply.text, key, "", status=status)

    async def _followed(self, reply: CollectingReply, key: Any) -> TurnOutcome:
        """The command's acknowledgement, then the answer of each turn it started."""
        texts = [reply.text] if reply.text else []
        last: TurnOutcome | None = None
        stopped = False
        for job, own in reply.followed:
            await job.done.wait()
            if own.text:
                texts.append(own.text)
            if isinstance(job.result, TurnOutcome):
                last = job.result
            stopped = stopped or bool(job.stopped)
        text = "\n\n".join(texts)
        if last is None:
            return TurnOutcome(text, key, "", status="stopped" if stopped else "command")
        last.text = text
        return last

    def status(self) -> dict[str, Any]:
        plan = self.routes
        return {
            "primary_provider": plan.primary.name if plan and plan.primary else None,
            "fallback_providers": [r.name for r in plan.fallbacks] if plan else [],
            "active_conversations": len(self.queue.active()) if self.queue else 0,
            "channels": self.channels.health() if self.channels is not None else [],
            "http": self.ingress.as_dict() if self.ingress is not None else None,
            "mcp": self.mcp.status() if self.mcp is not None else [],
        }


#: The fields a local message sets (its ``model_fields_set``).
_LOCAL_FIELDS = frozenset({"channel", "chat_id", "sender_id", "text", "attachments", "local"})


def local_message(session: str, text: str, attachments: list[Attachment]) -> InboundMessage:
    """The operator's message in local *session*, as ``InboundMessage(...)`` would make it.

    A non-empty ``str`` session and a ``str`` text without attachments are kept by
    validation exactly as given, so that message is built without it; anything else (an
    empty session, a number, attachments) is validated as before.
    """
    if type(session) is str and session and type(text) is str and not attachments:
        fields = {
            "channel": CLI_CHANNEL,
            "chat_id": session,
            "thread_id": None,
            "sender_id": LOCAL_SENDER,
            "sender_name": None,
            "text": text,
            "attachments": [],
            "message_id": None,
            "is_group": False,
            "local": True,
            "received_at": datetime.now(UTC),
            "raw_ref": None,
        }
        return built_instance(InboundMessage, fields, set(_LOCAL_FIELDS))
    return InboundMessage(
        channel=CLI_CHANNEL,
        chat_id=session,
        sender_id=LOCAL_SENDER,
        text=text,
        attachments=attachments,
        local=True,
    )


def image_intake(home: Any, emit: Any) -> Any:
    """The gateway's image step for *home* (built on the first inbound attachment)."""
    from fermix_core.media.images import ImageIntake, ImageStore

    return ImageIntake(ImageStore.for_home(home), emit=emit)
