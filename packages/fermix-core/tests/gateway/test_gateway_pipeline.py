"""Gateway.ingest end to end: real queue, real router over core's commands, MemoryChannel."""

from __future__ import annotations

from pathlib import Path

import pytest
from fermix_core.channel import Attachment, InboundMessage
from fermix_core.commands.plugin import fermix_commands
from fermix_core.commands.router import CommandRouter
from fermix_core.gateway.gateway import (
    AGENT_UNAVAILABLE_REPLY,
    EMPTY_MESSAGE_REPLY,
    VOICE_NEEDS_TRANSCRIPTION_REPLY,
    Gateway,
    needs_transcription,
)
from fermix_core.gateway.queue import ConversationQueue
from fermix_core.gateway.reply import ChannelReplyPort, features_of
from fermix_core.gateway.trust import TrustPolicy
from fermix_core.gateway.types import ChannelFeatures, IngestStatus
from fermix_core.specs import CommandSpec, Role
from fermix_core.testing import MemoryChannel, StubChannelHost
from fermix_core.tool import Trust

pytestmark = pytest.mark.anyio

VOICE = Attachment(kind="audio", data=b"OggS", mime_type="audio/ogg")
IMAGE = Attachment(kind="image", data=b"\x89PNG", mime_type="image/png")


# ---------------------------------------------------------------------- authorization


async def test_owner_runs_as_operator_and_guest_as_guest(rig) -> None:
    owner = await rig.ingest("from owner", sender="owner")
    guest = await rig.ingest("from guest", sender="guest", chat="g")
    assert owner.status is IngestStatus.QUEUED and owner.trust is Trust.OPERATOR
    assert guest.status is IngestStatus.QUEUED and guest.trust is Trust.GUEST
    await rig.queue.join()
    assert owner.job.trust is Trust.OPERATOR
    assert guest.job.trust is Trust.GUEST
    assert sorted(rig.channel.texts) == ["re: from guest", "re: from owner"]


async def test_unauthorized_sender_is_dropped_silently_before_media(rig) -> None:
    # A voice note that would be refused with a reply if the sender were authorized; and
    # an attachment whose file does not exist, so any attempt to read it would raise.
    ghost = Attachment(kind="audio", path=Path("/nonexistent/voice.ogg"), mime_type="audio/ogg")
    outcome = await rig.ingest("", sender="stranger", attachments=[ghost])
    assert outcome.status is IngestStatus.DROPPED
    assert outcome.trust is None and outcome.job is None
    assert rig.channel.sent == []
    assert rig.events.items == []  # no channel.message for strangers
    assert rig.executor.started == []

    for text in ("/help", "/stop", "hello", ""):
        assert (await rig.ingest(text, sender="stranger")).status is IngestStatus.DROPPED
    assert rig.channel.sent == []
    assert rig.queue.load().lanes == 0


async def test_a_channel_without_a_policy_serves_nobody(rig) -> None:
    outcome = await rig.ingest("hello", sender="owner", channel="unknown")
    assert outcome.status is IngestStatus.DROPPED
    assert rig.channel.sent == []


async def test_sender_ids_compare_as_strings(events, executor) -> None:
    policies = {"tg": TrustPolicy(owner_id=123456789, allowed_ids=[42])}  # type: ignore[arg-type]
    channel = MemoryChannel("tg")
    await channel.start(StubChannelHost("tg"))
    async with ConversationQueue(executor) as queue:
        gw = Gateway(
            policies=policies,
            commands=CommandRouter(),
            queue=queue,
            services=None,  # type: ignore[arg-type]
            emit=events,
        )
        port = ChannelReplyPort(channel)
        msg = InboundMessage(channel="tg", chat_id="1", sender_id=123456789, text="hi")  # type: ignore[arg-type]
        assert (await gw.ingest(msg, port)).trust is Trust.OPERATOR
        msg = InboundMessage(channel="tg", chat_id="1", sender_id=" 42 ", text="hi")
        assert (await gw.ingest(msg, port)).trust is Trust.GUEST


async def test_local_surface_is_operator_for_any_sender_and_keeps_cwd(rig, tmp_path) -> None:
    msg = rig.message("do it", channel="cli", sender="whoever", local=True)
    outcome = await rig.gateway.ingest(msg, rig.port, cwd=tmp_path)
    assert outcome.trust is Trust.OPERATOR
    assert outcome.job.cwd == tmp_path
    # A remote channel never gets a request directory, even if a caller passes one.
    remote = await rig.gateway.ingest(rig.message("x", sender="owner"), rig.port, cwd=tmp_path)
    assert remote.job.cwd is None
    await rig.queue.join()


async def test_channel_message_event_for_authorized_senders(rig) -> None:
    await rig.ingest("hi", sender="guest")
    await rig.queue.join()
    (event,) = rig.events.named("channel.message")
    assert event["channel"] == "tg" and event["direction"] == "inbound"
    assert event["trust"] == "guest"
    assert "sender_id" not in event


# ---------------------------------------------------------------------- empty and media


@pytest.mark.parametrize("text", ["", "   ", "\n\t"])
async def test_empty_message_gets_a_note_and_no_turn(rig, text) -> None:
    outcome = await rig.ingest(text)
    assert outcome.status is IngestStatus.EMPTY
    assert rig.channel.texts == [EMPTY_MESSAGE_REPLY]
    assert rig.channel.sent[0].reply_to is not None
    assert rig.executor.started == []
    assert rig.queue.load().lanes == 0


async def test_captionless_image_is_actionable_and_reaches_the_turn(rig) -> None:
    outcome = await rig.ingest("", attachments=[IMAGE])
    assert outcome.status is IngestStatus.QUEUED
    await outcome.job.done.wait()
    assert rig.executor.started[0].message.attachments == [IMAGE]


@pytest.mark.parametrize(
    "attachment",
    [
        VOICE,
        Attachment(kind="document", data=b"ID3", mime_type="audio/mpeg", filename="memo.mp3"),
    ],
)
async def test_audio_is_refused_with_a_setup_hint_even_with_a_caption(rig, attachment) -> None:
    outcome = await rig.ingest("what do you think?", attachments=[IMAGE, attachment])
    assert outcome.status is IngestStatus.MEDIA_REFUSED
    assert rig.channel.texts == [VOICE_NEEDS_TRANSCRIPTION_REPLY]
    assert "fermix setup" in VOICE_NEEDS_TRANSCRIPTION_REPLY
    assert rig.executor.started == []


def test_needs_transcription_by_kind_or_mime() -> None:
    assert needs_transcription(VOICE)
    assert needs_transcription(Attachment(kind="document", data=b"x", mime_type="Audio/WAV"))
    assert not needs_transcription(IMAGE)
    assert not needs_transcription(Attachment(kind="video", data=b"x", mime_type="video/mp4"))


async def test_a_reply_the_platform_refuses_does_not_fail_ingest(rig) -> None:
    from fermix_core.channel import ChannelError

    rig.channel.fail_next(ChannelError("chat not found"))
    outcome = await rig.ingest("")
    assert outcome.status is IngestStatus.EMPTY
    assert rig.channel.sent == []


# ---------------------------------------------------------------------- commands


async def test_unknown_slash_command_passes_through_as_text(rig) -> None:
    for text in ("/frobnicate now", "/usr/bin/python crashed", "/ hello", "see /help"):
        outcome = await rig.ingest(text)
        assert outcome.status is IngestStatus.QUEUED, text
    await rig.queue.join()
    assert rig.executor.started_texts() == [
        "/frobnicate now",
        "/usr/bin/python crashed",
        "/ hello",
        "see /help",
    ]
    assert rig.events.named("command.received") == []


async def test_commands_run_before_the_queue_with_telemetry(rig) -> None:
    outcome = await rig.ingest("/HELP@fermix_bot")
    assert outcome.status is IngestStatus.COMMAND and outcome.command == "help"
    assert rig.executor.started == []
    assert "Commands you can use here" in rig.channel.texts[0]
    names = rig.events.names()
    assert names == ["channel.message", "command.received", "command.dispatch"]
    (dispatch,) = rig.events.named("command.dispatch")
    assert dispatch["command"] == "help" and dispatch["ok"] is True
    assert isinstance(dispatch["duration_ms"], float) and dispatch["duration_ms"] >= 0


async def test_guest_is_refused_owner_only_commands(rig) -> None:
    outcome = await rig.ingest("/new", sender="guest")
    assert outcome.status is IngestStatus.COMMAND
    assert rig.services.cleared == []
    assert "owner-only" in rig.channel.texts[0]
    assert "command_allowlist" in rig.channel.texts[0]
    (refusal,) = rig.events.named("command.unauthorized")
    assert refusal["command"] == "new" and refusal["reason"] == "operator_only"
    assert rig.events.named("command.dispatch") == []


async def test_command_allowlist_opens_owner_commands_but_never_sandbox_mutations(rig) -> None:
    await rig.ingest("/clear", sender="helper")
    assert rig.services.cleared == [("tg", "chat", None)]
    for text in ("/grant /etc", "/revoke ~/x", "/confirm ABC123", "/sandbox grant /tmp"):
        await rig.ingest(text, sender="helper")
    refusals = rig.events.named("command.unauthorized")
    assert [r["invoked_as"] for r in refusals] == ["grant", "revoke", "confirm", "sandbox"]
    assert {r["reason"] for r in refusals} == {"sandbox_mutation"}
    assert all("only the owner" in t for t in rig.channel.texts[1:])


async def test_operator_reaches_the_sandbox_command(rig) -> None:
    await rig.ingest("/grant ~/projects")
    assert "sandbox is not running in this process" in rig.channel.texts[0]
    assert rig.events.named("command.unauthorized") == []


async def test_guest_may_run_any_role_commands(rig) -> None:
    await rig.ingest("/whoami", sender="guest")
    assert "Your tg user id: guest" in rig.channel.texts[0]
    assert "guest" in rig.channel.texts[0].splitlines()[1]


async def test_stop_runs_ahead_of_the_queue(rig) -> None:
    rig.executor.gate("long task")
    first = await rig.ingest("long task")
    queued = [await rig.ingest(f"then {i}") for i in range(2)]
    await rig.executor.wait_started("long task")

    outcome = await rig.ingest("/stop")

    assert outcome.status is IngestStatus.COMMAND
    assert first.job.stopped and first.job.done.is_set()
    assert all(q.job.stopped and not q.job.started for q in queued)
    assert rig.executor.started_texts() == ["long task"]
    assert [j.message.text for j in rig.executor.stopped].count("long task") == 1
    # The stopped turn delivered nothing; the only message is /stop's own answer.
    assert rig.channel.texts == [
        "Stopped the running turn (its request stays in history as context only); "
        "dropped 2 queued messages."
    ]
    assert rig.queue.load().lanes == 0


async def test_stop_in_one_thread_leaves_other_threads_running(rig) -> None:
    rig.executor.gate("thread a work")
    rig.executor.gate("thread b work")
    a = await rig.ingest("thread a work", thread="a")
    b = await rig.ingest("thread b work", thread="b")
    await rig.executor.wait_started("thread b work")
    await rig.ingest("/stop", thread="a")
    assert a.job.stopped
    assert not b.job.done.is_set()
    rig.executor.gate("thread b work").set()
    await b.job.done.wait()
    assert not b.job.stopped


async def test_commands_are_plain_text_where_the_surface_has_none(rig) -> None:
    class AcpPort:
        features = ChannelFeatures(local=True, slash_commands=False)

        def __init__(self) -> None:
            self.sent = []

        async def send(self, message):
            self.sent.append(message)
            from fermix_core.channel import SentMessage

            return SentMessage(message_id="1")

    port = AcpPort()
    msg = rig.message("/stop", channel="cli", sender="acp", local=True)
    outcome = await rig.gateway.ingest(msg, port)
    assert outcome.status is IngestStatus.QUEUED
    await outcome.job.done.wait()
    assert [m.text for m in port.sent] == ["re: /stop"]


async def test_a_failing_third_party_command_is_contained(events, executor) -> None:
    async def explode(ctx):
        raise RuntimeError("token sk-secret-value leaked?")

    router = CommandRouter(
        [
            *fermix_commands(),
            CommandSpec(name="boom", help="explodes", handler=explode, role=Role.ANY),
        ]
    )
    channel = MemoryChannel("tg")
    await channel.start(StubChannelHost("tg"))
    async with ConversationQueue(executor) as queue:
        gw = Gateway(
            policies={"tg": TrustPolicy(owner_id="owner")},
            commands=router,
            queue=queue,
            services=None,  # type: ignore[arg-type]
            emit=events,
        )
        msg = InboundMessage(channel="tg", chat_id="c", sender_id="owner", text="/boom")
        outcome = await gw.ingest(msg, ChannelReplyPort(channel))
    assert outcome.status is IngestStatus.COMMAND
    (text,) = channel.texts
    assert "/boom failed (RuntimeError)" in text and "fermix logs" in text
    assert "sk-secret" not in text
    (dispatch,) = events.named("command.dispatch")
    assert dispatch["ok"] is False


# ---------------------------------------------------------------------- availability


async def test_agent_unavailable_replies_and_emits(rig) -> None:
    rig.available[0] = False
    outcome = await rig.ingest("are you there?")
    assert outcome.status is IngestStatus.UNAVAILABLE
    assert rig.channel.texts == [AGENT_UNAVAILABLE_REPLY]
    (event,) = rig.events.named("dispatcher.agent_unavailable")
    assert event["channel"] == "tg"
    assert rig.executor.started == []
    # Commands are pre-agent and still answer during a restart.
    assert (await rig.ingest("/whoami")).status is IngestStatus.COMMAND


async def test_a_raising_availability_check_counts_as_unavailable(rig) -> None:
    def broken() -> bool:
        raise RuntimeError("supervisor gone")

    rig.gateway._agent_available = broken
    outcome = await rig.ingest("hello")
    assert outcome.status is IngestStatus.UNAVAILABLE


async def test_a_closed_queue_answers_restart_in_progress(events, executor) -> None:
    queue = ConversationQueue(executor)  # never entered
    channel = MemoryChannel("tg")
    await channel.start(StubChannelHost("tg"))
    gw = Gateway(
        policies={"tg": TrustPolicy(owner_id="owner")},
        commands=CommandRouter(),
        queue=queue,
        services=None,  # type: ignore[arg-type]
        emit=events,
    )
    msg = InboundMessage(channel="tg", chat_id="c", sender_id="owner", text="hi")
    outcome = await gw.ingest(msg, ChannelReplyPort(channel))
    assert outcome.status is IngestStatus.UNAVAILABLE
    assert channel.texts == [AGENT_UNAVAILABLE_REPLY]


async def test_telemetry_failures_never_fail_a_message(rig) -> None:
    def broken_emit(name, **data):
        raise RuntimeError("exporter down")

    rig.gateway._emit_fn = broken_emit
    outcome = await rig.ingest("/help")
    assert outcome.status is IngestStatus.COMMAND
    assert "Commands you can use here" in rig.channel.texts[0]


async def test_ingest_refuses_caller_bugs_loudly(rig) -> None:
    with pytest.raises(TypeError, match="InboundMessage"):
        await rig.gateway.ingest({"text": "hi"}, rig.port)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="reply port"):
        await rig.gateway.ingest(rig.message("hi"), object())  # type: ignore[arg-type]


# ---------------------------------------------------------------------- through a channel


async def test_memory_channel_deliver_callback_drives_the_pipeline(events, executor) -> None:
    channel = MemoryChannel("tg")
    policies = {"tg": TrustPolicy.from_section({"allowed_user_ids": ["me"]}, channel="tg")}
    async with ConversationQueue(executor) as queue:
        gw = Gateway(
            policies=policies,
            commands=CommandRouter(fermix_commands()),
            queue=queue,
            services=None,  # type: ignore[arg-type]
            emit=events,
        )
        port = ChannelReplyPort(channel, features_of(channel))
        await channel.start(StubChannelHost("tg", on_deliver=lambda m: gw.ingest(m, port)))
        await channel.inject("hello", sender_id="me")
        await channel.inject("hello", sender_id="intruder")
        await channel.inject("/whoami", sender_id="me")
        await queue.join()
    # The single allowlisted id is the owner; the intruder got nothing back.
    whoami = [t for t in channel.texts if t.startswith("Your tg user id: me")]
    assert len(whoami) == 1 and "\nRole: operator" in whoami[0]
    assert sorted(channel.texts) == sorted([whoami[0], "re: hello"])
    assert executor.started_texts() == ["hello"]


@pytest.mark.slow
async def test_gateway_soak_over_ten_thousand_chats_leaves_no_lanes(rig) -> None:
    for i in range(10_000):
        await rig.ingest(f"m{i}", chat=f"c{i}")
    await rig.queue.join()
    assert rig.queue.load().lanes == 0
    assert rig.queue._lanes == {}
    assert len(rig.channel.sent) == 10_000
