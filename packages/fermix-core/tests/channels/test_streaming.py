"""The stream controller against a MemoryChannel: what the chat shows as a reply streams.

Time is a hand-driven clock and every platform call happens in ``tick()``, so each claim
about "about once a second" or "after a second of silence" is made by moving the clock,
never by sleeping.
"""

from __future__ import annotations

import anyio
import pytest
from fermix_core.channel import ChannelError
from fermix_core.channels import streaming
from fermix_core.channels.presentation import rendered_length
from fermix_core.channels.streaming import (
    BLOCK_MAX_CHARS,
    BLOCK_MIN_CHARS,
    DRAFT_HARD_CHARS,
    DRAFT_SEAL_CHARS,
    StreamController,
    complete_prefix,
    extension_point,
    status_line,
)
from fermix_core.gateway.reply import ChannelReplyPort, features_of
from fermix_core.provider import StreamEvent, StreamEventKind
from fermix_core.testing import MemoryChannel, StubChannelHost

pytestmark = pytest.mark.anyio


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class Telemetry:
    def __init__(self) -> None:
        self.events: list[dict] = []

    def __call__(self, name: str, **data) -> None:
        assert name == "channel.stream"
        self.events.append(data)

    def phases(self) -> list[str]:
        return [e["phase"] for e in self.events]


async def running(channel: MemoryChannel) -> MemoryChannel:
    await channel.start(StubChannelHost(channel.name))
    return channel


class Rig:
    def __init__(self, channel: MemoryChannel, mode: str) -> None:
        self.channel = channel
        self.clock = Clock()
        self.telemetry = Telemetry()
        self.port = ChannelReplyPort(channel, features_of(channel))
        self.stream = StreamController(
            self.port,
            chat_id="chat",
            mode=mode,
            session_id="main-7",
            emit=self.telemetry,
            clock=self.clock,
        )

    async def text(self, *pieces: str) -> None:
        for piece in pieces:
            self.stream.on_event(StreamEvent(kind=StreamEventKind.TEXT_DELTA, text=piece))
        await self.stream.tick()

    async def item(self, text: str, item_type: str = "message") -> None:
        self.stream.on_event(
            StreamEvent(kind=StreamEventKind.ITEM_DONE, text=text, item_type=item_type)
        )
        await self.stream.tick()

    async def reasoning(self, summary: str) -> None:
        self.stream.on_event(StreamEvent(kind=StreamEventKind.REASONING_SUMMARY, text=summary))
        await self.stream.tick()

    async def later(self, seconds: float = 1.0) -> None:
        self.clock.advance(seconds)
        await self.stream.tick()

    @property
    def visible(self) -> list[str]:
        return self.channel.visible("chat")


async def rig(mode: str, **abilities) -> Rig:
    return Rig(await running(MemoryChannel("tg", **abilities)), mode)


def section(title: str, words: int) -> str:
    body = " ".join(f"word{n}" for n in range(words))
    return f"## {title}\n\n{body}.\n\n"


# --------------------------------------------------------------------------- boundaries


def test_complete_prefix_ends_on_a_sentence_or_paragraph_outside_fences() -> None:
    assert complete_prefix("Done. Still go") == len("Done. ")
    assert complete_prefix("All done here.") == len("All done here.")
    assert complete_prefix("no sentence end yet") is None
    text = "Intro.\n\n```\nprint('a. b. c.')\n"
    assert complete_prefix(text) == len("Intro.\n\n")  # nothing inside the open fence


def test_extension_point_ignores_whitespace_but_not_words() -> None:
    assert extension_point("First.\n\nSecond. Third", "First.Second.") == len("First.\n\nSecond.")
    assert extension_point("Another answer", "First.") is None
    assert extension_point("anything", "") == 0


def test_status_line_uses_the_bold_title() -> None:
    assert status_line("**Checking the calendar**\n\nI should look…") == "💭 Checking the calendar"
    assert status_line("plain first line\nsecond") == "💭 plain first line"


# --------------------------------------------------------------------------- draft


async def test_draft_opens_after_30_chars_and_edits_about_once_a_second() -> None:
    r = await rig("draft")
    await r.text("Short start")
    assert r.channel.sent == []  # under 30 characters: nothing yet
    await r.text(" that is now long enough to open")
    assert r.visible == ["Short start that is now long enough to open"]
    assert not r.channel.sent[0].silent  # the first message of the reply notifies
    await r.text(" and more")
    await r.text(" and more again")
    assert r.channel.edits == []  # not a second yet
    assert r.stream.next_deadline() == pytest.approx(101.0)
    await r.later(1.0)
    assert r.visible == ["Short start that is now long enough to open and more and more again"]
    assert len(r.channel.edits) == 1
    assert (
        await r.stream.finish("Short start that is now long enough to open and more and more again")
        is None
    )
    assert len(r.channel.sent) == 1  # one live message, edited, never resent
    assert r.telemetry.phases() == ["open", "edit", "seal"]
    assert {e["session_id"] for e in r.telemetry.events} == {"main-7"}


async def test_draft_seals_long_text_at_headings_into_fresh_cards() -> None:
    r = await rig("draft")
    answer = section("One", 130) + section("Two", 130) + section("Three", 130) + "The end."
    for start in range(0, len(answer), 50):
        await r.text(answer[start : start + 50])
        await r.later(1.0)
    cards = r.visible
    assert len(cards) >= 2
    assert cards[0].startswith("## One") and cards[0].rstrip().endswith(".")
    assert cards[1].startswith("## Two")
    assert all(len(card) <= 1800 for card in cards)
    assert "seal" in r.telemetry.phases() and "rotate" in r.telemetry.phases()
    assert await r.stream.finish(answer) is None
    # Everything arrived, in order, as finished cards; every card after the first is silent.
    assert "".join(r.visible).replace("\n", "") == answer.strip().replace("\n", "")
    assert all(m.silent for m in r.channel.sent[1:])


async def test_stop_mid_stream_deletes_only_the_live_card() -> None:
    r = await rig("draft")
    answer = section("One", 200) + section("Two", 200)
    for start in range(0, len(answer), 60):
        await r.text(answer[start : start + 60])
        await r.later(1.0)
    await r.reasoning("**Thinking about part three**")
    sealed, live = r.visible[0], r.visible[1]
    assert sealed.startswith("## One") and live.startswith("## Two")
    await r.stream.abort()
    assert r.visible == [sealed]  # the sealed card is a finished message and stays
    assert r.telemetry.phases().count("discard") == 2  # the live card and the 💭 status
    r.stream.on_event(StreamEvent(kind=StreamEventKind.TEXT_DELTA, text="late"))
    await r.stream.tick()
    assert r.visible == [sealed]


async def test_a_short_final_remainder_merges_into_the_live_card() -> None:
    r = await rig("draft")
    body = section("One", 190)  # ~1,300 characters: under the seal threshold
    await r.text(body)
    await r.later(1.0)
    assert len(r.visible) == 1
    final = body + "A short closing paragraph that pushes it past the mark. " * 3
    assert len(final) > DRAFT_SEAL_CHARS
    assert await r.stream.finish(final) is None
    assert r.visible == [final.strip()]  # merged: no extra message for the remainder
    assert len(r.channel.sent) == 1


async def test_a_final_answer_that_does_not_extend_the_sealed_cards_is_delivered_whole() -> None:
    r = await rig("draft")
    answer = section("One", 200) + section("Two", 100)
    for start in range(0, len(answer), 80):
        await r.text(answer[start : start + 80])
        await r.later(1.0)
    sealed = r.visible[0]
    different = "I stopped after 100 steps without reaching a final answer."
    assert await r.stream.finish(different) == different
    assert r.visible == [sealed]  # the live card went; the caller delivers the answer


async def test_a_final_answer_without_any_stream_is_delivered_normally() -> None:
    r = await rig("draft")
    assert (
        await r.stream.finish("The provider did not stream this.")
        == "The provider did not stream this."
    )
    assert r.channel.sent == []


async def test_reasoning_summaries_roll_into_one_status_deleted_when_the_answer_lands() -> None:
    r = await rig("draft")
    await r.reasoning("**Reading the question**\n\ndetails")
    (status,) = r.channel.sent
    assert status.text == "💭 Reading the question" and status.silent
    await r.reasoning("**Planning the answer**")
    assert len(r.channel.sent) == 1 and r.channel.edits == []
    await r.later(1.0)
    assert r.visible == ["💭 Planning the answer"]
    await r.text("Here is the answer, long enough to open a draft.")
    answer_message = r.channel.sent[1]
    assert not answer_message.silent  # the 💭 line does not count as the reply's first message
    assert await r.stream.finish("Here is the answer, long enough to open a draft.") is None
    assert r.visible == ["Here is the answer, long enough to open a draft."]


async def test_no_status_line_where_the_channel_cannot_delete() -> None:
    r = await rig("draft", supports_delete=False)
    await r.reasoning("**Thinking**")
    assert r.channel.sent == []
    await r.text("An answer that is long enough to show up.")
    assert r.visible == ["An answer that is long enough to show up."]


async def test_commentary_before_a_tool_call_is_its_own_finished_message() -> None:
    r = await rig("draft")
    await r.text("Let me look that up.")
    await r.item("", "tool_call")
    assert r.visible == ["Let me look that up."]
    await r.text("The weather in Paris is sunny, 21 degrees.")
    assert await r.stream.finish("The weather in Paris is sunny, 21 degrees.") is None
    assert r.visible == ["Let me look that up.", "The weather in Paris is sunny, 21 degrees."]


def test_draft_needs_a_port_that_can_edit() -> None:
    channel = MemoryChannel(supports_edit=False)
    port = ChannelReplyPort(channel, features_of(channel, streaming="draft"))
    assert port.features.stream_mode == "off"
    with pytest.raises(ValueError, match="can edit"):
        StreamController(port, chat_id="c", mode="draft")
    with pytest.raises(ValueError, match="'draft' or 'block'"):
        StreamController(port, chat_id="c", mode="off")


async def test_a_platform_failure_stops_the_stream_and_hands_back_the_rest() -> None:
    r = await rig("draft")
    await r.text("The first part of an answer that opens a draft.")
    r.channel.supports_edit = False  # the platform starts refusing edits
    await r.text(" More text.")
    await r.later(1.0)
    final = "The first part of an answer that opens a draft. More text. And the end."
    assert await r.stream.finish(final) == final  # nothing was sealed: the whole answer
    assert r.visible == []  # the stale live card was removed


# --------------------------------------------------------------------------- block


async def test_block_sends_each_finished_item_and_commentary_as_its_own_message() -> None:
    r = await rig("block", supports_edit=False)
    await r.text("Let me ", "check.")
    assert r.channel.sent == []
    await r.item("Let me check.")
    await r.item("", "tool_call")
    await r.text("It is ", "sunny.")
    await r.item("It is sunny.")
    assert r.visible == ["Let me check.", "It is sunny."]
    assert await r.stream.finish("It is sunny.") is None
    assert r.visible == ["Let me check.", "It is sunny."]
    assert r.channel.edits == [] and r.channel.deletes == []
    assert r.telemetry.phases() == ["block", "block"]


async def test_block_chunks_long_text_on_the_ladder() -> None:
    r = await rig("block")
    text = " ".join(f"This is sentence {n} of a long answer." for n in range(120))
    for start in range(0, len(text), 40):
        await r.text(text[start : start + 40])
    await r.item(text)
    assert len(r.visible) >= 3
    for chunk in r.visible[:-1]:
        assert BLOCK_MIN_CHARS <= len(chunk) <= BLOCK_MAX_CHARS
        assert chunk.endswith(".")  # never mid-sentence
    assert " ".join(r.visible) == text
    assert all(m.silent for m in r.channel.sent[1:])


async def test_block_flushes_complete_sentences_after_a_second_of_silence() -> None:
    r = await rig("block")
    await r.text("The first sentence is done. The second is still")
    assert r.stream.next_deadline() == pytest.approx(101.0)
    await r.later(0.5)
    assert r.channel.sent == []
    await r.later(0.5)
    assert r.visible == ["The first sentence is done."]
    await r.text(" going and ends here.")
    await r.item("The first sentence is done. The second is still going and ends here.")
    assert r.visible == ["The first sentence is done.", "The second is still going and ends here."]


async def test_block_reasoning_lines_are_silent_and_deleted_when_the_answer_lands() -> None:
    r = await rig("block")
    await r.reasoning("**Looking at the file**")
    await r.reasoning("**Comparing versions**")
    assert r.visible == ["💭 Looking at the file", "💭 Comparing versions"]
    assert all(m.silent for m in r.channel.sent)
    await r.text("Version two is newer.")
    await r.item("Version two is newer.")
    assert not r.channel.sent[-1].silent  # the answer is the reply's first real message
    assert await r.stream.finish("Version two is newer.") is None
    assert r.visible == ["Version two is newer."]


async def test_block_without_delete_gets_no_reasoning_lines() -> None:
    r = await rig("block", supports_delete=False, supports_edit=False)
    await r.reasoning("**Thinking**")
    await r.text("Answer.")
    await r.item("Answer.")
    assert await r.stream.finish("Answer.") is None
    assert r.visible == ["Answer."]


async def test_block_final_text_beyond_the_stream_is_sent_and_a_different_one_handed_back() -> None:
    r = await rig("block")
    await r.text("Part one.")
    await r.item("Part one.")
    assert await r.stream.finish("Part one.\n\nPart two, not streamed.") is None
    assert r.visible == ["Part one.", "Part two, not streamed."]
    r = await rig("block")
    await r.text("Partial")
    await r.item("Partial")
    assert await r.stream.finish("Something else entirely.") == "Something else entirely."


# --------------------------------------------------------------------------- driver


class NotifyingPort(ChannelReplyPort):
    """A port that signals each send, so a test can wait for the driver causally."""

    def __init__(self, channel: MemoryChannel) -> None:
        super().__init__(channel, features_of(channel))
        self.sent = anyio.Event()

    async def send(self, message):
        result = await super().send(message)
        self.sent.set()
        return result


async def test_the_driver_acts_on_events_and_timers_without_further_input() -> None:
    channel = await running(MemoryChannel("tg"))
    port = NotifyingPort(channel)
    stream = StreamController(port, chat_id="chat", mode="block")
    async with stream.running():
        # A complete sentence and then silence: the idle flush must fire by itself.
        stream.on_event(StreamEvent(kind=StreamEventKind.TEXT_DELTA, text="All done here."))
        with anyio.fail_after(10):
            await port.sent.wait()
    assert channel.visible("chat") == ["All done here."]
    assert await stream.finish("All done here.") is None
    assert channel.visible("chat") == ["All done here."]


async def test_a_failed_send_in_block_mode_hands_back_only_what_was_not_delivered() -> None:
    r = await rig("block")
    await r.text("First item.")
    await r.item("First item.")
    r.channel.fail_next(ChannelError("flood control"))
    await r.text("Second item.")
    await r.item("Second item.")
    assert await r.stream.finish("First item.\n\nSecond item.") == "Second item."
    assert r.visible == ["First item."]


async def test_cards_are_measured_in_the_channels_dialect() -> None:
    channel = await running(MemoryChannel("tg"))
    port = ChannelReplyPort(channel, features_of(channel))
    clock = Clock()
    stream = StreamController(
        port, chat_id="chat", mode="draft", clock=clock, dialect="telegram_html"
    )
    para = " ".join(f"**bold{n}** and [link {n}](https://example.com/{n})." for n in range(12))
    answer = "\n\n".join(f"## Section {n}\n\n{para}" for n in range(6))
    for start in range(0, len(answer), 70):
        stream.on_event(
            StreamEvent(kind=StreamEventKind.TEXT_DELTA, text=answer[start : start + 70])
        )
        clock.advance(1.0)
        await stream.tick()
    assert await stream.finish(answer) is None
    cards = channel.visible("chat")
    assert len(cards) >= 3
    assert all(rendered_length(card, "telegram") <= DRAFT_HARD_CHARS for card in cards)
    assert all(card.startswith("## Section") for card in cards)


async def test_an_unbreakable_code_block_stops_the_live_card_and_is_handed_back() -> None:
    r = await rig("draft")
    code = "```python\n" + "".join(f"value_{n} = compute({n})\n" for n in range(120)) + "```"
    answer = "Here is the script you asked for.\n\n" + code
    for start in range(0, len(answer), 60):
        await r.text(answer[start : start + 60])
        await r.later(1.0)
    assert all(len(card) <= 1800 for card in r.visible)
    rest = await r.stream.finish(answer)
    # The code block cannot be cut and is too long for a card: the port delivers it (as a
    # file attachment where it is too long for a message); the intro stays a card.
    assert rest is not None and rest.startswith("```python") and rest.endswith("```")
    assert r.visible == ["Here is the script you asked for."]


# --------------------------------------------------------------------------- the runtime's port


class _Section:
    def __init__(self, streaming: str | None) -> None:
        self.streaming = streaming


class _Runtime:
    def emit(self, name: str, **data) -> None:
        return None


@pytest.mark.parametrize(
    ("supports_draft", "configured", "streaming", "mode"),
    [
        (True, None, "draft", "draft"),  # Telegram: draft by default
        (False, None, "block", "block"),  # can edit, not draft-capable (Slack): block
        (False, "draft", "draft", "off"),  # explicit draft there: kept, streams nothing
        (True, "off", "off", "off"),
        (True, "block", "block", "block"),
    ],
)
def test_the_runtime_port_carries_the_configured_and_derived_mode(
    supports_draft, configured, streaming, mode
) -> None:
    from fermix_core.channels.runtime import ChannelHealth, _Slot, default_port
    from fermix_core.specs import ChannelSpec

    spec = ChannelSpec(name="chat", factory="x:y", supports_draft=supports_draft)
    slot = _Slot(spec=spec, section=_Section(configured), health=ChannelHealth("chat"))
    port = default_port(MemoryChannel("chat"), spec, slot, _Runtime())
    assert (port.features.streaming, port.features.stream_mode) == (streaming, mode)


async def test_a_refused_status_line_does_not_stop_the_answer() -> None:
    r = await rig("draft")
    r.channel.fail_next(ChannelError("rate limited"))
    await r.reasoning("**Thinking**")  # the platform refuses the 💭 line
    await r.reasoning("**Still thinking**")  # no more attempts this turn
    await r.text("The answer arrives anyway, long enough to open.")
    assert r.visible == ["The answer arrives anyway, long enough to open."]
    assert await r.stream.finish("The answer arrives anyway, long enough to open.") is None
    assert r.visible == ["The answer arrives anyway, long enough to open."]


WHOLE_REPLIES = [
    "re: hello",
    "**Done.** See [the docs](https://example.com/docs) and `fermix doctor`.",
    "- one\n- two\n\n> quoted *text*\n\n```py\nprint(1)\n```",
    " ".join(f"Sentence {n} of a reply that arrived whole." for n in range(60)),
]


@pytest.mark.parametrize("reply", WHOLE_REPLIES)
async def test_block_cut_decisions_taken_inline_send_what_the_worker_thread_path_sends(
    reply: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Short text is cut on the event loop instead of a worker thread: the same messages."""

    async def deliver(inline_chars: int) -> list[tuple[str, bool]]:
        monkeypatch.setattr(streaming, "INLINE_CHARS", inline_chars)
        r = await rig("block")
        await r.text(reply)
        await r.item(reply)
        assert await r.stream.finish(reply) is None
        return [(m.text, m.silent) for m in r.channel.sent]

    threaded = await deliver(-1)
    inline = await deliver(streaming.INLINE_CHARS)
    assert inline == threaded
    assert " ".join(text for text, _ in inline).split() == reply.split()
