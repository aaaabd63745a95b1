"""The outbound reply port: rendering, splitting, pacing, retries, fallbacks, media caps."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest
from fermix_core.channel import (
    Attachment,
    ChannelError,
    ChannelFormatError,
    ChannelRateLimited,
    ChannelTransientError,
    OutboundMessage,
)
from fermix_core.channels.outbound import MediaTooLarge, OutboundPort, ReplyUndelivered, RetryPolicy
from fermix_core.gateway.reply import features_of
from fermix_core.testing import MemoryChannel, StubChannelHost

pytestmark = pytest.mark.anyio


class Clock:
    def __init__(self) -> None:
        self.now = 100.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


async def port_for(channel: MemoryChannel, **kwargs) -> tuple[OutboundPort, Clock, list[str]]:
    await channel.start(StubChannelHost(channel.name))
    clock = Clock()
    failures: list[str] = []
    port = OutboundPort(
        channel,
        features_of(channel),
        sleep=clock.sleep,
        clock=clock,
        on_failed=failures.append,
        retry=kwargs.pop("retry", RetryPolicy(attempts=4, base=0.5, cap=4)),
        **kwargs,
    )
    return port, clock, failures


def whatsapp_like(**caps) -> MemoryChannel:
    channel = MemoryChannel("wa")
    channel.dialect = "whatsapp"
    channel.max_text = 200
    channel.media_caps = caps or {"image": 5_000_000, "document": 100_000_000}
    return channel


async def test_markdown_is_rendered_split_and_only_the_first_part_notifies() -> None:
    channel = whatsapp_like()
    port, _, _ = await port_for(channel)
    paragraphs = [
        f"Paragraph {i} has **bold** words and [a link](https://x.test/{i})." for i in range(8)
    ]
    sent = await port.send(
        OutboundMessage(chat_id="c", text="\n\n".join(paragraphs), reply_to="in7")
    )
    assert sent.message_id == "m1"
    assert len(channel.sent) > 1
    assert all(len(m.text) <= 200 for m in channel.sent)
    assert "*bold*" in channel.sent[0].text and "**" not in channel.sent[0].text
    assert "a link: https://x.test/0" in channel.sent[0].text
    assert [m.silent for m in channel.sent] == [False] + [True] * (len(channel.sent) - 1)
    assert [m.reply_to for m in channel.sent] == ["in7"] + [None] * (len(channel.sent) - 1)
    joined = "".join(m.text for m in channel.sent)
    for i in range(8):
        assert f"Paragraph {i}" in joined


async def test_a_giant_code_block_follows_as_a_file() -> None:
    channel = whatsapp_like()
    port, _, _ = await port_for(channel)
    code = "\n".join(f"print({i})" for i in range(100))
    await port.send(OutboundMessage(chat_id="c", text=f"Here:\n\n```python\n{code}\n```\n\nDone."))
    files = [m for m in channel.sent if m.attachments]
    assert len(files) == 1 and files[0] is channel.sent[-1]
    assert files[0].attachments[0].read_bytes().decode().rstrip("\n") == code
    assert files[0].silent


async def test_rate_limits_are_honoured_and_retried() -> None:
    channel = whatsapp_like()
    port, clock, _ = await port_for(channel)
    channel.fail_next(ChannelRateLimited(7.5), ChannelRateLimited(None))
    await port.send(OutboundMessage(chat_id="c", text="hello"))
    assert clock.slept[0] == 7.5
    assert len(clock.slept) == 2 and 0 < clock.slept[1] <= 4
    assert channel.texts == ["hello"]


async def test_transient_errors_retry_with_backoff_then_give_up_loudly(caplog) -> None:
    channel = whatsapp_like()
    port, clock, failures = await port_for(channel)
    channel.fail_next(ChannelTransientError("502"), ChannelTransientError("503"))
    await port.send(OutboundMessage(chat_id="c", text="first"))
    assert channel.texts == ["first"] and len(clock.slept) == 2
    channel.fail_next(*(ChannelTransientError("down") for _ in range(4)))
    with (
        caplog.at_level(logging.ERROR, logger="fermix.channels.outbound"),
        pytest.raises(ReplyUndelivered, match="down"),
    ):
        await port.send(OutboundMessage(chat_id="lost-chat", thread_id="t9", text="second"))
    assert channel.texts == ["first"]
    record = next(r for r in caplog.records if "undelivered" in r.getMessage())
    assert "lost-chat" in record.getMessage() and "t9" in record.getMessage()
    assert "kept in the conversation's history" in record.getMessage()
    assert failures and "down" in failures[0]


async def test_a_permanent_refusal_is_not_retried() -> None:
    channel = whatsapp_like()
    port, clock, failures = await port_for(channel)
    channel.fail_next(ChannelError("(#131047) Re-engagement message: more than 24 hours"))
    with pytest.raises(ReplyUndelivered, match="131047"):
        await port.send(OutboundMessage(chat_id="c", text="late"))
    assert clock.slept == []
    assert "131047" in failures[0]


async def test_a_rate_limit_longer_than_the_cap_is_not_waited_for() -> None:
    channel = whatsapp_like()
    port, clock, _ = await port_for(channel)
    channel.fail_next(ChannelRateLimited(3600))
    with pytest.raises(ReplyUndelivered):
        await port.send(OutboundMessage(chat_id="c", text="x"))
    assert clock.slept == []


async def test_a_rejected_format_is_resent_once_as_plain(caplog) -> None:
    channel = whatsapp_like()
    port, _, _ = await port_for(channel)
    channel.fail_next(ChannelFormatError("can't parse entities"))
    with caplog.at_level(logging.ERROR):
        await port.send(OutboundMessage(chat_id="c", text="some **bold** text"))
    (sent,) = channel.sent
    assert sent.plain and sent.text == "some bold text"
    assert any("rendering fault" in r.getMessage() for r in caplog.records)
    # A plain message rejected as badly formatted is not retried again.
    channel.fail_next(ChannelFormatError("still"), ChannelFormatError("again"))
    with pytest.raises(ReplyUndelivered):
        await port.send(OutboundMessage(chat_id="c", text="**x**"))


async def test_media_over_the_cap_is_refused_before_upload(tmp_path) -> None:
    channel = whatsapp_like(image=5_000_000, document=100_000_000)
    port, _, _ = await port_for(channel)
    big = tmp_path / "photo.png"
    big.write_bytes(b"\0" * 10)
    image = Attachment(kind="image", path=big, size=7_200_000, filename="photo.png")
    expected = r"photo.png is 7.2 MB; wa accepts image files up to 5.0 MB\. Send it as a document"
    with pytest.raises(MediaTooLarge, match=expected):
        await port.send(OutboundMessage(chat_id="c", attachments=[image]))
    assert channel.sent == []
    huge = Attachment(kind="video", data=b"v", size=200_000_000, filename="film.mp4")
    with pytest.raises(MediaTooLarge, match="Compress it"):
        await port.send(OutboundMessage(chat_id="c", attachments=[huge]))
    ok = Attachment(kind="document", data=b"%PDF", filename="a.pdf", caption="the file")
    await port.send(OutboundMessage(chat_id="c", attachments=[ok]))
    assert channel.sent[0].attachments == [ok]


async def test_one_chat_is_paced_and_others_are_not() -> None:
    channel = whatsapp_like()
    channel.send_interval = 1.0
    port, clock, _ = await port_for(channel)
    await port.send(OutboundMessage(chat_id="a", text="one"))
    await port.send(OutboundMessage(chat_id="b", text="two"))
    assert clock.slept == []
    clock.now += 0.25
    await port.send(OutboundMessage(chat_id="a", text="three"))
    assert clock.slept == [pytest.approx(0.75)]


async def test_edits_are_rendered_and_fall_back_to_plain() -> None:
    channel = whatsapp_like()
    port, _, _ = await port_for(channel)
    sent = await port.send(OutboundMessage(chat_id="c", text="draft"))
    await port.edit("c", sent.message_id, "now **bold**")
    assert channel.edits[-1] == ("c", sent.message_id, "now *bold*")

    async def refuse_once(chat_id, message_id, text, *, plain=False):
        if not plain:
            raise ChannelFormatError("bad entities")
        channel.edits.append((chat_id, message_id, f"plain:{text}"))

    channel.edit = refuse_once
    await port.edit("c", sent.message_id, "again **bold**")
    assert channel.edits[-1] == ("c", sent.message_id, "plain:again bold")


async def test_reactions_respect_the_allowed_set() -> None:
    channel = whatsapp_like()
    channel.reactions_allowed = ("thumbsup", "eyes")
    port, _, _ = await port_for(channel)
    inbound = await channel.inject("hi")
    await port.react("chat", inbound.message_id, "eyes")
    with pytest.raises(ChannelError, match="thumbsup eyes"):
        await port.react("chat", inbound.message_id, "🎉")
    assert channel.reactions == [("chat", inbound.message_id, "eyes")]


async def test_the_approval_prompt_goes_out_as_plain_text_with_its_token() -> None:
    channel = whatsapp_like()
    channel.max_text = 4096
    port, _, _ = await port_for(channel)
    proposal = SimpleNamespace(
        prompt=lambda include_token=True: (
            "The agent asks for access to a folder:\n"
            "  /home/me/my_project\nApprove with /confirm k3y_T0 (expires in 60 s)."
        )
    )
    await port.approval("c", None, proposal)
    (sent,) = channel.sent
    assert sent.plain
    assert sent.text.endswith("Approve with /confirm k3y_T0 (expires in 60 s).")
    assert "my_project" in sent.text  # no markup mangled the underscores


async def test_plain_text_over_the_cap_is_cut_at_lines() -> None:
    channel = whatsapp_like()
    port, _, _ = await port_for(channel)
    text = "\n".join(f"line {i:03d} " + "x" * 40 for i in range(12)) + "\n" + "y" * 450
    await port.send(OutboundMessage(chat_id="c", text=text, plain=True))
    assert all(m.plain and len(m.text) <= 200 for m in channel.sent)
    assert "".join(m.text for m in channel.sent).replace("\n", "") == text.replace("\n", "")
