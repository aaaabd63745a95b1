"""The whole runtime in one process: real store, gateway, queue, loop and trust filtering.

The provider is an in-process plugin (a FunctionProvider behind a ProviderSpec), so these
tests see exactly what reached the model — which tools a guest was offered, what history
a turn carried — without a network.
"""

from __future__ import annotations

import anyio
import pytest
from fermix_core.api import Fermix
from fermix_core.channel import InboundMessage
from fermix_core.gateway import ChannelFeatures
from fermix_core.hookspecs import hookimpl
from fermix_core.messages import ToolCall, Turn, Usage
from fermix_core.service import CollectingReply
from fermix_core.specs import ModelInfo, PolicyClass, ProviderSpec, ToolSpec
from fermix_core.testing import FunctionProvider
from fermix_core.tool import Tool, ToolOutput
from pydantic import BaseModel

pytestmark = pytest.mark.anyio


class NoArgs(BaseModel):
    pass


class Clock(Tool[NoArgs]):
    async def run(self, args, ctx):
        return ToolOutput(content="12:00")


class Shell(Tool[NoArgs]):
    ran: list[str] = []

    async def run(self, args, ctx):
        Shell.ran.append(ctx.trust)
        return ToolOutput(content="ran")


class Harness:
    """An in-process plugin: one provider answering through ``self.respond``, two tools."""

    def __init__(self) -> None:
        self.requests = []
        self.events = []
        self.compacted = anyio.Event()
        self.respond = lambda request: Turn(content="ok", model="m1")
        self.provider = FunctionProvider(self._answer, name="harness")

    async def _answer(self, request):
        self.requests.append(request)
        return self.respond(request)

    @hookimpl
    def fermix_providers(self):
        yield ProviderSpec(
            name="harness",
            label="Harness",
            factory=lambda spec, settings: self.provider,
            keyless=True,
            default_model="m1",
            models=(ModelInfo(id="m1", context_window=1000),),
        )

    @hookimpl
    def fermix_tools(self):
        yield ToolSpec(
            name="clock",
            description="What time it is.",
            factory=Clock,
            policy=PolicyClass.READ_ONLY,
        )
        yield ToolSpec(
            name="shell_run",
            description="Run a command.",
            factory=Shell,
            policy=PolicyClass.EXEC,
            owner_only=True,
            read_only=False,
        )

    @hookimpl
    def fermix_event(self, event):
        self.events.append(event.name)
        if event.name == "compaction.done":
            self.compacted.set()


CONFIG = {
    "fermix_core": {
        "providers": {"harness": {"primary": True, "base_url": "http://127.0.0.1:9/unused"}},
        "compaction": {"threshold": 0.5},
        # Review makes its own model call after a reply; these tests script every call.
        "memory": {"review_enabled": False},
    },
    "fermix_channels": {"telegram": {"owner_user_id": "1", "allowed_user_ids": ["1", "2"]}},
}


@pytest.fixture
async def fx(fermix_home):
    harness = Harness()
    async with Fermix.open(
        fermix_home, config=CONFIG, plugins=[("providers.harness", harness)]
    ) as fx:
        fx.harness = harness
        yield fx


async def telegram(fx, sender: str, text: str):
    reply = CollectingReply(ChannelFeatures(reactions=("👍",)))
    message = InboundMessage(channel="telegram", chat_id="chat", sender_id=sender, text=text)
    outcome = await fx.service.gateway.ingest(message, reply)
    if outcome.job is not None:
        await outcome.job.done.wait()
    return outcome, reply


async def test_guest_gets_read_only_surface_and_cannot_call_owner_tools(fx) -> None:
    harness = fx.harness
    _, reply = await telegram(fx, "1", "hello owner")
    owner_request = harness.requests[-1]
    owner_tools = {t.name for t in owner_request.tools}
    # First-party tool_help is inline; this in-process plugin's tools are deferred: their
    # names are listed for the owner and reachable through the tool_search bridges.
    assert {"tool_help", "tool_search", "tool_call"} <= owner_tools
    assert "shell_run" in owner_request.messages[0].text

    calls = iter(
        [
            Turn(
                content="",
                tool_calls=[ToolCall(id="c1", name="shell_run", arguments={})],
                model="m1",
            ),
            Turn(content="done", model="m1"),
        ]
    )
    harness.respond = lambda request: next(calls)
    Shell.ran.clear()
    _, reply = await telegram(fx, "2", "run something")
    guest_request = harness.requests[-2]
    guest_tools = {t.name for t in guest_request.tools}
    assert "tool_help" in guest_tools
    assert not guest_tools & {"shell_run", "clock", "tool_search", "tool_call"}
    assert "shell_run" not in guest_request.messages[0].text  # not in the prompt either
    tool_result = harness.requests[-1].messages[-1]
    assert tool_result.tool_result is not None and tool_result.tool_result.is_error
    assert Shell.ran == []
    assert reply.text == "done"


async def test_stranger_is_dropped_before_anything_happens(fx) -> None:
    before = len(fx.harness.requests)
    outcome, reply = await telegram(fx, "3", "let me in")
    assert outcome.status == "dropped"
    assert reply.messages == [] and len(fx.harness.requests) == before


async def test_operator_only_command_refused_for_guest(fx) -> None:
    outcome, reply = await telegram(fx, "2", "/new")
    assert outcome.status == "command"
    assert "owner" in reply.text.lower() or "not allowed" in reply.text.lower()


async def test_auto_compaction_after_reply_keeps_a_summary(fx) -> None:
    harness = fx.harness

    def answer(request):
        if request.messages[-1].text.startswith("Summarize the conversation"):
            return Turn(content="SUMMARY: we talked about numbers", model="m1")
        return Turn(
            content=f"reply to {request.messages[-1].text}",
            model="m1",
            usage=Usage(input_tokens=100),
        )

    harness.respond = answer
    for n in range(8):
        await fx.ask(f"message {n}", session="long")
    harness.respond = lambda request: (
        Turn(content="SUMMARY: we talked about numbers", model="m1")
        if request.messages[-1].text.startswith("Summarize the conversation")
        else Turn(content="big", model="m1", usage=Usage(input_tokens=900))
    )
    await fx.ask("one more", session="long")
    with anyio.fail_after(10):
        await harness.compacted.wait()
    harness.respond = lambda request: Turn(content="after", model="m1")
    await fx.ask("after compaction", session="long")
    history = harness.requests[-1].messages
    texts = [m.text for m in history]
    assert any("SUMMARY: we talked about numbers" in t for t in texts)
    assert "message 0" not in texts
    assert texts[-1] == "after compaction"


async def test_compact_command_and_new_window(fx) -> None:
    for n in range(8):
        await fx.ask(f"m{n}", session="c")
    fx.harness.respond = lambda request: Turn(content="SUMMARY: short", model="m1")
    outcome = await fx.ask("/compact", session="c")
    assert "Compacted" in outcome.text
    outcome = await fx.ask("/new", session="c")
    fx.harness.respond = lambda request: Turn(content="fresh", model="m1")
    await fx.ask("first of a new window", session="c")
    texts = [m.text for m in fx.harness.requests[-1].messages[1:]]
    assert texts == ["first of a new window"]


async def test_background_cap_and_tasks(fx) -> None:
    gate = anyio.Event()

    async def slow(request):
        await gate.wait()
        return Turn(content="bg done", model="m1")

    fx.harness.provider.fn = slow
    replies = [await fx.ask(f"/bg job {n}", session="b") for n in range(9)]
    assert all("job" in r.text.lower() or "background" in r.text.lower() for r in replies[:8])
    assert "8" in replies[8].text and "limit" in replies[8].text.lower()
    tasks = await fx.ask("/tasks", session="b")
    assert "running" in tasks.text.lower()
    gate.set()


async def test_no_provider_turn_explains(fermix_home) -> None:
    async with Fermix.open(fermix_home, config={}, entry_points=False) as fx:
        outcome = await fx.ask("hello")
        assert outcome.status == "no_provider"
        assert "fermix setup" in outcome.text


async def test_a_turn_leaves_body_free_traces(fx, fermix_home) -> None:
    import json

    await fx.ask("a secret plan about zebras", session="t")
    days = list((fermix_home.path / "traces").iterdir())
    assert len(days) == 1
    files = {path.stem: path for path in days[0].glob("*.jsonl")}
    assert {"channel_msg", "agent_event", "llm_call"} <= set(files)
    records = [
        json.loads(line) for path in files.values() for line in path.read_text().splitlines()
    ]
    assert all(record.get("session_id", "").startswith("main-") for record in records)
    assert "zebras" not in "".join(path.read_text() for path in files.values())


async def test_confirmed_directory_grant_reruns_the_request_on_a_chat_channel(fx, tmp_path) -> None:
    import re

    wanted = tmp_path / "outside-project"
    wanted.mkdir()
    harness = fx.harness
    asked = {"n": 0}

    def answer(request):
        last = request.messages[-1]
        if last.text == "please read my project":
            asked["n"] += 1
            if asked["n"] == 1:
                return Turn(
                    content="",
                    tool_calls=[
                        ToolCall(
                            id="g1",
                            name="request_directory_access",
                            arguments={"path": str(wanted), "reason": "the files you asked about"},
                        )
                    ],
                    model="m1",
                )
            return Turn(content="now I can read it", model="m1")
        if last.tool_result is not None:
            return Turn(content=last.tool_result.content[0].text, model="m1")
        return Turn(content="ok", model="m1")

    harness.respond = answer
    _, reply = await telegram(fx, "1", "please read my project")
    token = re.search(r"/confirm (\S+)", reply.text).group(1)

    _, confirmed = await telegram(fx, "1", f"/confirm {token}")
    assert "allowed_roots" in fx.runtime.home.config_file.read_text()
    assert str(wanted) in fx.runtime.home.config_file.read_text()
    assert "applied" in confirmed.text.lower() or "done" in confirmed.text.lower()
    with anyio.fail_after(10):
        await fx.service.queue.join()  # the resumed turn runs through the real queue
    assert asked["n"] == 2


async def test_a_guest_cannot_use_the_owners_token(fx, tmp_path) -> None:
    import re

    wanted = tmp_path / "owner-folder"
    wanted.mkdir()
    _, proposal = await telegram(fx, "1", f"/sandbox grant {wanted}")
    token = re.search(r"/confirm (\S+)", proposal.text).group(1)
    _, refused = await telegram(fx, "2", f"/confirm {token}")
    config_file = fx.runtime.home.config_file
    assert not config_file.exists() or str(wanted) not in config_file.read_text()
    assert "owner" in refused.text.lower()
    # The refusal did not burn the token: the owner can still confirm it.
    await telegram(fx, "1", f"/confirm {token}")
    assert str(wanted) in fx.runtime.home.config_file.read_text()


async def test_ask_after_the_open_block_raises_a_clear_error(fermix_home) -> None:
    from fermix_core.api import FermixClosedError

    async with Fermix.open(
        fermix_home, config=CONFIG, plugins=[("providers.harness", Harness())]
    ) as fx:
        assert (await fx.ask("hello", session="s")).text == "ok"
    with pytest.raises(FermixClosedError, match=r"block has ended.*open a new one"):
        await fx.ask("hello again", session="s")


async def test_cancelling_ask_cancels_the_turn_like_stop(fx) -> None:
    from fermix_core.turns import STOP_MARKER

    harness = fx.harness
    entered, unwound = anyio.Event(), anyio.Event()

    async def never_answers() -> Turn:
        entered.set()
        try:
            await anyio.sleep_forever()
        finally:
            unwound.set()

    answer = harness.provider.fn

    async def first_never_answers(request):
        if not entered.is_set():
            await never_answers()
        return await answer(request)

    harness.provider.fn = first_never_answers

    async def ask_a_novel() -> None:
        await fx.ask("write me a novel", session="s")

    async with anyio.create_task_group() as tg:
        tg.start_soon(ask_a_novel)
        await entered.wait()
        tg.cancel_scope.cancel()
    # The model call was cancelled with the caller, not left running.
    assert unwound.is_set()
    outcome = await fx.ask("something short instead", session="s")
    assert outcome.text == "ok"
    history = [m.text for m in harness.requests[-1].messages]
    assert "write me a novel" in history
    assert STOP_MARKER in history


async def test_history_overflowing_the_window_is_compacted_before_the_call(fx) -> None:
    # The harness model has a 1,000-token window; these turns outgrow it without any
    # usage report, so the turn that overflows compacts first, then calls the model.
    harness = fx.harness
    summaries: list[list[str]] = []
    said: list[str] = []  # every stored row, in order: question, reply, question, …

    def answer(request):
        if request.messages[-1].text.startswith("Summarize the conversation"):
            summaries.append([m.text for m in request.messages[1:-1]])
            return Turn(content="SUMMARY: the long ones", model="m1")
        said.append(request.messages[-1].text)
        said.append(f"reply {len(said) // 2}")
        return Turn(content=said[-1], model="m1")

    harness.respond = answer
    # 500 characters each: the eighth turn is the first whose history overflows.
    asked = [f"question {n}: ".ljust(500, "w") for n in range(8)]
    for text in asked:
        await fx.ask(text, session="overflow")
    assert len(summaries) == 1, "one turn overflowed the window and was compacted first"
    sent = [m.text for m in harness.requests[-1].messages]
    assert sent[-1] == asked[-1], "the turn's own message is sent last, verbatim"
    assert "SUMMARY: the long ones" in sent[1], "the summary leads the history"
    tail = sent[2:-1]
    before = said[:-2]  # what was stored before the last turn
    # Every earlier row is either in the summary's source or still verbatim, none lost.
    assert len(tail) == 6
    assert summaries[0] + tail == before


async def test_reused_turn_parts_follow_every_change(fx, fermix_home) -> None:
    """The system message and agent loop kept between turns are rebuilt when their inputs
    change: a prompt file edited by Fermix, the sender's trust, a replaced model caller."""
    from fermix_core.prompt import prompt_files_written
    from fermix_core.routing.build import RoutingCaller

    harness = fx.harness
    await fx.ask("one", session="reuse")
    await fx.ask("two", session="reuse")
    first, second = harness.requests[-2:]
    assert first.messages[0] is second.messages[0], "an unchanged prompt is reused"
    soul = fermix_home.path / "bootstrap" / "main" / "SOUL.md"
    soul.parent.mkdir(parents=True, exist_ok=True)
    soul.write_text("SOUL-REWRITTEN-FOR-THIS-TEST")
    prompt_files_written()
    await fx.ask("three", session="reuse")
    assert "SOUL-REWRITTEN-FOR-THIS-TEST" in harness.requests[-1].messages[0].text
    await telegram(fx, "2", "a guest asks")
    guest = harness.requests[-1].messages[0].text
    assert "shell_run" not in guest and "SOUL-REWRITTEN-FOR-THIS-TEST" in guest
    await fx.ask("four", session="reuse")
    assert "shell_run" in harness.requests[-1].messages[0].text

    runner = fx.service.runner
    seen: list[str] = []

    class Recording(RoutingCaller):
        async def initial(self, request):
            seen.append(request.messages[-1].text)
            return await super().initial(request)

    runner.caller = Recording(runner.caller.chain)
    outcome = await fx.ask("five", session="reuse")
    assert seen == ["five"] and outcome.text == "ok"


async def test_a_reply_the_channel_could_not_deliver_is_still_committed(fx) -> None:
    from fermix_core.channels.outbound import ReplyUndelivered

    class Undeliverable(CollectingReply):
        async def send(self, message):
            raise ReplyUndelivered("the platform kept refusing (already logged)")

    fx.harness.respond = lambda request: Turn(content="kept in history", model="m1")
    reply = Undeliverable(ChannelFeatures())
    message = InboundMessage(channel="telegram", chat_id="lost", sender_id="1", text="hi")
    outcome = await fx.service.gateway.ingest(message, reply)
    await outcome.job.done.wait()
    assert outcome.job.result.status == "ok" and outcome.job.error is None
    fx.harness.respond = lambda request: Turn(content="second", model="m1")
    await telegram_in(fx, "lost", "again")
    history = fx.harness.requests[-1].messages
    assert [m.text for m in history if m.role == "assistant"] == ["kept in history"]


async def telegram_in(fx, chat: str, text: str) -> None:
    message = InboundMessage(channel="telegram", chat_id=chat, sender_id="1", text=text)
    outcome = await fx.service.gateway.ingest(message, CollectingReply(ChannelFeatures()))
    await outcome.job.done.wait()
