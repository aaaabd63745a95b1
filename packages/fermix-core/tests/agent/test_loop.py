from __future__ import annotations

import contextlib
import logging
from types import SimpleNamespace
from typing import Any

import anyio
import pytest
from fermix_core.agent import AgentLoop, CapabilityRegistry, SingleProviderCaller
from fermix_core.agent.loop import EMPTY_REPLY
from fermix_core.messages import Message, ToolCall, Turn, Usage
from fermix_core.provider import ChatRequest, ErrorKind, ProviderError
from fermix_core.testing import FunctionProvider, ScriptedProvider, reply, tool_call, tool_calls
from fermix_core.tool import Trust

pytestmark = pytest.mark.anyio

USER = [Message.system("You are Fermix."), Message.user("hello")]


def loop_over(kit, provider, trust=Trust.OPERATOR, *, deferral=True, reactions=None, **opts):
    registry = CapabilityRegistry(kit.standard_specs(), sources=kit.sources, deferral=deferral)
    caps = registry.snapshot(trust, reactions=reactions)
    return AgentLoop(SingleProviderCaller(provider), caps, **opts)


def tool_texts(result) -> list[str]:
    return [m.tool_result.text for m in result.messages if m.role == "tool"]


# ---------------------------------------------------------------------- basics


async def test_a_text_answer_ends_the_loop(kit, ctx):
    provider = ScriptedProvider([reply("hi there", usage=Usage(input_tokens=7, output_tokens=2))])
    result = await loop_over(kit, provider).run(USER, ctx, model="m-1", reasoning_effort="low")
    assert result.text == "hi there"
    assert [m.role for m in result.messages] == ["assistant"]
    assert result.usage == Usage(input_tokens=7, output_tokens=2)
    assert (result.model, result.provider) == ("m-1", "scripted")
    assert not result.empty and result.aborted is None and result.iterations == 1
    sent = provider.last_request
    assert sent.initial and sent.inner_retry
    assert sent.model == "m-1" and sent.reasoning_effort == "low"
    assert sent.messages == USER
    assert "gmail_search" not in [t.name for t in sent.tools]


async def test_tool_round_trip_and_usage_summing(kit, ctx):
    provider = ScriptedProvider(
        [
            Turn(
                content="Let me check.",
                tool_calls=[ToolCall(id="c1", name="echo", arguments={"text": "ping"})],
                usage=Usage(input_tokens=10, output_tokens=3, cached_input_tokens=4),
                model="m-a",
            ),
            Turn(
                content="ping came back", usage=Usage(input_tokens=20, output_tokens=5), model="m-b"
            ),
        ]
    )
    history = list(USER)
    result = await loop_over(kit, provider).run(history, ctx, inner_retry=False)
    assert history == USER  # the caller's list is not mutated
    assert result.text == "ping came back"
    assert [m.role for m in result.messages] == ["assistant", "tool", "assistant"]
    assert result.messages[0].text == "Let me check."
    assert result.messages[1].tool_result.call_id == "c1"
    assert tool_texts(result) == ["echo: ping"]
    assert result.usage == Usage(input_tokens=30, output_tokens=8, cached_input_tokens=4)
    assert result.model == "m-b"
    assert [(r.name, r.ok) for r in result.tool_calls] == [("echo", True)]
    first, second = provider.requests
    assert first.initial and not second.initial
    assert not first.inner_retry and not second.inner_retry
    assert second.messages[: len(USER)] == USER
    assert second.messages[len(USER) :] == result.messages[:2]
    assert ctx.state["calls"] == [("echo", {"text": "ping"})]  # the run shares the state dict
    assert result.iterations == 2


async def test_tools_share_the_callers_state_and_see_the_snapshot(kit, guest_ctx):
    ctx = guest_ctx
    provider = ScriptedProvider([tool_call("list_tools"), reply("done")])
    result = await loop_over(kit, provider, Trust.GUEST).run(USER, ctx)
    listed = tool_texts(result)[0].split(", ")
    assert set(listed) == {
        "echo",
        "list_tools",
        "weather_lookup",
        *("tool_search", "tool_describe", "tool_call"),
    }
    assert ctx.state["calls"] == [("list_tools", {})]


async def test_streaming_requests_carry_the_event_callback(kit, ctx):
    deltas: list[str] = []

    async def on_event(event):
        if event.kind == "text_delta":
            deltas.append(event.text)

    provider = ScriptedProvider([tool_call("echo"), reply("streamed answer here")])
    result = await loop_over(kit, provider).run(USER, ctx, stream=True, on_event=on_event)
    assert "".join(deltas) == result.text == "streamed answer here"
    assert all(r.stream for r in provider.requests)


async def test_unknown_tool_name_becomes_an_error_result(kit, ctx):
    provider = ScriptedProvider([tool_call("teleport", {"to": "mars"}), reply("sorry")])
    result = await loop_over(kit, provider).run(USER, ctx)
    assert result.text == "sorry"
    (text,) = tool_texts(result)
    assert "No tool named 'teleport' is available" in text
    assert result.messages[1].tool_result.is_error
    assert result.tool_calls[0].ok is False and "teleport" in result.tool_calls[0].error


async def test_invalid_arguments_come_back_to_the_model(kit, ctx):
    provider = ScriptedProvider([tool_call("echo", {"text": 5, "extra": 1}), reply("fixed")])
    result = await loop_over(kit, provider).run(USER, ctx)
    (text,) = tool_texts(result)
    assert "invalid arguments for tool 'echo'" in text and "extra" in text
    assert "calls" not in ctx.state


async def test_tool_errors_and_crashes_do_not_end_the_turn(kit, ctx, caplog):
    specs = [kit.spec("crash", tool=kit.Crash), kit.spec("refuse", tool=kit.Refuse)]
    caps = CapabilityRegistry(specs).snapshot(Trust.OPERATOR)
    provider = ScriptedProvider([tool_calls(("crash", {}), ("refuse", {})), reply("recovered")])
    with caplog.at_level(logging.ERROR, logger="fermix.agent"):
        result = await AgentLoop(SingleProviderCaller(provider), caps).run(USER, ctx)
    assert result.text == "recovered"
    crash, refuse = tool_texts(result)
    assert "'crash' failed unexpectedly" in crash
    assert "sk-should-not" not in crash  # exception details stay in the log, not the prompt
    assert refuse == "the thing is not there; try another path"
    assert "tool crash failed unexpectedly" in caplog.text
    assert [r.ok for r in result.tool_calls] == [False, False]


async def test_a_tool_returning_nothing_still_answers_the_call(kit, ctx):
    caps = CapabilityRegistry([kit.spec("quiet", tool=kit.Silent)]).snapshot(Trust.OPERATOR)
    provider = ScriptedProvider([tool_call("quiet"), reply("ok")])
    result = await AgentLoop(SingleProviderCaller(provider), caps).run(USER, ctx)
    assert tool_texts(result) == ["(the tool returned no output)"]


async def test_empty_history_is_refused(kit, ctx):
    with pytest.raises(ValueError, match="at least one message"):
        await loop_over(kit, ScriptedProvider()).run([], ctx)


async def test_provider_errors_propagate(kit, ctx):
    provider = ScriptedProvider([ProviderError(ErrorKind.AUTH, "bad key")])
    with pytest.raises(ProviderError) as info:
        await loop_over(kit, provider).run(USER, ctx)
    assert info.value.kind is ErrorKind.AUTH


# ---------------------------------------------------------------------- trust


async def test_guest_cannot_call_owner_tools_by_name(kit, guest_ctx):
    hidden = ["shell", "file_read", "secret_note", "job_runs", "gmail_search", "send_attachment"]
    provider = ScriptedProvider([tool_calls(*((n, {}) for n in hidden)), reply("ok")])
    result = await loop_over(kit, provider, Trust.GUEST).run(USER, guest_ctx)
    for name, text in zip(hidden, tool_texts(result), strict=True):
        assert f"No tool named {name!r} is available" in text
    assert "calls" not in guest_ctx.state
    wire = {t.name for t in provider.requests[0].tools}
    assert wire == {"echo", "list_tools", "tool_search", "tool_describe", "tool_call"}


async def test_guest_cannot_reach_owner_tools_through_tool_call(kit, guest_ctx):
    provider = ScriptedProvider(
        [
            tool_call("tool_call", {"name": "gmail_search", "arguments": {"text": "x"}}),
            tool_call("tool_call", {"name": "shell", "arguments": {}}),
            reply("ok"),
        ]
    )
    result = await loop_over(kit, provider, Trust.GUEST).run(USER, guest_ctx)
    texts = tool_texts(result)
    assert "No tool named 'gmail_search' is available" in texts[0]
    assert "No tool named 'shell' is available" in texts[1]
    assert "calls" not in guest_ctx.state
    assert [r.name for r in result.tool_calls] == ["gmail_search", "shell"]


async def test_guest_cannot_discover_owner_tools_through_tool_search(kit, guest_ctx):
    provider = ScriptedProvider([tool_call("tool_search", {"query": "gmail email"}), reply("ok")])
    result = await loop_over(kit, provider, Trust.GUEST).run(USER, guest_ctx)
    assert "gmail_search" not in tool_texts(result)[0]


# ---------------------------------------------------------------------- deferral


async def test_deferred_tool_runs_through_tool_call_under_its_real_name(kit, ctx):
    provider = ScriptedProvider(
        [
            Turn(
                tool_calls=[
                    ToolCall(
                        id="b1",
                        name="tool_call",
                        arguments={"name": "gmail_search", "arguments": {"text": "invoice"}},
                    )
                ],
                model="",
            ),
            reply("found it"),
        ]
    )
    result = await loop_over(kit, provider).run(USER, ctx)
    assert tool_texts(result) == ["gmail_search: invoice"]
    wire_result = result.messages[1].tool_result
    assert (wire_result.call_id, wire_result.name) == ("b1", "tool_call")
    assert [r.name for r in result.tool_calls] == ["gmail_search"]


async def test_deferred_tool_can_also_be_called_directly_by_name(kit, ctx):
    provider = ScriptedProvider([tool_call("weather_lookup", {"text": "Oslo"}), reply("rainy")])
    result = await loop_over(kit, provider).run(USER, ctx)
    assert tool_texts(result) == ["weather_lookup: Oslo"]
    assert "weather_lookup" not in {t.name for t in provider.requests[0].tools}


async def test_malformed_tool_call_arguments_are_reported(kit, ctx):
    provider = ScriptedProvider(
        [
            tool_call("tool_call", {"arguments": {}}),
            tool_call("tool_call", {"name": "tool_call"}),
            reply("ok"),
        ]
    )
    result = await loop_over(kit, provider).run(USER, ctx)
    missing, nested = tool_texts(result)
    assert "invalid arguments for tool 'tool_call'" in missing and "name" in missing
    assert "cannot run tool_call" in nested


async def test_with_deferral_off_tool_call_is_just_an_unknown_tool(kit, ctx):
    provider = ScriptedProvider(
        [tool_call("tool_call", {"name": "echo", "arguments": {"text": "x"}}), reply("ok")]
    )
    result = await loop_over(kit, provider, deferral=False).run(USER, ctx)
    assert "No tool named 'tool_call' is available" in tool_texts(result)[0]
    assert "gmail_search" in {t.name for t in provider.requests[0].tools}


# ---------------------------------------------------------------------- repeated calls


async def test_detector_warns_at_three_identical_calls(kit, ctx):
    same = [tool_call("echo", {"text": "a"}, id=f"c{i}") for i in range(3)]
    provider = ScriptedProvider([*same, reply("ok")])
    result = await loop_over(kit, provider).run(USER, ctx)
    texts = tool_texts(result)
    assert not any("Warning" in t for t in texts[:2])
    assert texts[2].startswith("echo: a")
    assert "3 times in a row" in texts[2]
    assert result.aborted is None and result.text == "ok"


async def test_detector_aborts_at_five_with_an_honest_answer(kit, ctx):
    same = [tool_call("echo", {"text": "a"}, id=f"c{i}") for i in range(5)]
    provider = ScriptedProvider(same)
    result = await loop_over(kit, provider).run(USER, ctx)
    assert result.aborted == "repeated_tool_call"
    assert "repeating the same step (echo" in result.text
    assert result.messages[-1] == Message.assistant(result.text)
    assert len(ctx.state["calls"]) == 4  # the fifth identical call never ran
    assert "call number 5" in tool_texts(result)[-1]
    assert provider.remaining == 0


async def test_key_order_does_not_make_calls_different(kit, ctx):
    args = [{"text": "a"}, {"text": "a"}]
    provider = ScriptedProvider(
        [tool_call("echo", a, id=f"c{i}") for i, a in enumerate(args * 2)]
        + [tool_call("tool_call", {"arguments": {"text": "a"}, "name": "echo"}), reply("x")]
    )
    result = await loop_over(kit, provider).run(USER, ctx)
    assert result.aborted == "repeated_tool_call"  # the bridge-wrapped fifth is the same call


async def test_a_different_call_breaks_the_run(kit, ctx):
    calls = [("a"), ("a"), ("b"), ("a"), ("a"), ("a"), ("a")]
    provider = ScriptedProvider(
        [tool_call("echo", {"text": t}, id=f"c{i}") for i, t in enumerate(calls)] + [reply("ok")]
    )
    result = await loop_over(kit, provider).run(USER, ctx)
    assert result.aborted is None
    warned = ["Warning" in t for t in tool_texts(result)]
    assert warned == [False, False, False, False, False, True, True]


async def test_abort_answers_every_remaining_call_in_the_step(kit, ctx):
    repeat = [tool_call("echo", {"text": "a"}, id=f"c{i}") for i in range(4)]
    last = tool_calls(("echo", {"text": "a"}), ("web_fetch", {}))
    provider = ScriptedProvider([*repeat, last])
    result = await loop_over(kit, provider).run(USER, ctx)
    assert result.aborted == "repeated_tool_call"
    tail = result.messages[-3:]
    assert [m.role for m in tail] == ["tool", "tool", "assistant"]
    assert "stopped before this call" in tail[1].tool_result.text


# ---------------------------------------------------------------------- side effects


async def test_only_one_channel_side_effect_per_iteration(kit, ctx):
    provider = ScriptedProvider(
        [
            tool_calls(
                ("react", {"emoji": "👍"}), ("send_attachment", {}), ("react", {"emoji": "🔥"})
            ),
            tool_call("send_attachment", {"text": "later"}),
            reply("sent"),
        ]
    )
    result = await loop_over(kit, provider, reactions=["👍", "🔥"]).run(USER, ctx)
    first, second, third, fourth = tool_texts(result)
    assert first == "reacted 👍"
    assert "only one channel action" in second and "only one channel action" in third
    assert fourth == "send_attachment: later"
    assert [c[0] for c in ctx.state["calls"]] == ["react", "send_attachment"]
    assert ctx.state["allowed_reactions"] == ("👍", "🔥")


async def test_react_only_offered_when_the_channel_has_reactions(kit, ctx):
    provider = ScriptedProvider([tool_call("react", {"emoji": "👍"}), reply("ok")])
    result = await loop_over(kit, provider).run(USER, ctx)
    assert "No tool named 'react'" in tool_texts(result)[0]
    assert "react" not in {t.name for t in provider.requests[0].tools}


# ---------------------------------------------------------------------- endings


async def test_empty_completion_is_honest_and_never_committed(kit, ctx):
    provider = ScriptedProvider([tool_call("echo", {"text": "x"}), Turn(content="  ", model="")])
    result = await loop_over(kit, provider).run(USER, ctx)
    assert result.empty is True
    assert result.text == EMPTY_REPLY
    assert [m.role for m in result.messages] == ["assistant", "tool"]
    assert not any(m.is_empty for m in result.messages)


async def test_empty_completion_on_the_first_call(kit, ctx):
    events: list[tuple[str, dict]] = []
    provider = ScriptedProvider([""])
    loop = loop_over(kit, provider, emit=lambda name, **data: events.append((name, data)))
    result = await loop.run(USER, ctx)
    assert result.empty and result.messages == []
    assert events[-1][0] == "agent.empty_completion"


async def test_blank_finish_after_a_reaction_is_a_silent_success(kit, ctx):
    provider = ScriptedProvider([tool_call("react", {"emoji": "👍"}), ""])
    result = await loop_over(kit, provider, Trust.GUEST, reactions=["👍"]).run(USER, ctx)
    assert result.empty is False and result.text == ""
    assert [m.role for m in result.messages] == ["assistant", "tool"]


async def test_a_reaction_that_ends_the_turn_makes_no_further_model_call(kit, ctx):
    ctx.state["react_ends_turn"] = True
    provider = ScriptedProvider([tool_call("react", {"emoji": "👍"})])  # no closing answer scripted
    result = await loop_over(kit, provider, reactions=["👍"]).run(USER, ctx)
    assert result.empty is False and result.text == ""
    assert len(provider.requests) == 1
    assert [m.role for m in result.messages] == ["assistant", "tool"]


async def test_a_failed_reaction_does_not_excuse_a_blank_answer(kit, ctx):
    provider = ScriptedProvider([tool_call("react", {"emoji": "🐙"}), ""])
    result = await loop_over(kit, provider, reactions=["👍"]).run(USER, ctx)
    assert result.empty is True


async def test_max_iterations_bounds_the_loop(kit, ctx):
    provider = FunctionProvider(
        lambda req: tool_call("echo", {"text": str(len(req.messages))}, id=f"c{len(req.messages)}")
    )
    result = await loop_over(kit, provider, max_iterations=4).run(USER, ctx)
    assert result.aborted == "max_iterations"
    assert len(provider.requests) == 4
    assert "after 4 steps" in result.text
    assert result.messages[-1].role == "assistant" and result.messages[-1].text == result.text
    assert len(result.tool_calls) == 4


async def test_default_bound_is_one_hundred(kit):
    assert loop_over(kit, ScriptedProvider()).max_iterations == 100
    with pytest.raises(ValueError, match="at least 1"):
        loop_over(kit, ScriptedProvider(), max_iterations=0)


async def test_cancellation_inside_a_tool_is_not_swallowed(kit, ctx):
    class Waits(kit.Echo):
        async def run(self, args, ctx):
            ctx.state["scope"].cancel()
            await anyio.sleep_forever()

    caps = CapabilityRegistry([kit.spec("wait", tool=Waits)]).snapshot(Trust.OPERATOR)
    provider = ScriptedProvider([tool_call("wait"), reply("never")])
    finished = False
    with anyio.CancelScope() as scope:
        ctx.state["scope"] = scope
        await AgentLoop(SingleProviderCaller(provider), caps).run(USER, ctx)
        finished = True
    assert scope.cancelled_caught and not finished
    assert provider.remaining == 1


# ---------------------------------------------------------------------- continuation seam


class RecordingCaller:
    """A ModelCaller that is not a provider: proves the loop pins and reuses the route."""

    def __init__(self, provider):
        self.provider = provider
        self.seen: list[tuple[str, object]] = []

    async def initial(self, request: ChatRequest):
        self.seen.append(("initial", None))
        return await self.provider.chat(request), {"route": 1}

    async def continuation(self, route, request: ChatRequest):
        self.seen.append(("continuation", route))
        return await self.provider.chat(request)


async def test_later_calls_go_through_continuation_on_the_pinned_route(kit, ctx):
    caps = CapabilityRegistry(kit.standard_specs()).snapshot(Trust.OPERATOR)
    caller = RecordingCaller(
        ScriptedProvider([tool_call("echo"), tool_call("echo", {"text": "2"}), reply("x")])
    )
    result = await AgentLoop(caller, caps).run(USER, ctx)
    assert caller.seen == [
        ("initial", None),
        ("continuation", {"route": 1}),
        ("continuation", {"route": 1}),
    ]
    assert result.provider is None  # an opaque route with no provider name


class NamedRoute:
    """Shaped like the routing chain's Route: the provider's name is ``name``."""

    name = "anthropic"


@pytest.mark.parametrize(
    ("route", "expected"),
    [
        (NamedRoute(), "anthropic"),
        (SimpleNamespace(provider="openai"), "openai"),
        (SimpleNamespace(provider=SimpleNamespace(name="xai")), "xai"),
        (SimpleNamespace(provider_name="mistral", name="ignored"), "mistral"),
    ],
)
async def test_provider_name_is_read_from_the_route_handle(kit, ctx, route, expected):
    class Caller(RecordingCaller):
        async def initial(self, request):
            return await self.provider.chat(request), route

    caps = CapabilityRegistry(kit.standard_specs()).snapshot(Trust.OPERATOR)
    result = await AgentLoop(Caller(ScriptedProvider(["hi"])), caps).run(USER, ctx)
    assert result.provider == expected


async def test_transient_continuation_failure_is_retried_without_replaying_tools(kit, ctx):
    provider = ScriptedProvider(
        [
            tool_call("echo", {"text": "once"}),
            ProviderError(ErrorKind.TRANSPORT, "connection reset"),
            reply("done"),
        ]
    )
    slept: list[float] = []

    async def no_wait(delay: float) -> None:
        slept.append(delay)

    caps = CapabilityRegistry(kit.standard_specs()).snapshot(Trust.OPERATOR)
    result = await AgentLoop(SingleProviderCaller(provider, sleep=no_wait), caps).run(USER, ctx)
    assert result.text == "done"
    assert ctx.state["calls"] == [("echo", {"text": "once"})]
    assert len(slept) == 1
    assert provider.requests[1].messages == provider.requests[2].messages


# ---------------------------------------------------------------------- observability


class SyncTracer:
    def __init__(self):
        self.records: list[tuple[str, dict[str, Any]]] = []
        self.spans: list[tuple[str, str, dict[str, Any], str]] = []

    def record(self, kind, *, session_id, **fields):
        self.records.append((kind, {"session_id": session_id, **fields}))

    @contextlib.contextmanager
    def span(self, kind, name, *, session_id, **fields):
        entry = Handle([kind, name, {"session_id": session_id, **fields}, "open"])
        try:
            yield entry
            entry[3] = "ok"
        except BaseException:
            entry[3] = "raised"
            raise
        finally:
            self.spans.append(tuple(entry))


class Handle(list):
    def set(self, **fields):
        self[2].update(fields)


class AsyncTracer(SyncTracer):
    @contextlib.asynccontextmanager
    async def span(self, kind, name, *, session_id, **fields):
        self.spans.append((kind, name, {"session_id": session_id, **fields}, "ok"))
        yield None


@pytest.mark.parametrize("tracer_cls", [SyncTracer, AsyncTracer])
async def test_tracer_sees_llm_calls_and_real_tool_names(kit, ctx, tracer_cls):
    tracer = tracer_cls()
    provider = ScriptedProvider(
        [
            tool_call("tool_call", {"name": "gmail_search", "arguments": {"text": "q"}}),
            reply("ok", usage=Usage(input_tokens=3)),
        ]
    )
    await loop_over(kit, provider, tracer=tracer).run(USER, ctx)
    kinds = [(k, f["initial"], f["status"]) for k, f in tracer.records]
    assert kinds == [("llm_call", True, "ok"), ("llm_call", False, "ok")]
    assert tracer.records[1][1]["input_tokens"] == 3
    assert tracer.records[0][1]["session_id"] == "main-1"
    ((kind, name, fields, status),) = tracer.spans
    assert (kind, name, status) == ("tool_exec", "gmail_search", "ok")
    assert fields["via"] == "tool_call" and fields["session_id"] == "main-1"
    assert fields["arguments"] == {"text": "q"}
    if tracer_cls is SyncTracer:  # its span handle takes late fields
        assert fields["ok"] is True and fields["result"] == "gmail_search: q"


@pytest.mark.parametrize("capture", [False, True])
async def test_real_jsonl_tracer_records_calls_and_tool_spans(kit, ctx, tmp_path, capture):
    import json

    traces = pytest.importorskip("fermix_core.traces")
    tracer = traces.Tracer(tmp_path / "home", capture_content=capture)
    provider = ScriptedProvider([tool_call("echo", {"text": "secret-ish"}), reply("done")])
    await loop_over(kit, provider, tracer=tracer).run(USER, ctx)
    tracer.close()

    def lines(kind):
        files = sorted((tmp_path / "home" / "traces").glob(f"*/{kind}.jsonl"))
        return [json.loads(line) for f in files for line in f.read_text().splitlines()]

    calls = lines("llm_call")
    assert [c["initial"] for c in calls] == [True, False]
    assert all(c["session_id"] == "main-1" and c["status"] == "ok" for c in calls)
    (span,) = lines("tool_exec")
    assert span["name"] == "echo" and span["status"] == "ok"
    dumped = json.dumps(span)
    assert ("secret-ish" in dumped) is capture


async def test_failed_model_call_is_traced_then_raised(kit, ctx):
    tracer = SyncTracer()
    provider = ScriptedProvider([ProviderError(ErrorKind.RATE_LIMIT, "slow down")])
    with pytest.raises(ProviderError):
        await loop_over(kit, provider, tracer=tracer).run(USER, ctx)
    ((_kind, fields),) = tracer.records
    assert fields["status"] == "error" and fields["error_kind"] == "rate_limit"


class BrokenTracer:
    def record(self, *a, **k):
        raise RuntimeError("trace store is down")

    def span(self, *a, **k):
        raise RuntimeError("trace store is down")


async def test_broken_observers_never_take_the_turn_down(kit, ctx, caplog):
    def bad_emit(name, **data):
        raise RuntimeError("metrics exporter is down")

    provider = ScriptedProvider([tool_call("echo", {"text": "x"}), reply("fine")])
    with caplog.at_level(logging.ERROR, logger="fermix.agent"):
        loop = loop_over(kit, provider, tracer=BrokenTracer(), emit=bad_emit)
        result = await loop.run(USER, ctx)
    assert result.text == "fine"
    assert tool_texts(result) == ["echo: x"]
    assert "trace record llm_call failed" in caplog.text


async def test_events_reach_the_plugin_hosts_real_emit(kit, ctx, plugin_host):
    seen = []
    plugin_host.telemetry.subscribe(seen.append)
    provider = ScriptedProvider([*(tool_call("echo", id=f"c{i}") for i in range(3)), ""])
    await loop_over(kit, provider, emit=plugin_host.emit).run(USER, ctx)
    names = [e.name for e in seen]
    assert names.count("agent.tool_call") == 3
    assert "agent.repeated_tool_call" in names and "agent.empty_completion" in names
    tool_event = next(e for e in seen if e.name == "agent.tool_call")
    assert tool_event.data["tool"] == "echo" and tool_event.data["duration_ms"] >= 0


async def test_tool_telemetry_uses_the_real_name(kit, ctx):
    events: list[tuple[str, dict]] = []
    provider = ScriptedProvider(
        [tool_call("tool_call", {"name": "weather_lookup", "arguments": {}}), reply("ok")]
    )
    await loop_over(kit, provider, emit=lambda n, **d: events.append((n, d))).run(USER, ctx)
    ((_name, data),) = [e for e in events if e[0] == "agent.tool_call"]
    assert data["tool"] == "weather_lookup" and data["ok"] and data["via"] == "tool_call"


# ---------------------------------------------------------------------- caps on one call


async def test_a_huge_tool_result_is_cut_with_a_marker_the_model_reads(kit, ctx):
    class Flood(kit.Echo):
        async def run(self, args, ctx):
            return "x" * 5_000_000

    registry = CapabilityRegistry([kit.spec("flood", tool=Flood)], max_result_chars=2_000)
    provider = ScriptedProvider([tool_call("flood"), reply("done")])
    result = await AgentLoop(SingleProviderCaller(provider), registry.snapshot(Trust.OPERATOR)).run(
        USER, ctx
    )
    (text,) = tool_texts(result)
    assert text.startswith("x" * 2_000)
    assert text.count("x") == 2_000
    assert "output truncated: 4,998,000 of 5,000,000 characters were cut" in text
    # What the model was sent on the next call is the capped text, not the flood.
    sent = provider.requests[1].messages[-1].tool_result.text
    assert sent == text


async def test_a_result_under_the_cap_is_untouched(kit, ctx):
    registry = CapabilityRegistry([kit.spec("echo")], max_result_chars=1_000)
    provider = ScriptedProvider([tool_call("echo", {"text": "hi"}), reply("done")])
    result = await AgentLoop(SingleProviderCaller(provider), registry.snapshot(Trust.OPERATOR)).run(
        USER, ctx
    )
    assert tool_texts(result) == ["echo: hi"]


async def test_a_tool_past_its_deadline_is_cancelled_and_reported(kit, ctx):
    state: dict[str, bool] = {}

    class Hangs(kit.Echo):
        async def run(self, args, ctx):
            try:
                await anyio.sleep_forever()
            finally:
                state["cancelled"] = True

    spec = kit.spec("hang", tool=Hangs, timeout_seconds=0.05)
    # The registry-wide deadline is long: the spec's own override is what fires.
    registry = CapabilityRegistry([spec], timeout_seconds=3600)
    provider = ScriptedProvider([tool_call("hang"), reply("moved on")])
    result = await AgentLoop(SingleProviderCaller(provider), registry.snapshot(Trust.OPERATOR)).run(
        USER, ctx
    )
    assert result.text == "moved on"
    (text,) = tool_texts(result)
    assert "did not finish within 0.05 seconds" in text and "cancelled" in text
    assert state == {"cancelled": True}
    assert [r.ok for r in result.tool_calls] == [False]


async def test_the_configured_deadline_applies_without_a_spec_override(kit, ctx):
    class Hangs(kit.Echo):
        async def run(self, args, ctx):
            await anyio.sleep_forever()

    registry = CapabilityRegistry([kit.spec("hang", tool=Hangs)], timeout_seconds=0.05)
    provider = ScriptedProvider([tool_call("hang"), reply("ok")])
    result = await AgentLoop(SingleProviderCaller(provider), registry.snapshot(Trust.OPERATOR)).run(
        USER, ctx
    )
    assert "did not finish within 0.05 seconds" in tool_texts(result)[0]


async def test_a_tools_own_timeout_error_is_a_crash_not_the_deadline(kit, ctx, caplog):
    class OwnTimeout(kit.Echo):
        async def run(self, args, ctx):
            raise TimeoutError("the upstream timed out")

    registry = CapabilityRegistry([kit.spec("slow", tool=OwnTimeout)])
    provider = ScriptedProvider([tool_call("slow"), reply("ok")])
    with caplog.at_level(logging.ERROR, logger="fermix.agent"):
        result = await AgentLoop(
            SingleProviderCaller(provider), registry.snapshot(Trust.OPERATOR)
        ).run(USER, ctx)
    assert "'slow' failed unexpectedly" in tool_texts(result)[0]


def test_a_spec_timeout_must_be_positive(kit):
    assert any("timeout_seconds" in p for p in kit.spec("t", timeout_seconds=0).problems())
    assert any("timeout_seconds" in p for p in kit.spec("t", timeout_seconds="5").problems())
    assert kit.spec("t", timeout_seconds=2.5).problems() == []


async def test_each_request_equals_the_validated_one_and_owns_its_lists(kit, ctx):
    """Requests are made without revalidating built messages, yet each is exactly what
    ``ChatRequest(...)`` gives, and a later iteration never changes an earlier request."""
    provider = ScriptedProvider(
        [
            Turn(content="", tool_calls=[ToolCall(id="c1", name="echo", arguments={})], model="m"),
            reply("done"),
        ]
    )

    async def on_event(event):
        return None

    loop = loop_over(kit, provider)
    await loop.run(USER, ctx, model="m-1", reasoning_effort="high", on_event=on_event)
    first, second = provider.requests
    assert len(first.messages) == len(USER) and len(second.messages) == len(USER) + 2
    for sent, initial in ((first, True), (second, False)):
        expected = ChatRequest(
            messages=list(sent.messages),
            tools=list(sent.tools),
            model="m-1",
            reasoning_effort="high",
            stream=False,
            initial=initial,
            inner_retry=True,
            on_event=on_event,
        )
        assert sent == expected and sent.model_fields_set == expected.model_fields_set
        assert sent.model_dump_json() == expected.model_dump_json()
    assert first.tools is not second.tools and first.messages is not second.messages


async def test_inputs_a_request_would_coerce_or_refuse_still_go_through_validation(kit, ctx):
    provider = ScriptedProvider([reply("ok"), reply("ok")])
    loop = loop_over(kit, provider)
    as_dicts = [m.model_dump() for m in USER]
    result = await loop.run(as_dicts, ctx)  # type: ignore[arg-type]
    assert result.text == "ok" and provider.last_request.messages == USER
    with pytest.raises(ValueError, match="reasoning_effort"):
        await loop.run(USER, ctx, reasoning_effort="ludicrous")
    with pytest.raises(ValueError, match="tool_result"):
        await loop.run([*USER, {"role": "tool", "content": "forged"}], ctx)  # type: ignore[list-item]


async def test_deferred_state_is_worked_out_before_the_first_tool_call_only(kit, ctx):
    from fermix_core.tool import DEFERRED_STATE

    made: list[str] = []

    def words() -> list[str]:
        made.append("words")
        return ["remember this"]

    ctx.state[DEFERRED_STATE] = {"owner_messages": words}
    await loop_over(kit, ScriptedProvider([reply("no tools needed")])).run(USER, ctx)
    assert made == [] and "owner_messages" not in ctx.state, "no tool ran: nothing worked out"

    seen: list[Any] = []
    provider = ScriptedProvider(
        [
            Turn(
                content="",
                tool_calls=[
                    ToolCall(id="c1", name="echo", arguments={"text": "a"}),
                    ToolCall(id="c2", name="echo", arguments={"text": "b"}),
                ],
                model="m",
            ),
            reply("done"),
        ]
    )
    loop = loop_over(kit, provider)
    real = loop._invoke

    async def watching(item, context):
        seen.append(context.state.get("owner_messages"))
        return await real(item, context)

    loop._invoke = watching  # type: ignore[method-assign]
    await loop.run(USER, ctx)
    assert made == ["words"], "worked out once, for the first call"
    assert seen == [["remember this"], ["remember this"]]
    assert DEFERRED_STATE not in ctx.state


async def test_a_registered_tool_watcher_hears_every_call_start_and_finish(kit, ctx):
    from fermix_core.agent.loop import TOOL_WATCH_STATE

    heard: list[tuple[Any, ...]] = []

    class Watcher:
        def tool_started(self, call_id, name, arguments):
            heard.append(("started", call_id, name, arguments))

        def tool_finished(self, call_id, name, ok):
            heard.append(("finished", call_id, name, ok))

    provider = ScriptedProvider(
        [
            Turn(
                content="",
                tool_calls=[
                    ToolCall(id="c1", name="echo", arguments={"text": "a"}),
                    ToolCall(id="c2", name="no_such_tool", arguments={}),
                ],
                model="m",
            ),
            reply("done"),
        ]
    )
    ctx.state[TOOL_WATCH_STATE] = Watcher()
    await loop_over(kit, provider).run(USER, ctx)
    assert heard == [
        ("started", "c1", "echo", {"text": "a"}),
        ("finished", "c1", "echo", True),
        ("started", "c2", "no_such_tool", {}),
        ("finished", "c2", "no_such_tool", False),
    ]
    del ctx.state[TOOL_WATCH_STATE]
    heard.clear()
    provider = ScriptedProvider([tool_call("echo", {"text": "b"}), reply("done")])
    await loop_over(kit, provider).run(USER, ctx)
    assert heard == []


async def test_a_loop_run_again_sends_the_snapshots_tools_with_every_request(kit, ctx):
    provider = ScriptedProvider(
        [
            tool_call("echo", {"text": "a"}),
            reply("one"),
            tool_call("echo", {"text": "b"}),
            reply("two"),
        ]
    )
    loop = loop_over(kit, provider)
    wanted = loop.capabilities.definitions()
    first = await loop.run(USER, ctx)
    second = await loop.run(USER, ctx)
    assert (first.text, second.text) == ("one", "two")
    assert [len(r.messages) for r in provider.requests] == [2, 4, 2, 4]
    for request in provider.requests:
        assert request.tools == wanted
