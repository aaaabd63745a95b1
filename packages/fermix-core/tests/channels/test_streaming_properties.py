"""Property tests: whatever the text and however it is cut into deltas, streaming loses
nothing, repeats nothing and keeps every message within its size.

Each example streams a generated Markdown answer through a StreamController into a
MemoryChannel (hand-driven clock, random pauses), then finishes it. What the chat shows,
plus whatever ``finish`` hands back for ordinary delivery, must be exactly the answer's
non-whitespace characters in order.
"""

from __future__ import annotations

import itertools
import re

import anyio
from fermix_core.channels.presentation import rendered_length
from fermix_core.channels.streaming import DRAFT_HARD_CHARS, StreamController
from fermix_core.gateway.reply import ChannelReplyPort, features_of
from fermix_core.provider import StreamEvent, StreamEventKind
from fermix_core.testing import MemoryChannel, StubChannelHost
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

WORDS = st.sampled_from(
    ["alpha", "beta", "**bold**", "_it_", "`code`", "[link](https://x.y/z)", "émoji🙂", "a.b"]
)
SENTENCE = st.lists(WORDS, min_size=1, max_size=14).map(lambda w: " ".join(w) + ".")
PARAGRAPH = st.lists(SENTENCE, min_size=1, max_size=8).map(" ".join)
BLOCK = st.one_of(
    PARAGRAPH,
    PARAGRAPH.map(lambda p: f"## {p[:30]}"),
    st.lists(SENTENCE, min_size=1, max_size=4).map(lambda s: "\n".join(f"- {x}" for x in s)),
    st.lists(SENTENCE, min_size=1, max_size=12).map(lambda s: "```\n" + "\n".join(s) + "\n```"),
)
ANSWER = st.lists(BLOCK, min_size=1, max_size=14).map("\n\n".join)


def nonspace(text: str) -> str:
    return re.sub(r"\s+", "", text)


async def stream_through(mode: str, answer: str, cuts: list[int], pauses: list[float]):
    channel = MemoryChannel("prop", supports_edit=mode == "draft")
    await channel.start(StubChannelHost("prop"))
    now = [0.0]
    stream = StreamController(
        ChannelReplyPort(channel, features_of(channel)),
        chat_id="chat",
        mode=mode,
        clock=lambda: now[0],
    )
    stream.on_event(StreamEvent(kind=StreamEventKind.REASONING_SUMMARY, text="**Thinking**"))
    points = sorted({c % (len(answer) + 1) for c in cuts} | {0, len(answer)})
    for i, (a, b) in enumerate(itertools.pairwise(points)):
        stream.on_event(StreamEvent(kind=StreamEventKind.TEXT_DELTA, text=answer[a:b]))
        now[0] += pauses[i % len(pauses)]
        await stream.tick()
    stream.on_event(StreamEvent(kind=StreamEventKind.ITEM_DONE, text=answer, item_type="message"))
    rest = await stream.finish(answer)
    return channel, rest


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    answer=ANSWER,
    cuts=st.lists(st.integers(min_value=0, max_value=10_000), max_size=60),
    pauses=st.lists(st.sampled_from([0.0, 0.3, 1.0, 2.5]), min_size=1, max_size=5),
    mode=st.sampled_from(["draft", "block"]),
)
def test_streaming_delivers_the_answer_exactly_once(answer, cuts, pauses, mode) -> None:
    channel, rest = anyio.run(stream_through, mode, answer, cuts, pauses)
    shown = channel.visible("chat")
    assert not any(text.startswith("💭") for text in shown)  # the status is gone
    delivered = "".join(shown) + (rest or "")
    assert nonspace(delivered) == nonspace(answer)
    if mode == "draft":
        assert all(rendered_length(card, "plain") <= DRAFT_HARD_CHARS for card in shown)
    assert sum(not m.silent for m in channel.sent) <= 1  # only the first message notifies
