"""The agent loop: model call, tool dispatch, repeat — until a final answer or a bound.

The loop knows nothing about channels, history storage or prompts. It is handed the messages
to send, a trust-filtered :class:`~fermix_core.agent.capabilities.Capabilities` snapshot and
a :class:`~fermix_core.agent.caller.ModelCaller`, and hands back a :class:`LoopResult` whose
``messages`` are exactly what the turn may commit.

Rules it enforces, because they cannot be left to the model:

* **Dispatch only from the snapshot.** An unknown or filtered name becomes an error *result*
  the model can read, never an exception and never a hint that the tool exists.
* **Bounded.** ``max_iterations`` model calls, and a repeated-call detector (warn at 3
  identical calls in a row, stop at 5).
* **One channel side effect per iteration.** A model that fires three reactions or
  attachments in one step gets the first and an error for the rest.
* **Crashing tools do not crash the turn.** A tool's unexpected exception is logged and the
  model is told that tool failed; cancellation still propagates.
* **Empty completions are never history.** No text and no tool call means an honest "try
  again" reply; the blank assistant message is not returned for committing.

``tool_call`` (the deferral bridge) is unwrapped before dispatch, so the detector, the
side-effect rule, records and traces all see the real tool; the tool result keeps the wire
call's id and name, which is what the provider expects to see answered.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from pydantic import ValidationError

from fermix_core.agent.bridges import ToolCallArgs
from fermix_core.agent.caller import ModelCaller
from fermix_core.agent.capabilities import Capabilities
from fermix_core.agent.detector import RepeatedCallDetector
from fermix_core.agent.observe import Observer
from fermix_core.messages import (
    Message,
    TextPart,
    ToolCall,
    ToolDefinition,
    ToolResult,
    Turn,
    Usage,
    built_instance,
    text_part,
)
from fermix_core.provider import ChatRequest, EventCallback, ProviderError
from fermix_core.specs import REASONING_EFFORTS, PolicyClass
from fermix_core.tool import (
    ToolBuildError,
    ToolContext,
    ToolOutput,
    format_validation_error,
    resolve_deferred_state,
)

__all__ = [
    "DEFAULT_MAX_ITERATIONS",
    "EMPTY_REPLY",
    "AgentLoop",
    "LoopResult",
    "ToolCallRecord",
]

log = logging.getLogger("fermix.agent")

DEFAULT_MAX_ITERATIONS = 100

#: ``ctx.state`` key of an optional tool watcher: an object with sync
#: ``tool_started(call_id, name, arguments)`` and ``tool_finished(call_id, name, ok)``
#: methods, told about every call the model makes (ACP reports them as tool-call updates).
TOOL_WATCH_STATE = "tool_watch"


def _watch(ctx: ToolContext, method: str, *args: Any) -> None:
    watcher = ctx.state.get(TOOL_WATCH_STATE)
    hook = getattr(watcher, method, None)
    if not callable(hook):
        return
    try:
        hook(*args)
    except Exception:
        log.exception("tool watcher %s failed", method)


EMPTY_REPLY = "I came back empty-handed on that one — please try again."
BRIDGE_CALL = "tool_call"
_ERROR_EXCERPT = 300


@dataclass
class ToolCallRecord:
    """One dispatched (or refused) tool call, by its real name."""

    name: str
    ok: bool
    error: str | None = None


@dataclass
class LoopResult:
    """What one loop run produced.

    ``messages`` holds the assistant and tool messages in order — what the turn commits.
    ``aborted`` names the bound that stopped the loop (``"repeated_tool_call"``,
    ``"max_iterations"``); the honest closing text is then also the last assistant message.
    """

    text: str
    messages: list[Message]
    tool_calls: list[ToolCallRecord]
    usage: Usage
    model: str | None
    provider: str | None
    empty: bool = False
    aborted: str | None = None
    iterations: int = 0


@dataclass
class _Dispatch:
    """A tool call after unwrapping: the real target and the wire call it answers."""

    call: ToolCall
    name: str
    arguments: Mapping[str, Any]
    via: str | None = None
    refusal: str | None = None


#: What the model reads for a tool that answered with no content at all. (Both made without
#: a validation round: validating would build the models' validators at import.)
_NO_OUTPUT = text_part("(the tool returned no output)")
#: A run's usage before its first call (frozen, so one instance serves every run).
_NO_USAGE = Usage.model_construct()


@dataclass
class _RunState:
    """What one agent run accumulates across its model calls and tool rounds."""

    history: list[Message]
    produced: list[Message] = field(default_factory=list)
    records: list[ToolCallRecord] = field(default_factory=list)
    usage: Usage = _NO_USAGE
    model: str | None = None
    provider: str | None = None
    route: object | None = None
    side_effect_done: bool = False
    #: A tool answered the turn by itself (``react``): no closing model call, no text.
    end_turn: bool = False
    iterations: int = 0


def _crashed(name: str) -> ToolOutput:
    return ToolOutput.error(
        f"Tool {name!r} failed unexpectedly (an internal error, not a problem "
        "with your arguments). Try a different approach."
    )


def cap_output(output: ToolOutput, limit: int) -> ToolOutput:
    """*output* with its text cut to *limit* characters, ending in a marker the model reads.

    Only text counts (images and other parts pass through); the head is kept because that
    is where tools put what matters first (exit codes, titles, the first matches).
    """
    total = sum(len(part.text) for part in output.content if isinstance(part, TextPart))
    if total <= limit:
        return output
    left = limit
    content: list[Any] = []
    for part in output.content:
        if not isinstance(part, TextPart):
            content.append(part)
        elif left > 0:
            content.append(TextPart(text=part.text[:left]))
            left -= min(left, len(part.text))
    cut = total - limit
    content.append(
        TextPart(
            text=(
                f"\n[output truncated: {cut:,} of {total:,} characters were cut; the first "
                f"{limit:,} are above. Ask for less (a range, a filter, a smaller page) to "
                "see the rest.]"
            )
        )
    )
    return output.model_copy(update={"content": content})


def _route_provider(route: object) -> str | None:
    """The provider name behind an opaque route handle, whatever shape the caller gives it."""
    for attr in ("provider_name", "provider"):
        value = getattr(route, attr, None)
        if isinstance(value, str) and value:
            return value
        name = getattr(value, "name", None)
        if isinstance(name, str) and name:
            return name
    name = getattr(route, "name", None)
    return name if isinstance(name, str) and name else None


#: The fields the loop sets on each request (its ``model_fields_set``).
_REQUEST_FIELDS = frozenset(
    {
        "messages",
        "tools",
        "model",
        "reasoning_effort",
        "stream",
        "initial",
        "inner_retry",
        "on_event",
    }
)


def _plain_tools(tools: list[Any]) -> bool:
    """Whether every tool definition is one a :class:`ChatRequest` keeps as it is."""
    return all(type(tool) is ToolDefinition for tool in tools)


def _plain_request_inputs(
    messages: list[Any],
    tools_plain: bool,
    model: Any,
    reasoning_effort: Any,
    stream: Any,
    inner_retry: Any,
    on_event: Any,
) -> bool:
    """Whether a :class:`ChatRequest` of these would keep every value exactly as given.

    Built messages and tool definitions, ``str``/``None`` model, a known effort, ``bool``
    flags and a callable (or no) event hook; anything else is left to validation, which
    coerces it or says what is wrong.
    """
    if not messages or not tools_plain:
        return False
    for message in messages:
        if type(message) is not Message:
            return False
    return (
        (model is None or type(model) is str)
        and (
            reasoning_effort is None
            or (type(reasoning_effort) is str and reasoning_effort in REASONING_EFFORTS)
        )
        and type(stream) is bool
        and type(inner_retry) is bool
        and (on_event is None or callable(on_event))
    )


def _excerpt(text: str) -> str:
    return text if len(text) <= _ERROR_EXCERPT else text[: _ERROR_EXCERPT - 1] + "…"


class AgentLoop:
    """Runs one bounded model ↔ tool loop over a capability snapshot."""

    def __init__(
        self,
        caller: ModelCaller,
        capabilities: Capabilities,
        *,
        max_iterations: int = DEFAULT_MAX_ITERATIONS,
        emit: Callable[..., object] | None = None,
        tracer: object | None = None,
    ) -> None:
        if max_iterations < 1:
            raise ValueError("max_iterations must be at least 1")
        self.caller = caller
        self.capabilities = capabilities
        self.max_iterations = max_iterations
        self._observe = Observer(emit, tracer)
        #: The snapshot's wire tool list (fixed for a snapshot; never handed out, only
        #: copies) and whether a request keeps it as it is.
        self._tools: list[ToolDefinition] | None = None
        self._tools_plain = False

    async def run(
        self,
        messages: list[Message],
        ctx: ToolContext,
        *,
        model: str | None = None,
        reasoning_effort: str | None = None,
        stream: bool = False,
        on_event: EventCallback | None = None,
        inner_retry: bool = True,
    ) -> LoopResult:
        """Loop until the model answers without tool calls, or a bound stops it.

        Provider failures propagate as :class:`~fermix_core.provider.ProviderError`; the
        caller decides what the user is told and what is committed.
        """
        if not messages:
            raise ValueError("the agent loop needs at least one message to send (the user's)")
        caps = self.capabilities
        # Tools see exactly the snapshot they are dispatched from (tool_help reads it); the
        # turn runner already builds its context with it, and then no copy is needed.
        if ctx.capabilities is not caps.specs:
            ctx = replace(ctx, capabilities=caps.specs)
        if caps.reactions is not None:
            ctx.state["allowed_reactions"] = caps.reactions
        state = _RunState(history=list(messages))
        detector: RepeatedCallDetector | None = None  # made by the run's first tool call
        tools = self._tools
        if tools is None:
            tools = self._tools = caps.definitions()
            self._tools_plain = _plain_tools(tools)
        # Every request of this run is built from these; when they are all of the types a
        # ChatRequest keeps as is, each is made without validating them again (the history
        # only grows by messages this loop built).
        plain = _plain_request_inputs(
            state.history,
            self._tools_plain,
            model,
            reasoning_effort,
            stream,
            inner_retry,
            on_event,
        )

        for iteration in range(1, self.max_iterations + 1):
            state.iterations = iteration
            if plain:
                request = built_instance(
                    ChatRequest,
                    {
                        "messages": list(state.history),
                        "tools": list(tools),
                        "model": model,
                        "reasoning_effort": reasoning_effort,
                        "stream": stream,
                        "initial": iteration == 1,
                        "inner_retry": inner_retry,
                        "on_event": on_event,
                    },
                    set(_REQUEST_FIELDS),
                )
            else:
                request = ChatRequest(
                    messages=state.history,
                    tools=tools,
                    model=model,
                    reasoning_effort=reasoning_effort,
                    stream=stream,
                    initial=iteration == 1,
                    inner_retry=inner_retry,
                    on_event=on_event,
                )
            turn = await self._call(request, state, ctx, iteration)

            if not turn.tool_calls:
                return self._finish(turn, state, ctx)

            assistant = turn.to_message()
            if detector is None:
                detector = RepeatedCallDetector()
            results, stopped = await self._dispatch_all(turn.tool_calls, state, detector, ctx)
            state.history += [assistant, *results]
            state.produced += [assistant, *results]
            if stopped is not None:
                text = (
                    f"I stopped because I kept repeating the same step ({stopped} with the same "
                    "arguments) without getting anywhere. Tell me how you'd like to proceed, "
                    "or give me more to go on."
                )
                return self._abort("repeated_tool_call", text, state, ctx)
            if state.end_turn:
                # The reaction was the reply: the turn ends without another model call and
                # without a text bubble.
                return self._result("", state)

        text = (
            f"I stopped after {self.max_iterations} steps without reaching a final answer. "
            "Tell me whether to keep going, or narrow the task down."
        )
        return self._abort("max_iterations", text, state, ctx)

    # ------------------------------------------------------------------ model calls

    async def _call(
        self, request: ChatRequest, state: _RunState, ctx: ToolContext, iteration: int
    ) -> Turn:
        started = time.perf_counter()
        try:
            if iteration == 1:
                turn, state.route = await self.caller.initial(request)
                state.provider = _route_provider(state.route)
            else:
                turn = await self.caller.continuation(state.route, request)
        except ProviderError as exc:
            self._observe.record(
                "llm_call",
                session_id=ctx.session_id,
                iteration=iteration,
                initial=request.initial,
                status="error",
                error_kind=exc.kind.value,
                provider=exc.provider or state.provider,
                duration_ms=(time.perf_counter() - started) * 1000,
            )
            raise
        state.usage = state.usage + turn.usage
        state.model = turn.model or state.model
        self._observe.record(
            "llm_call",
            session_id=ctx.session_id,
            iteration=iteration,
            initial=request.initial,
            status="ok",
            model=turn.model,
            provider=state.provider,
            input_tokens=turn.usage.input_tokens,
            output_tokens=turn.usage.output_tokens,
            cached_input_tokens=turn.usage.cached_input_tokens,
            reasoning_tokens=turn.usage.reasoning_tokens,
            tool_calls=len(turn.tool_calls),
            output=turn.content,
            duration_ms=(time.perf_counter() - started) * 1000,
        )
        return turn

    # ------------------------------------------------------------------ endings

    def _result(self, text: str, state: _RunState, **extra: Any) -> LoopResult:
        return LoopResult(
            text=text,
            messages=state.produced,
            tool_calls=state.records,
            usage=state.usage,
            model=state.model,
            provider=state.provider,
            iterations=state.iterations,
            **extra,
        )

    def _finish(self, turn: Turn, state: _RunState, ctx: ToolContext) -> LoopResult:
        if not turn.is_empty:
            state.produced.append(turn.to_message())
            return self._result(turn.content, state)
        if state.side_effect_done:
            # The answer already went out as a reaction or an attachment; a blank closing
            # completion is the model choosing not to add a text bubble, not a failure.
            return self._result("", state)
        log.warning("model %s returned an empty completion", state.model)
        self._observe.emit(
            "agent.empty_completion",
            model=state.model,
            provider=state.provider,
            session_id=ctx.session_id,
        )
        return self._result(EMPTY_REPLY, state, empty=True)

    def _abort(self, reason: str, text: str, state: _RunState, ctx: ToolContext) -> LoopResult:
        log.warning("agent loop stopped (%s) after %d iterations", reason, state.iterations)
        self._observe.emit(
            "agent.loop_aborted",
            reason=reason,
            iterations=state.iterations,
            session_id=ctx.session_id,
        )
        state.produced.append(Message.assistant(text))
        return self._result(text, state, aborted=reason)

    # ------------------------------------------------------------------ tool dispatch

    def _unwrap(self, call: ToolCall) -> _Dispatch:
        if call.name != BRIDGE_CALL or not self.capabilities.is_bridge(BRIDGE_CALL):
            return _Dispatch(call, call.name, call.arguments)
        try:
            args = ToolCallArgs.model_validate(call.arguments)
        except ValidationError as exc:
            return _Dispatch(
                call, call.name, call.arguments, refusal=format_validation_error(call.name, exc)
            )
        if args.name == BRIDGE_CALL:
            refusal = "tool_call cannot run tool_call; name the tool you want directly."
            return _Dispatch(call, call.name, call.arguments, refusal=refusal)
        return _Dispatch(call, args.name, args.arguments, via=BRIDGE_CALL)

    async def _dispatch_all(
        self,
        calls: list[ToolCall],
        state: _RunState,
        detector: RepeatedCallDetector,
        ctx: ToolContext,
    ) -> tuple[list[Message], str | None]:
        """Run this iteration's calls in order; returns the tool messages and any stop."""
        resolve_deferred_state(ctx.state)
        results: list[Message] = []
        stopped: str | None = None
        side_effects = 0
        for call in calls:
            if stopped is not None:
                # Every call still needs an answer, or the wire rejects the history.
                output = ToolOutput.error("Not run: the turn was stopped before this call.")
                results.append(self._message(call, output))
                continue
            item = self._unwrap(call)
            watched = TOOL_WATCH_STATE in ctx.state
            if watched:
                _watch(ctx, "tool_started", call.id, item.name, dict(item.arguments))
            repeat = detector.observe(item.name, item.arguments)
            if repeat.action != "ok":
                self._observe.emit(
                    "agent.repeated_tool_call",
                    tool=item.name,
                    count=repeat.count,
                    action=repeat.action,
                    session_id=ctx.session_id,
                )
            spec = self.capabilities.specs.get(item.name)
            if repeat.action == "abort":
                stopped = item.name
                output = ToolOutput.error(
                    f"Not run: this is call number {repeat.count} in a row of {item.name} with "
                    "identical arguments, so the turn was stopped."
                )
            elif item.refusal is not None:
                output = ToolOutput.error(item.refusal)
            elif spec is None:
                output = ToolOutput.error(self._unknown(item.name))
            elif spec.policy is PolicyClass.CHANNEL_SIDE_EFFECT and side_effects >= 1:
                output = ToolOutput.error(
                    f"Not run: only one channel action (reaction, attachment …) is allowed per "
                    f"step, and this step already had one. Call {item.name} again in the next "
                    "step if it is still needed."
                )
            else:
                if spec.policy is PolicyClass.CHANNEL_SIDE_EFFECT:
                    side_effects += 1
                output = await self._invoke(item, ctx)
                if spec.policy is PolicyClass.CHANNEL_SIDE_EFFECT and not output.is_error:
                    state.side_effect_done = True
                    if output.data.get("end_turn"):
                        state.end_turn = True
            if repeat.action == "warn":
                output = output.model_copy(
                    update={
                        "content": [
                            *output.content,
                            TextPart(
                                text=(
                                    f"Warning: you have now made this exact call ({item.name} "
                                    f"with the same arguments) {repeat.count} times in a row. "
                                    "Repeating it will not change the result; change the "
                                    "arguments, try another approach, or answer with what you "
                                    "have. The turn stops at "
                                    f"{detector.abort_at} identical calls."
                                )
                            ),
                        ]
                    }
                )
            if watched:
                _watch(ctx, "tool_finished", call.id, item.name, not output.is_error)
            state.records.append(
                ToolCallRecord(
                    name=item.name,
                    ok=not output.is_error,
                    error=_excerpt(output.text) if output.is_error else None,
                )
            )
            results.append(self._message(call, output))
        return results, stopped

    async def _invoke(self, item: _Dispatch, ctx: ToolContext) -> ToolOutput:
        name = item.name
        started = time.perf_counter()
        # ``arguments`` is a content field: the tracer keeps it only when capture is on.
        fields: dict[str, Any] = {"call_id": item.call.id, "arguments": dict(item.arguments)}
        if item.via:
            fields["via"] = item.via
        span = self._observe.span("tool_exec", name, session_id=ctx.session_id, **fields)
        async with span as handle:
            try:
                tool = self.capabilities.tool(name)
            except ToolBuildError:
                output = ToolOutput.error(
                    f"Tool {name!r} is unavailable right now: it failed to load. Do the task "
                    "another way, or tell the user this tool is broken."
                )
            else:
                output = await self._run_tool(tool, item, ctx)
            output = cap_output(output, self.capabilities.registry.max_result_chars)
            self._observe.annotate(handle, ok=not output.is_error, result=output.text)
        self._observe.emit(
            "agent.tool_call",
            tool=name,
            ok=not output.is_error,
            via=item.via,
            duration_ms=(time.perf_counter() - started) * 1000,
            session_id=ctx.session_id,
        )
        return output

    async def _run_tool(self, tool: Any, item: _Dispatch, ctx: ToolContext) -> ToolOutput:
        """One call under its deadline; a call past it is cancelled and becomes an error."""
        name = item.name
        registry = self.capabilities.registry
        spec = self.capabilities.specs.get(name)
        limit = registry.timeout_for(spec) if spec is not None else registry.timeout_seconds
        deadline = asyncio.timeout(limit)
        try:
            async with deadline:
                return await tool.invoke(dict(item.arguments), ctx)
        except TimeoutError:
            if not deadline.expired():
                log.exception("tool %s failed unexpectedly", name)
                return _crashed(name)
            log.warning("tool %s passed its %gs deadline and was cancelled", name, limit)
            return ToolOutput.error(
                f"Tool {name!r} did not finish within {limit:g} seconds, so it was stopped and "
                "its work cancelled. Try a smaller task, or do it another way."
            )
        except Exception:
            log.exception("tool %s failed unexpectedly", name)
            return _crashed(name)

    def _unknown(self, name: str) -> str:
        where = "the capability catalog"
        if self.capabilities.bridges_active:
            where += " (or tool_search)"
        return (
            f"No tool named {name!r} is available on this turn. Check {where} for the exact name."
        )

    @staticmethod
    def _message(call: ToolCall, output: ToolOutput) -> Message:
        content = output.content or [_NO_OUTPUT]
        return Message.tool(ToolResult.of(call.id, call.name, content, output.is_error))
