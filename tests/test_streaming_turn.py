"""Streaming end to end in one process: gateway → queue → turn runner → agent loop → a
streaming provider → the stream controller → a MemoryChannel reply port.

The provider is an in-process plugin that emits the same StreamEvents a wire adapter does
(text deltas, reasoning summaries, finished items), so these tests see what a chat would
show while a real turn runs, what was committed, and which telemetry went out.
"""

from __future__ import annotations

import anyio
import anyio.lowlevel
import pytest
from fermix_core.api import Fermix
from fermix_core.channel import InboundMessage
from fermix_core.gateway.reply import ChannelReplyPort, features_of
from fermix_core.hookspecs import hookimpl
from fermix_core.messages import ToolCall, Turn
from fermix_core.provider import (
    ChatRequest,
    ErrorKind,
    Provider,
    ProviderError,
    StreamEvent,
    StreamEventKind,
)
from fermix_core.specs import ModelInfo, PolicyClass, ProviderSpec, ToolSpec
from fermix_core.testing import MemoryChannel, StubChannelHost
from fermix_core.tool import Tool, ToolOutput
from fermix_core.turns import STOP_MARKER
from pydantic import BaseModel

pytestmark = pytest.mark.anyio


class NoArgs(BaseModel):
    pass


class Weather(Tool[NoArgs]):
    async def run(self, args, ctx):
        return ToolOutput(content="sunny, 21°C")


class StreamingProvider(Provider):
    """Answers each call with the next scripted step; a step streams when asked to."""

    name = "harness"
    supports_streaming = True

    def __init__(self) -> None:
        self.steps: list = []
        self.requests: list[ChatRequest] = []
        self.called = anyio.Event()

    async def chat(self, request: ChatRequest) -> Turn:
        self.requests.append(request)
        self.called.set()
        return await self.steps.pop(0)(request)


def answer(text: str, *, reasoning: str | None = None, piece: int = 40, hold=None):
    """A step that streams *text* in pieces (and a summary first); *hold* pauses midway."""

    async def step(request: ChatRequest) -> Turn:
        if request.stream:
            if reasoning:
                await request.emit(
                    StreamEvent(kind=StreamEventKind.REASONING_SUMMARY, text=reasoning)
                )
            for start in range(0, len(text), piece):
                await request.emit(
                    StreamEvent(kind=StreamEventKind.TEXT_DELTA, text=text[start : start + piece])
                )
                await anyio.lowlevel.checkpoint()  # a wire yields while it reads the socket
                if hold is not None and start >= len(text) // 2:
                    await hold()
            await request.emit(
                StreamEvent(kind=StreamEventKind.ITEM_DONE, text=text, item_type="message")
            )
        return Turn(content=text, model="m1")

    return step


def tool_step(commentary: str):
    async def step(request: ChatRequest) -> Turn:
        if request.stream:
            await request.emit(StreamEvent(kind=StreamEventKind.TEXT_DELTA, text=commentary))
            await request.emit(
                StreamEvent(kind=StreamEventKind.ITEM_DONE, text=commentary, item_type="message")
            )
            await request.emit(StreamEvent(kind=StreamEventKind.ITEM_DONE, item_type="tool_call"))
        return Turn(
            content=commentary,
            tool_calls=[ToolCall(id="c1", name="weather", arguments={})],
            model="m1",
        )

    return step


class Harness:
    def __init__(self) -> None:
        self.provider = StreamingProvider()
        self.stream_events: list[dict] = []

    @hookimpl
    def fermix_providers(self):
        yield ProviderSpec(
            name="harness",
            label="Harness",
            factory=lambda spec, settings: self.provider,
            keyless=True,
            default_model="m1",
            models=(ModelInfo(id="m1", context_window=100_000),),
        )

    @hookimpl
    def fermix_tools(self):
        yield ToolSpec(
            name="weather",
            description="Today's weather.",
            factory=Weather,
            policy=PolicyClass.READ_ONLY,
        )

    @hookimpl
    def fermix_event(self, event):
        if event.name == "channel.stream":
            self.stream_events.append(event.data)


CONFIG = {
    "fermix_core": {
        "providers": {"harness": {"primary": True, "base_url": "http://127.0.0.1:9/unused"}},
        "memory": {"review_enabled": False},
        "tools": {"tool_search": {"enabled": False}},
    },
    "fermix_channels": {"telegram": {"owner_user_id": "1"}},
}


class SignallingPort(ChannelReplyPort):
    """The real port over the channel, plus an event per send for causal waiting."""

    def __init__(self, channel: MemoryChannel, streaming: str | None = None) -> None:
        super().__init__(channel, features_of(channel, streaming=streaming))
        self.sends = 0
        self._sent = anyio.Event()

    async def send(self, message):
        result = await super().send(message)
        self.sends += 1
        self._sent.set()
        self._sent = anyio.Event()
        return result

    async def wait_sends(self, count: int) -> None:
        with anyio.fail_after(10):
            while self.sends < count:
                await self._sent.wait()


@pytest.fixture
async def fx(fermix_home):
    harness = Harness()
    async with Fermix.open(
        fermix_home, config=CONFIG, plugins=[("providers.harness", harness)]
    ) as fx:
        fx.harness = harness
        yield fx


async def started_channel(**abilities) -> MemoryChannel:
    channel = MemoryChannel("telegram", **abilities)
    await channel.start(StubChannelHost(channel.name))
    return channel


async def say(fx, port, text: str, *, wait: bool = True):
    message = InboundMessage(channel="telegram", chat_id="chat", sender_id="1", text=text)
    outcome = await fx.service.gateway.ingest(message, port)
    if wait and outcome.job is not None:
        with anyio.fail_after(20):
            await outcome.job.done.wait()
    return outcome


def heading_sections(count: int, words: int) -> str:
    body = " ".join(f"w{n}" for n in range(words))
    return "".join(f"## Part {n}\n\n{body}.\n\n" for n in range(count)).strip()


async def test_a_draft_turn_streams_seals_and_commits_the_whole_answer(fx) -> None:
    channel = await started_channel()
    port = SignallingPort(channel)
    text = heading_sections(4, 120)  # ~2,400 characters: at least two cards
    fx.harness.provider.steps.append(answer(text, reasoning="**Reading the request**"))
    await say(fx, port, "write me something long")
    request = fx.harness.provider.requests[-1]
    assert request.stream is True and request.on_event is not None
    cards = channel.visible("chat")
    assert len(cards) >= 2 and not any(c.startswith("💭") for c in cards)  # status removed
    assert "".join(cards).replace("\n", "") == text.replace("\n", "")
    assert cards[1].startswith("## Part")
    phases = [e["phase"] for e in fx.harness.stream_events]
    assert {"open", "seal", "discard"} <= set(phases)
    assert {e["session_id"] for e in fx.harness.stream_events} == {"main-1"}
    # The committed history holds the whole answer once (the next turn is sent it).
    fx.harness.provider.steps.append(answer("ok, noted and understood then."))
    await say(fx, port, "thanks")
    history = [m.text for m in fx.harness.provider.requests[-1].messages]
    assert history.count(text) == 1


async def test_a_block_turn_with_a_tool_sends_commentary_then_the_answer_once(fx) -> None:
    channel = await started_channel(supports_edit=False)
    port = SignallingPort(channel)
    assert port.features.stream_mode == "block"
    provider = fx.harness.provider
    provider.steps += [tool_step("Let me check the weather."), answer("It is sunny, 21°C.")]
    await say(fx, port, "weather?")
    assert channel.visible("chat") == ["Let me check the weather.", "It is sunny, 21°C."]
    assert channel.edits == []
    assert [e["phase"] for e in fx.harness.stream_events] == ["block", "block"]


async def test_streaming_off_and_draft_without_edit_deliver_normally(fx) -> None:
    provider = fx.harness.provider
    for streaming, abilities in (("off", {}), ("draft", {"supports_edit": False})):
        channel = await started_channel(**abilities)
        port = SignallingPort(channel, streaming=streaming)
        provider.steps.append(answer("A plain answer delivered in one message."))
        await say(fx, port, "hello")
        assert provider.requests[-1].stream is False
        assert channel.visible("chat") == ["A plain answer delivered in one message."]
    assert fx.harness.stream_events == []


async def test_stop_mid_stream_deletes_the_live_draft(fx) -> None:
    channel = await started_channel()
    port = SignallingPort(channel)
    release = anyio.Event()

    async def hold() -> None:
        await release.wait()  # the model "keeps thinking" until /stop cancels the turn

    fx.harness.provider.steps.append(answer("x " * 100, piece=10, hold=hold))
    outcome = await say(fx, port, "go", wait=False)
    await port.wait_sends(1)  # the live draft is on screen
    assert len(channel.visible("chat")) == 1
    await say(fx, port, "/stop")
    with anyio.fail_after(10):
        await outcome.job.done.wait()
    shown = channel.visible("chat")
    assert all("x x x" not in text for text in shown)  # the unsealed card is gone
    assert "discard" in [e["phase"] for e in fx.harness.stream_events]
    fx.harness.provider.steps.append(answer("fine, starting over from the top."))
    await say(fx, port, "again")
    history = [m.text for m in fx.harness.provider.requests[-1].messages]
    assert STOP_MARKER in history


async def test_background_turns_never_stream(fx) -> None:
    channel = await started_channel()
    port = SignallingPort(channel)
    provider = fx.harness.provider
    provider.called = anyio.Event()
    provider.steps.append(answer("Background result, posted when done."))
    await say(fx, port, "/bg do the thing")
    with anyio.fail_after(10):
        await provider.called.wait()
    assert provider.requests[-1].stream is False


async def test_a_provider_failure_after_visible_text_removes_the_draft_and_says_so(fx) -> None:
    channel = await started_channel()
    port = SignallingPort(channel)
    streamed = anyio.Event()

    async def step(request: ChatRequest) -> Turn:
        await request.emit(
            StreamEvent(kind=StreamEventKind.TEXT_DELTA, text="Half an answer that was already on")
        )
        await port.wait_sends(1)  # the live draft opened
        streamed.set()
        raise ProviderError(
            ErrorKind.TRANSPORT, "the stream was cut", provider="harness", visible_output=True
        )

    fx.harness.provider.steps.append(step)
    await say(fx, port, "go")
    assert streamed.is_set()
    assert len(fx.harness.provider.requests) == 1  # visible output: never retried
    shown = channel.visible("chat")
    assert len(shown) == 1 and "Half an answer" not in shown[0]  # only the error reply
    assert "discard" in [e["phase"] for e in fx.harness.stream_events]


async def test_through_the_runtimes_outbound_port_cards_arrive_rendered(fx) -> None:
    from fermix_core.channels.outbound import OutboundPort
    from fermix_core.channels.presentation import present

    channel = await started_channel()
    port = OutboundPort(channel, features_of(channel, draft=True))
    text = heading_sections(3, 150).replace("w7 ", "**w7** ")
    fx.harness.provider.steps.append(answer(text, reasoning="**Thinking it over**"))
    await say(fx, port, "long and formatted please")
    cards = channel.visible("chat")
    assert len(cards) >= 2
    assert not any("**" in card or card.startswith("##") for card in cards)  # rendered
    rendered = "".join(c.text for c in present(text, "plain").chunks)
    assert "".join(cards).replace("\n", "") == rendered.replace("\n", "")
    assert channel.edits  # the live card was edited in place, through the port's renderer
