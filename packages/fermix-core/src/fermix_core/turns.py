"""The turn runner: one queued message in, one delivered and committed reply out.

Order of a turn (the spec's): load history → persist the user message → agent loop →
deliver → commit → post-reply work. Post-reply work (memory review, auto-compaction) runs
in a supervised background task whose failure is logged and never touches the delivered
reply. A stopped turn (``/stop``) is cancelled before delivery, so it neither delivers nor
commits; its user message stays in history followed by a short "context only" marker.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections import deque
from collections.abc import Callable, MutableMapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import anyio.lowlevel

from fermix_core.channel import ConversationKey, OutboundMessage
from fermix_core.memory.directives import OWNER_MESSAGES_STATE
from fermix_core.messages import ImagePart, Message, TextPart, Usage, built_instance, text_part
from fermix_core.prompt.senders import GroupView, replay
from fermix_core.provider import ChatRequest, ProviderError
from fermix_core.tool import DEFERRED_STATE, ServiceTable, ToolContext, Trust, services_with
from fermix_core.traces import Body

if TYPE_CHECKING:  # pragma: no cover
    from fermix_core.agent import CapabilityRegistry, LoopResult, ModelCaller
    from fermix_core.channels.streaming import StreamController
    from fermix_core.gateway import TurnJob
    from fermix_core.prompt import PromptComposer
    from fermix_core.store import ConversationStore

log = logging.getLogger("fermix.turns")

STOP_MARKER = "(stopped before I finished — the request above is kept as context only)"
INTERNAL_ERROR = (
    "Something went wrong on my side and I could not finish; the details are in the log."
)
NO_PROVIDER = "No provider is configured — run `fermix setup` to choose one."
#: The turns a guest's turn replays from a shared conversation.
GUEST_VISIBLE = frozenset({"guest"})
MAX_BACKGROUND = 8
#: How long /stop waits for the platform to delete a live draft.
STREAM_CLEANUP_SECONDS = 10.0
#: Run profiles of foreground channel turns, the only turns that stream live.
STREAMED_PROFILES = frozenset({"normal", "ultra"})
RECENT_BACKGROUND = 20
#: Messages kept verbatim after a compaction summary.
COMPACTION_KEEP = 6
SUMMARY_PROMPT = (
    "Summarize the conversation so far for your own future reference: the user's goals, "
    "decisions made, facts established, open questions and anything promised. Be concise "
    "and factual; write it as notes, not as a reply to the user."
)


@dataclass
class TurnOutcome:
    """What a finished turn produced; the CLI's ``--json`` prints this."""

    text: str
    conversation_key: ConversationKey
    session_id: str
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    usage: dict[str, int] = field(default_factory=dict)
    model: str | None = None
    provider: str | None = None
    status: str = "ok"

    def as_dict(self) -> dict[str, Any]:
        return {
            "reply": self.text,
            "session": self.conversation_key.chat_id,
            "conversation_key": list(self.conversation_key),
            "session_id": self.session_id,
            "tool_calls": self.tool_calls,
            "usage": self.usage,
            "model": self.model,
            "provider": self.provider,
            "status": self.status,
        }


@dataclass
class BackgroundTask:
    """A turn running in the background (``/background``): what status and cancel report on."""

    id: str
    key: ConversationKey
    prompt: str
    started: float
    status: str = "running"
    finished: float | None = None
    scope: anyio.CancelScope | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "prompt": self.prompt[:80],
            "status": self.status,
            "started": self.started,
            "finished": self.finished,
        }


class TurnRunner:
    """Implements the gateway's ``TurnExecutor`` and ``CommandServices`` contracts."""

    def __init__(
        self,
        *,
        store: ConversationStore,
        capabilities: CapabilityRegistry,
        composer: PromptComposer,
        caller: ModelCaller | None,
        home: Any,
        config: Any,
        emit: Callable[..., Any],
        tracer: Any = None,
        context_window: Callable[[str | None], int | None] = lambda model: None,
    ) -> None:
        self.store = store
        self.capabilities = capabilities
        self.composer = composer
        self.caller = caller
        self.home = home
        self.config = config
        self.emit = emit
        self.tracer = tracer
        self.context_window = context_window
        #: Called with the conversation id after every committed reply (memory review
        #: plugs in here); each failure is logged and never reaches the user.
        self.post_reply_hooks: list[Callable[[int], Any]] = []
        #: Optional per hook: a cheap check run at each reply; when it says no, the hook is
        #: not run for that reply (and no post-reply task starts when no other work is due).
        self.post_reply_wanted: dict[Callable[[int], Any], Callable[[], bool]] = {}
        #: Called (synchronously, on the loop) after every committed reply; each must only
        #: note the fact and return at once (the history indexer schedules itself).
        self.on_reply: list[Callable[[], None]] = []
        #: Runtime services every tool call may reach through ``ctx.service(name)``
        #: (the sandbox policy, the memory backend …), filled in by the service.
        self.services: MutableMapping[str, Any] = ServiceTable()
        #: The runtime's pending sandbox confirmations (``/confirm TOKEN``).
        self.confirmations: Any = None
        #: Loaded skills, listed in the prompt (set by the service).
        self.skills: Any = None
        self.queue: Any = None  # set by the service once the queue exists
        self.task_group: Any = None  # the service's task group, for post-reply and background work
        self._handles: dict[int, Any] = {}
        #: Live streams by job, so ``/stop`` can take the unsealed draft down.
        self._streams: dict[int, StreamController] = {}
        self._background: dict[str, BackgroundTask] = {}
        self._recent: dict[ConversationKey, deque[BackgroundTask]] = {}
        self._bg_counter = 0
        #: Post-reply work still running, so a daemon-less caller can finish it before exit.
        self._post_reply_pending = 0
        self._post_reply_idle = anyio.Event()
        self._post_reply_idle.set()
        self._workspace_of: tuple[Any, Path] | None = None
        self._skills_sections: dict[Trust, tuple[Any, str]] = {}
        #: The system message last sent per trust, with the prompt text it holds.
        self._system_messages: dict[Trust, tuple[str, Message]] = {}
        #: The agent loop last built per trust (rebuilt when its snapshot or caller changes).
        self._loops: dict[Trust, Any] = {}
        #: The event loop the turns last ran on, and anyio's cancel-scope factory for it.
        self._scopes: tuple[Any, Callable[..., Any]] | None = None

    # ------------------------------------------------------------------ TurnExecutor

    async def run_turn(self, job: TurnJob) -> None:
        try:
            job.result = await self._run(job)
        except anyio.get_cancelled_exc_class():
            raise
        except Exception:
            log.exception("turn failed in conversation %s", job.message.conversation_key)
            job.result = TurnOutcome(
                INTERNAL_ERROR, job.message.conversation_key, "", status="error"
            )
            with contextlib.suppress(Exception):
                await self._send(job, INTERNAL_ERROR)
        finally:
            job.done.set()

    async def on_stopped(self, job: TurnJob) -> None:
        """The queue cancelled *job*: close its turn and mark the orphaned request."""
        handle = self._handles.pop(id(job), None)
        stream = self._streams.pop(id(job), None)
        with anyio.CancelScope(shield=True):
            if stream is not None:
                with anyio.move_on_after(STREAM_CLEANUP_SECONDS):
                    await stream.abort()
            if handle is not None:
                await self.store.abandon_turn(handle.turn_id, "stopped")
                await self.store.append_marker(handle.conversation_id, STOP_MARKER)
            job.result = None
            job.done.set()

    async def _run(self, job: TurnJob) -> TurnOutcome:
        message = job.message
        key = message.conversation_key
        if self.caller is None:
            await self._send(job, NO_PROVIDER)
            return TurnOutcome(NO_PROVIDER, key, "", status="no_provider")
        conversation_id = await self.store.conversation_id(key)
        # A guest's turn replays the guests' turns only: nothing the owner said, ran or was
        # told in a shared chat reaches it (docs/gateway.md, "Shared conversations").
        visible = None if job.trust is Trust.OPERATOR else GUEST_VISIBLE
        user = user_message(message)
        speaker = "owner" if job.trust is Trust.OPERATOR else "guest"
        # One store call: the window before this message, a fresh session number and the
        # persisted user message (history → persist, in one transaction).
        start = await self.store.start_turn(
            conversation_id,
            user,
            speakers=visible,
            speaker=speaker,
            sender_id=message.sender_id,
            run_profile=job.run_profile,
            sender_name=message.sender_name,
        )
        window, session_id, handle = start.window, start.session_id, start.handle
        self._handles[id(job)] = handle
        view = self._replay(window, user, job, speaker)
        # Only a tool reads these (the memory write tools): gathered if one runs.
        owner_words = (
            functools.partial(_owner_words, window, message.text)
            if job.trust is Trust.OPERATOR
            else None
        )
        try:
            view = await self._fit(job, conversation_id, handle, window, view, user, speaker)
            tracer = self.tracer
            if tracer is not None:
                tracer.record_fields(
                    "channel_msg",
                    {
                        "direction": "inbound",
                        "channel": message.channel,
                        "trust": str(job.trust),
                        "text": Body(message.text or ""),
                        "attachments": len(message.attachments),
                    },
                    session_id=session_id,
                )
                tracer.record_fields(
                    "agent_event",
                    {"event": "turn_start", "run_profile": job.run_profile},
                    session_id=session_id,
                )
            outcome = await self._loop(job, handle, view, session_id, owner_words)
        except anyio.get_cancelled_exc_class():
            raise  # /stop: on_stopped() closes the turn with the handle still registered
        except BaseException:
            self._handles.pop(id(job), None)
            with anyio.CancelScope(shield=True):
                await self.store.abandon_turn(handle.turn_id, "failed")
            raise
        self._handles.pop(id(job), None)
        return outcome

    async def _fit(
        self,
        job: TurnJob,
        conversation_id: int,
        handle: Any,
        window: list[Any],
        view: GroupView,
        user: Message,
        speaker: str,
    ) -> GroupView:
        """The replay, compacted first when the history alone overflows the model's window.

        Summarising first means the call is made with a history that fits instead of
        failing on length. The summary is written from the whole window, so it is
        operator-only; it covers only rows before this turn's user message, which stays.
        """
        if not self._too_long([*view.history, view.user]):
            return view
        visible = None if job.trust is Trust.OPERATOR else GUEST_VISIBLE

        def before_this(rows: list[Any]) -> list[Any]:
            return [row for row in rows if row.id != handle.user_message_id]

        full = (
            window
            if visible is None
            else before_this(await self.store.load_window(conversation_id))
        )
        # The stored window already ends with this turn's user message: keep it on top of
        # the usual tail, so every row the summary leaves out stays verbatim.
        await self._compact(conversation_id, full, newer_rows=1)
        window = before_this(await self.store.load_window(conversation_id, speakers=visible))
        return self._replay(window, user, job, speaker)

    def _replay(self, window: list[Any], user: Message, job: TurnJob, speaker: str) -> GroupView:
        message = job.message
        return replay(
            window,
            user,
            speaker=speaker,
            sender_id=message.sender_id,
            sender_name=message.sender_name,
            is_group=message.is_group,
            trust=job.trust,
        )

    async def _loop(
        self,
        job: TurnJob,
        handle: Any,
        view: GroupView,
        session_id: str,
        owner_words: Callable[[], list[str]] | None,
    ) -> TurnOutcome:
        message = job.message
        key = message.conversation_key
        snapshot = self.capabilities.snapshot(job.trust, reactions=job.reply.features.reactions)
        system = self.composer.system_prompt(
            capabilities_catalog=snapshot.catalog(),
            plugins_section=snapshot.plugins_section(),
            skills_section=self._skills_section(job.trust),
            memory_context=None,
            trust=job.trust,
            today=datetime.now(UTC).date(),
            timezone=self.config.core.fermix_core.agent.timezone,
            shared_note=view.note,
        )
        if job.run_profile == "ultra":
            from fermix_core.agent.delegation import ULTRA_ADDENDUM

            system = f"{system}\n\n{ULTRA_ADDENDUM}"
        cached = self._system_messages.get(job.trust)
        if cached is None or cached[0] is not system:
            # The composer hands back the very same string while nothing in the prompt
            # changed; the (frozen) message built from it is then reused as well.
            cached = self._system_messages[job.trust] = (system, Message.system(system))
        ctx = ToolContext(
            trust=job.trust,
            cwd=job.cwd or self._workspace(),
            home=self.home,
            conversation_key=key,
            session_id=session_id,
            attended=not job.background,
            # The loop hands its tools this same snapshot mapping (never a copy to edit).
            capabilities=snapshot.specs,
            local=message.local,
            origin="background" if job.background else "main",
            services=services_with(
                self.services, reply=job.reply, config=self.config, tracer=self.tracer
            ),
        )
        ctx.state["run_profile"] = job.run_profile  # delegation widens its caps for ultra
        if message.message_id:
            ctx.state["inbound_message_id"] = message.message_id
        if owner_words is not None:
            # What a standing instruction may quote (fermix_core.memory.directives); the
            # loop fills it in before the turn's first tool call.
            ctx.state[DEFERRED_STATE] = {OWNER_MESSAGES_STATE: owner_words}
        if not message.local and not job.background:
            # On a chat channel a confirmed directory grant re-runs this request; the
            # one-shot CLI prints the prompt and the owner re-runs the command.
            ctx.state["resume"] = job
        loop = self._loops.get(job.trust)
        if loop is None or loop.capabilities is not snapshot or loop.caller is not self.caller:
            from fermix_core.agent import AgentLoop

            # A loop keeps nothing between runs: one per snapshot serves every turn on it.
            loop = self._loops[job.trust] = AgentLoop(
                self.caller, snapshot, emit=self.emit, tracer=self.tracer
            )
        stream = self._stream_for(job, session_id)
        try:
            result: LoopResult = await self._run_loop(
                loop, [cached[1], *view.history, view.user], ctx, job, stream
            )
        except ProviderError as exc:
            from fermix_core.routing.messages import user_message as friendly

            if stream is not None:
                await self._end_stream(job, stream)
            if self.tracer is not None:
                self.tracer.error(
                    exc, session_id=session_id, kind=str(exc.kind), provider=exc.provider
                )
            text = friendly(exc)
            await self.store.abandon_turn(handle.turn_id, "failed")
            await self._send(job, text)
            return TurnOutcome(text, key, session_id, status="error", provider=exc.provider)
        outcome = TurnOutcome(
            result.text,
            key,
            session_id,
            tool_calls=[
                {"name": c.name, "ok": c.ok, **({"error": c.error} if c.error else {})}
                for c in result.tool_calls
            ],
            usage=result.usage.counts(),
            model=result.model,
            provider=result.provider,
        )
        if result.empty:
            # An empty completion is answered honestly and never committed.
            await self.store.abandon_turn(handle.turn_id, "empty")
            await self._deliver(job, stream, result.text)
            outcome.status = "empty"
            return outcome
        await self._deliver(job, stream, result.text)
        tracer = self.tracer
        if tracer is not None:
            tracer.record_fields(
                "channel_msg",
                {"direction": "outbound", "channel": message.channel, "text": Body(result.text)},
                session_id=session_id,
            )
        with self._shielded():  # delivered: the commit must not be torn
            await self.store.commit_turn(
                handle.turn_id,
                result.messages,
                usage=result.usage,
                model=result.model,
                provider=result.provider,
            )
        if tracer is not None:
            tracer.record_fields(
                "agent_event",
                {
                    "event": "turn_commit",
                    "model": result.model,
                    "provider": result.provider,
                    "tool_calls": len(result.tool_calls),
                    "iterations": getattr(result, "iterations", None),
                },
                session_id=session_id,
            )
        self._after_reply(handle.conversation_id, result.usage, result.model)
        return outcome

    def _shielded(self) -> Any:
        """``anyio.CancelScope(shield=True)``, made through the running loop's backend.

        ``anyio.CancelScope()`` asks which async library runs on every call; a turn makes
        one for its commit, so the backend's factory is looked up once per event loop.
        """
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:  # not asyncio: anyio finds the backend itself
            return anyio.CancelScope(shield=True)
        scopes = self._scopes
        if scopes is None or scopes[0] is not running:
            backend = anyio.lowlevel.current_token().backend_class
            scopes = self._scopes = (running, backend.create_cancel_scope)
        return scopes[1](shield=True)

    def _skills_section(self, trust: Trust) -> str:
        """The prompt's skills section, rebuilt only when the loaded skills change.

        A skill registry replaces its (read-only) mapping whenever it reloads, so the
        mapping's identity says whether the section built from it still holds.
        """
        skills = self.skills
        if not skills:
            return ""
        loaded = getattr(skills, "skills", None)
        cached = self._skills_sections.get(trust)
        if cached is not None and loaded is not None and cached[0] is loaded:
            return cached[1]
        section = skills.prompt_section(trust)
        if loaded is not None:
            self._skills_sections[trust] = (loaded, section)
        return section

    def _workspace(self) -> Path:
        """``home.workspace``, joined once per home instead of once per turn."""
        home = self.home
        cached = self._workspace_of
        if cached is None or cached[0] is not home:
            cached = self._workspace_of = (home, home.workspace)
        return cached[1]

    # ------------------------------------------------------------------ streaming

    def _stream_for(self, job: TurnJob, session_id: str) -> StreamController | None:
        """A live stream for a foreground channel turn whose port streams; else ``None``.

        Background work, jobs and local surfaces (their features say ``off``) never stream;
        a ``draft`` on a port that cannot edit streams nothing (``stream_mode`` is off).
        A port with ``turn_stream(message, session_id)`` may hand back its own controller
        (``running()``, ``on_event``, ``finish(text)``, ``abort()``, as StreamController).
        """
        if job.background or job.run_profile not in STREAMED_PROFILES:
            return None
        own = getattr(job.reply, "turn_stream", None)
        if callable(own):
            # A surface with its own live protocol (ACP's session/update) streams the
            # events itself; it answers None to fall back to the chat strategies.
            custom = own(job.message, session_id)
            if custom is not None:
                return custom
        mode = getattr(job.reply.features, "stream_mode", "off")
        if mode == "off":
            return None
        from fermix_core.channels.streaming import StreamController

        message = job.message
        return StreamController(
            job.reply,
            chat_id=message.chat_id,
            thread_id=message.thread_id,
            mode=mode,
            session_id=session_id,
            emit=self.emit,
            dialect=reply_dialect(job.reply),
        )

    async def _run_loop(
        self,
        loop: Any,
        messages: list[Message],
        ctx: ToolContext,
        job: TurnJob,
        stream: StreamController | None,
    ) -> LoopResult:
        if stream is None:
            return await loop.run(messages, ctx)
        self._streams[id(job)] = stream
        if callable(getattr(stream, "tool_started", None)):
            from fermix_core.agent.loop import TOOL_WATCH_STATE

            ctx.state[TOOL_WATCH_STATE] = stream
        try:
            async with stream.running():
                return await loop.run(messages, ctx, stream=True, on_event=stream.on_event)
        except anyio.get_cancelled_exc_class():
            raise  # /stop: on_stopped() deletes the live draft
        except ProviderError:
            raise
        except BaseException:
            await self._end_stream(job, stream)
            raise

    async def _end_stream(self, job: TurnJob, stream: StreamController) -> None:
        """The turn failed: the live draft and any 💭 lines go; sealed cards stay."""
        self._streams.pop(id(job), None)
        with anyio.CancelScope(shield=True), anyio.move_on_after(STREAM_CLEANUP_SECONDS):
            await stream.abort()

    async def _deliver(self, job: TurnJob, stream: StreamController | None, text: str) -> None:
        """Send the final answer, minus whatever the live stream already delivered."""
        if stream is not None:
            text = await stream.finish(text) or ""
            self._streams.pop(id(job), None)
        await self._send(job, text)

    async def _send(self, job: TurnJob, text: str) -> None:
        if not text:
            return
        message = job.message
        # An undelivered reply was logged by the port with its conversation; the turn still
        # commits it to history, so nothing is lost silently.
        try:
            await job.reply.send(reply_message(message.chat_id, message.thread_id, text))
        except _reply_undelivered():  # looked up only when the send failed
            pass

    # ------------------------------------------------------------------ post-reply work

    def _after_reply(self, conversation_id: int, usage: Usage, model: str | None) -> None:
        for note in self.on_reply:
            try:
                note()
            except Exception:
                log.exception("reply listener %r failed", note)
        if self.task_group is None:
            return
        hooks = self.post_reply_hooks
        if hooks and self.post_reply_wanted:
            wanted = self.post_reply_wanted
            hooks = [hook for hook in hooks if (check := wanted.get(hook)) is None or check()]
        if not hooks and not self._compaction_due(usage, model):
            return  # nothing to run after this reply: no task for it
        if self._post_reply_pending == 0:
            self._post_reply_idle = anyio.Event()
        self._post_reply_pending += 1
        self.task_group.start_soon(self._post_reply, conversation_id, usage, model, hooks)

    @property
    def post_reply_pending(self) -> int:
        """How many replies' post-reply work (memory review, compaction) is still running."""
        return self._post_reply_pending

    async def post_reply_drained(self) -> None:
        """Return once no post-reply work is running (a daemon-less caller's exit waits)."""
        await self._post_reply_idle.wait()

    async def _post_reply(
        self,
        conversation_id: int,
        usage: Usage,
        model: str | None,
        hooks: list[Callable[[int], Any]],
    ) -> None:
        """Supervised: nothing here can fail a reply that was already delivered."""
        try:
            for hook in hooks:
                try:
                    await hook(conversation_id)
                except Exception:
                    log.exception("post-reply hook %r failed", hook)
            if self._compaction_due(usage, model):
                await self._compact(conversation_id, await self.store.load_window(conversation_id))
        except Exception:
            log.exception("post-reply work failed for conversation %s", conversation_id)
        finally:
            self._post_reply_pending -= 1
            if self._post_reply_pending == 0:
                self._post_reply_idle.set()

    def _compaction_due(self, usage: Usage, model: str | None) -> bool:
        """Whether the reply's prompt filled enough of the model's window to compact."""
        settings = self.config.core.fermix_core.compaction
        if not settings.enabled:
            return False
        window = self.context_window(model)
        return bool(window) and usage.input_tokens >= settings.threshold * window

    def _too_long(self, messages: list[Message]) -> bool:
        window = self.context_window(None)
        if not window:
            return False
        return estimate_tokens(messages) > window

    async def _compact(self, conversation_id: int, window: list[Any], newer_rows: int = 0) -> str:
        """Summarise all but the last few messages of *window* (``StoredMessage`` rows).

        *newer_rows* counts rows already stored after *window* (kept besides its tail).
        """
        if self.caller is None or len(window) <= COMPACTION_KEEP:
            return ""
        # Labelled as a shared chat would replay them, so the summary keeps who said what.
        older = replay(
            window[:-COMPACTION_KEEP],
            Message.user(SUMMARY_PROMPT),
            speaker="system",
            sender_id=None,
            sender_name=None,
            is_group=False,
            trust=Trust.OPERATOR,
        ).history
        request = ChatRequest(
            messages=[Message.system(SUMMARY_PROMPT), *older, Message.user(SUMMARY_PROMPT)]
        )
        turn, _route = await self.caller.initial(request)
        summary = turn.content.strip()
        if not summary:
            return ""
        # covered_through: a turn that committed while the summary was being written
        # stays in the window whole instead of vanishing behind the summary.
        await self.store.replace_with_summary(
            conversation_id,
            summary,
            keep_last=COMPACTION_KEEP + newer_rows,
            covered_through=window[-1].seq,
        )
        self.emit("compaction.done", conversation_id=conversation_id, kept=COMPACTION_KEEP)
        return summary

    # ------------------------------------------------------------------ CommandServices

    async def clear_conversation(self, key: ConversationKey) -> None:
        await self.store.clear_window(await self.store.conversation_id(key))

    async def compact_conversation(self, key: ConversationKey) -> str:
        conversation_id = await self.store.conversation_id(key)
        window = await self.store.load_window(conversation_id)
        if len(window) <= COMPACTION_KEEP:
            return "Nothing to compact yet — the conversation is still short."
        summary = await self._compact(conversation_id, window)
        return (
            "Compacted: older messages are now a summary."
            if summary
            else "Compaction produced no summary."
        )

    async def start_background(self, job: TurnJob) -> str | None:
        running = [t for t in self._background.values() if t.status == "running"]
        if len(running) >= MAX_BACKGROUND or self.task_group is None:
            return None
        self._bg_counter += 1
        task = BackgroundTask(
            f"bg{self._bg_counter}",
            job.message.conversation_key,
            job.message.text or "",
            time.time(),
        )
        self._background[task.id] = task
        self._recent.setdefault(task.key, deque(maxlen=RECENT_BACKGROUND)).append(task)
        job.background = True
        self.task_group.start_soon(self._run_background, task, job)
        return task.id

    async def _run_background(self, task: BackgroundTask, job: TurnJob) -> None:
        with anyio.CancelScope() as scope:
            task.scope = scope
            try:
                await self.run_turn(job)
                task.status = "done"
            except Exception:
                log.exception("background task %s failed", task.id)
                task.status = "failed"
        if scope.cancel_called:
            task.status = "stopped"
        task.finished = time.time()
        self._background.pop(task.id, None)

    def background_tasks(self, key: ConversationKey) -> list[dict]:
        return [t.as_dict() for t in self._recent.get(key, ())]

    async def stop_conversation(self, key: ConversationKey) -> Any:
        for task in list(self._background.values()):
            if task.key == key and task.scope is not None:
                task.scope.cancel()
        return await self.queue.stop(key)

    async def submit_turn(self, job: TurnJob) -> None:
        await self.queue.submit(job)

    async def resume_after_grant(self, pending: Any) -> None:
        """A confirmed directory grant: re-run the request that asked for it."""
        from fermix_core.gateway import TurnJob as Job

        original = pending.context.get("resume") if pending.kind == "grant" else None
        if original is None or self.queue is None:
            return
        await self.queue.submit(
            Job(
                message=original.message,
                trust=original.trust,
                reply=original.reply,
                run_profile=original.run_profile,
                cwd=original.cwd,
            )
        )


@functools.cache
def _reply_undelivered() -> type[Exception]:
    """``ReplyUndelivered``, imported on the first reply rather than on every one."""
    from fermix_core.channels.outbound import ReplyUndelivered

    return ReplyUndelivered


def _owner_words(window: list[Any], text: str | None) -> list[str]:
    """The owner's own message texts of *window*, then this turn's *text*."""
    return [
        row.message.text
        for row in window
        if row.speaker == "owner" and row.kind == "message" and row.message.role == "user"
    ] + [text]


def reply_message(chat_id: str, thread_id: str | None, text: str) -> OutboundMessage:
    """``OutboundMessage(chat_id=…, thread_id=…, text=…)`` for the turn's reply.

    The ids come from the validated inbound message and the text is the model's visible
    answer, so the message is made without validating them again; anything validation
    would change or refuse (a blank text, a missing chat id) goes through it as usual.
    """
    if (
        type(chat_id) is str
        and chat_id
        and (thread_id is None or type(thread_id) is str)
        and type(text) is str
        and text.strip()
    ):
        return built_instance(
            OutboundMessage,
            {
                "chat_id": chat_id,
                "thread_id": thread_id,
                "text": text,
                "attachments": [],
                "reply_to": None,
                "silent": False,
                "plain": False,
            },
            {"chat_id", "thread_id", "text"},
        )
    return OutboundMessage(chat_id=chat_id, thread_id=thread_id, text=text)


def reply_dialect(reply: Any) -> str:
    """The presentation dialect behind a reply port: its own, else its channel's."""
    dialect = getattr(reply, "dialect", None) or getattr(
        getattr(reply, "channel", None), "dialect", None
    )
    return dialect if isinstance(dialect, str) and dialect else "plain"


def user_message(message: Any) -> Message:
    """The stored/sent form of an inbound message: its text and any images."""
    parts: list[Any] = []
    if message.text:
        parts.append(text_part(message.text))
    for attachment in message.attachments:
        if str(attachment.kind) != "image" or attachment.withheld:
            continue
        media_type = attachment.mime_type or "image/png"
        if attachment.path is not None:
            # The gateway stored it under $FERMIX_HOME/media/images: history keeps the name,
            # and the provider reads (and fits) the file right before the call.
            parts.append(
                ImagePart(media_type=media_type, path=str(Path(attachment.path).absolute()))
            )
        else:
            parts.append(ImagePart(media_type=media_type, data=attachment.data))
    return Message.of_parts("user", parts)


def estimate_tokens(messages: list[Message]) -> int:
    """A cheap upper-ish estimate (4 characters per token) for the pre-call overflow check.

    Counts ``len(m.text)`` of each message (:func:`~fermix_core.messages.text_length`,
    inlined: this runs on the whole window before every turn) without building the text.
    """
    chars = 0
    for message in messages:
        result = message.tool_result
        parts = message.content if result is None else result.content
        if len(parts) == 1 and type(part := parts[0]) is TextPart:  # most messages
            chars += len(part.text)
            continue
        joins = 0
        for part in parts:
            if isinstance(part, TextPart) and part.text:
                chars += len(part.text)
                joins += 1
        if joins > 1:
            chars += 2 * (joins - 1)
    return chars // 4 + 4 * len(messages)
