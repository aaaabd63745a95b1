"""Slack streams in block mode: the real adapter, the runtime's outbound port and the stream
controller, posting to the loopback Slack Web API.

Slack can edit its messages, but its spec is not draft-capable, so an unset ``streaming``
derives ``"block"``: each finished thought is a ``chat.postMessage`` in mrkdwn in the
thread, 💭 lines are posted and ``chat.delete``d when the answer lands, nothing is edited.
"""

from __future__ import annotations

import sys

import pytest
from fermix_channels.slack.plugin import SPEC
from fermix_core.channels.outbound import OutboundPort
from fermix_core.channels.presentation import present
from fermix_core.channels.streaming import StreamController
from fermix_core.gateway.reply import features_of
from fermix_core.provider import StreamEvent, StreamEventKind

pytestmark = pytest.mark.anyio

fs = sys.modules["fermix_channels_tests_fake_slack"]

CHAT = "C0CHAN001"
THREAD = "1760000000.000001"


def answer() -> str:
    para = " ".join(
        f"Point **{n}** is made here, with [a link](https://example.com/{n})." for n in range(8)
    )
    return "\n\n".join([para, "## Details", para, para, "Done."])


async def test_a_reply_streams_into_a_slack_thread_as_blocks(running, fake) -> None:
    now = [0.0]
    async with running() as (channel, _):
        port = OutboundPort(channel, features_of(channel, draft=SPEC.supports_draft))
        assert port.features.stream_mode == "block"
        stream = StreamController(
            port,
            chat_id=CHAT,
            thread_id=THREAD,
            mode=port.features.stream_mode,
            dialect=channel.dialect,
            clock=lambda: now[0],
        )
        text = answer()
        stream.on_event(StreamEvent(kind=StreamEventKind.REASONING_SUMMARY, text="**Reading**"))
        await stream.tick()
        assert fake.texts(CHAT) == ["💭 Reading"]
        for start in range(0, len(text), 25):
            stream.on_event(
                StreamEvent(kind=StreamEventKind.TEXT_DELTA, text=text[start : start + 25])
            )
            now[0] += 0.05
            await stream.tick()
        stream.on_event(StreamEvent(kind=StreamEventKind.ITEM_DONE, text=text, item_type="message"))
        assert await stream.finish(text) is None
    shown = fake.texts(CHAT)
    assert len(shown) >= 2  # ~2,600 characters: more than one 800-1,200-char message
    assert all("**" not in t and "](" not in t for t in shown)  # mrkdwn: *bold*, <url|label>
    assert "*1*" in shown[0] and "<https://example.com/1|a link>" in shown[0]
    rendered = "".join(c.text for c in present(text, "slack").chunks)
    assert "".join(shown).replace("\n", "").replace(" ", "") == rendered.replace("\n", "").replace(
        " ", ""
    )
    assert all(p.thread_ts == THREAD for p in fake.posted)
    assert fake.calls_of("chat.update") == []
    [deleted] = fake.calls_of("chat.delete")  # the 💭 line, once the answer landed
    assert next(p for p in fake.posted if p.ts == deleted["ts"]).text == "💭 Reading"
