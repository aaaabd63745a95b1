"""The gateway session against the loopback gateway: identify, resume after a drop, op 7,
invalid sessions, zombie links, fatal closes, hostile frames, restart-resume."""

from __future__ import annotations

import json

import anyio
import pytest
from fermix_channels.discord.adapter import SESSION_FILE
from fermix_channels.discord.gateway import INTENTS
from fermix_core.channel import DeliveryResult
from fermix_core.home import FermixHome

from .conftest import fd, make_channel

pytestmark = pytest.mark.anyio


def _error(host) -> str:
    return host.reports[-1][1] or ""


async def _texts(host, count: int) -> list[str]:
    await host.wait_for_deliveries(count, timeout=15)
    return [m.text for m in host.deliveries]


async def test_identify_then_a_dm_is_delivered(running, fake) -> None:
    async with running() as (channel, host):
        assert host.state == "ready"  # start() returned after READY
        (identify,) = fake.identify_payloads
        assert identify["intents"] == INTENTS and identify["token"] == fd.TOKEN
        assert channel.bot_id == fd.BOT_ID
        sent = await fake.message("hi there")
        assert await _texts(host, 1) == ["hi there"]
    message = host.deliveries[0]
    assert message.chat_id == fd.DM_CHANNEL and message.thread_id is None
    assert message.sender_id == fd.OWNER_ID and message.sender_name == "Ada Lovelace"
    assert message.message_id == f"{fd.DM_CHANNEL}:{sent['id']}"
    assert not message.is_group


async def test_a_dropped_socket_resumes_and_loses_nothing(running, fake) -> None:
    async with running() as (_channel, host):
        await fake.message("before")
        await host.wait_for_deliveries(1, timeout=15)
        await fake.drop()
        # Sent while the socket is down: Discord keeps it for the session's resume.
        await fake.message("while down")
        await fake.until(lambda: len(fake.resumes) == 1 and fake.connected)
        await fake.message("after")
        assert await _texts(host, 3) == ["before", "while down", "after"]
        assert fake.identifies == 1  # resumed, not re-identified
        (resume,) = fake.resumes
        assert resume["session_id"] == fake.current.session_id
        assert fake.connects[-1] == "/resume?v=10&encoding=json"  # resume_gateway_url
        await fake.until(lambda: host.state == "ready")
    assert host.results.count(DeliveryResult.DUPLICATE) == 0


async def test_a_drop_during_a_slow_hand_off_loses_and_repeats_nothing(running, fake) -> None:
    entered, gate = anyio.Event(), anyio.Event()

    async def slow(message):
        if message.text == "slow":
            entered.set()
            await gate.wait()

    async with running() as (_channel, host):
        host.on_deliver = slow
        await fake.message("slow")
        with anyio.fail_after(15):
            await entered.wait()
        await fake.message("queued behind it")  # received while the first is handed off
        await fake.drop()
        gate.set()
        await fake.until(lambda: len(fake.resumes) == 1 and fake.connected)
        await fake.message("next")
        assert await _texts(host, 3) == ["slow", "queued behind it", "next"]
        # READY 1, GUILD_CREATE 2, then the two messages: resumed after both were handled.
        assert fake.resumes[0]["seq"] == 4
    assert host.results.count(DeliveryResult.DUPLICATE) == 0


async def test_op7_reconnect_resumes(running, fake) -> None:
    async with running() as (_channel, host):
        await fake.request_reconnect()
        await fake.until(lambda: len(fake.resumes) == 1 and fake.connected)
        await fake.message("after op 7")
        assert await _texts(host, 1) == ["after op 7"]
        assert fake.identifies == 1
        assert 4000 in fake.closes  # closed with a resumable code, not 1000


async def test_a_resumable_invalid_session_resumes(running, fake) -> None:
    async with running() as (_channel, _host):
        await fake.invalidate(resumable=True)
        await fake.until(lambda: len(fake.resumes) == 1 and fake.connected)
        assert fake.identifies == 1


async def test_a_dead_session_identifies_afresh(running, fake) -> None:
    async with running() as (_channel, host):
        await fake.invalidate(resumable=False)
        # The resume attempt is answered op 9 false, then a fresh IDENTIFY.
        await fake.until(lambda: fake.identifies == 2 and fake.connected, timeout=30)
        await fake.message("new session")
        assert await _texts(host, 1) == ["new session"]


async def test_a_missed_heartbeat_ack_is_a_zombie_and_resumes(fake) -> None:
    from fermix_core.testing import StubChannelHost

    fake.heartbeat_interval = 0.2
    channel = make_channel(fake)
    async with StubChannelHost("discord", config=channel.config) as host:
        await channel.start(host)
        try:
            await fake.until(lambda: len(fake.heartbeats) >= 1)
            fake.stop_acks()
            await fake.until(lambda: channel.gateway.zombies == 1)
            fake.acks = True
            await fake.until(lambda: len(fake.resumes) >= 1 and fake.connected)
            await fake.message("after the zombie")
            assert await _texts(host, 1) == ["after the zombie"]
        finally:
            await channel.stop()


async def test_a_refused_token_is_reported_and_not_hot_looped(fake) -> None:
    from fermix_core.testing import StubChannelHost

    fake.reject_identify = True  # the gateway closes IDENTIFY with 4004
    channel = make_channel(fake)
    async with StubChannelHost("discord", config=channel.config) as host:
        await channel.start(host)
        try:
            assert host.state == "degraded"
            assert "4004" in _error(host) and "Reset Token" in _error(host)
            assert fake.identifies == 1  # fatal: waits fatal_retry before trying again
        finally:
            await channel.stop()


async def test_a_token_rest_refuses_is_reported(fake) -> None:
    from fermix_core.testing import StubChannelHost

    fake.token = "a-different-token"  # GET /gateway/bot answers 401
    channel = make_channel(fake)
    async with StubChannelHost("discord", config=channel.config) as host:
        await channel.start(host)
        try:
            assert host.state == "degraded"
            assert "Reset Token" in _error(host) and fd.TOKEN not in _error(host)
            assert fake.identifies == 0 and fake.requests == [("GET", "/gateway/bot")]
        finally:
            await channel.stop()


async def test_message_content_intent_missing_says_how_to_enable_it(fake) -> None:
    from fermix_core.testing import StubChannelHost

    fake.message_content_enabled = False
    channel = make_channel(fake)
    async with StubChannelHost("discord", config=channel.config) as host:
        await channel.start(host)
        try:
            assert host.state == "degraded"
            assert "4014" in _error(host) and "Message Content Intent" in _error(host)
            assert fake.identifies == 1  # fatal: not retried at once
        finally:
            await channel.stop()


async def test_ready_without_the_content_flag_is_degraded_with_the_fix(running, fake) -> None:
    from fermix_channels.discord.gateway import GatewayClient

    # An app whose READY shows no Message Content flag (a client that did not ask for the
    # intent would connect, and see empty messages in servers).
    original = fake._identify

    async def identify(connection, data):
        fake.message_content_enabled = False
        data = {**data, "intents": data["intents"] & ~(1 << 15)}
        return await original(connection, data)

    fake._identify = identify
    async with running() as (channel, host):
        assert isinstance(channel.gateway, GatewayClient)
        assert host.state == "degraded" and "Developer Portal" in _error(host)


async def test_hostile_frames_never_crash_the_adapter(running, fake) -> None:
    async with running() as (_channel, host):
        await fake.send_raw("{not json")
        await fake.send_raw(b"\x00\xff binary")
        await fake.send_raw(json.dumps([1, 2, 3]))
        await fake.send_raw(json.dumps({"op": 99, "d": {"what": "future op"}}))
        await fake.send_raw(json.dumps({"op": 0, "t": "SOME_NEW_EVENT", "s": 900, "d": 5}))
        await fake.send_raw(json.dumps({"op": 0, "t": "MESSAGE_CREATE", "s": "x", "d": None}))
        await fake.dispatch("MESSAGE_CREATE", {"id": "1", "author": "nobody"})
        await fake.dispatch("MESSAGE_CREATE", {"id": [], "channel_id": {}, "author": {"id": 5}})
        await fake.dispatch("INTERACTION_CREATE", {"type": 3, "data": "x"})
        await fake.dispatch("THREAD_CREATE", {"type": 11, "id": None})
        await fake.dispatch("GUILD_CREATE", {"threads": "many"})
        await fake.message("still alive")
        assert await _texts(host, 1) == ["still alive"]
        assert fake.identifies == 1 and not fake.resumes


async def test_duplicate_delivery_is_not_run_twice(running, fake) -> None:
    async with running() as (_channel, host):
        payload = fake.message_payload("only once")
        await fake.dispatch("MESSAGE_CREATE", payload)
        await fake.dispatch("MESSAGE_CREATE", payload)  # Discord redelivering the same id
        await fake.message("next")
        await host.wait_for_deliveries(3, timeout=15)  # three hand-offs, one a duplicate
    assert [m.text for m in host.deliveries] == ["only once", "next"]
    assert host.results.count(DeliveryResult.DUPLICATE) == 1


async def test_a_failed_hand_off_is_retried_not_skipped(running, fake) -> None:
    attempts: list[str] = []

    async def flaky(message):
        attempts.append(message.text)
        if len(attempts) == 1:
            raise RuntimeError("the gateway is restarting")

    async with running() as (_channel, host):
        host.on_deliver = flaky
        await fake.message("kept")
        await fake.message("then this")
        assert await _texts(host, 2) == ["kept", "then this"]
    assert attempts == ["kept", "kept", "then this"]


async def test_a_restart_resumes_the_saved_session(fake, tmp_path) -> None:
    from fermix_core.testing import StubChannelHost

    home = FermixHome(tmp_path / "home")
    home.ensure()
    first = make_channel(fake)
    async with StubChannelHost("discord", config=first.config, home=home) as host:
        await first.start(host)
        await fake.message("one")
        await host.wait_for_deliveries(1, timeout=15)
        await first.stop()
        saved = json.loads((home.path / SESSION_FILE).read_text())
        assert saved["session_id"] == fake.current.session_id
        assert fd.TOKEN not in (home.path / SESSION_FILE).read_text()
        await fake.until(lambda: not fake.connected)
        await fake.message("while the daemon was down")
        second = make_channel(fake)
        await second.start(host)
        try:
            await host.wait_for_deliveries(2, timeout=15)
            assert [m.text for m in host.deliveries] == ["one", "while the daemon was down"]
            assert fake.identifies == 1 and len(fake.resumes) == 1
        finally:
            await second.stop()


async def test_enabling_the_intent_recovers_without_a_restart(fake) -> None:
    from fermix_core.testing import StubChannelHost

    fake.message_content_enabled = False
    channel = make_channel(fake, fatal_retry=0.2)
    async with StubChannelHost("discord", config=channel.config) as host:
        await channel.start(host)
        try:
            assert host.state == "degraded"
            fake.message_content_enabled = True  # the owner flips it in the Portal
            await fake.until(lambda: fake.connected and host.state == "ready")
            await fake.message("now I can read you")
            assert await _texts(host, 1) == ["now I can read you"]
        finally:
            await channel.stop()


async def test_a_heartbeat_request_is_answered_at_once(running, fake) -> None:
    async with running() as (_, host):
        await fake.until(lambda: len(fake.heartbeats) == 1)  # the first, after jitter 0
        await fake.send_raw(json.dumps({"op": 1, "d": None}))
        await fake.until(lambda: len(fake.heartbeats) == 2)
        assert fake.heartbeats[-1] == fake.current.seq  # the last sequence received
        assert host.state == "ready"


@pytest.mark.parametrize(("code", "fresh"), [(4000, False), (1001, False), (4009, True)])
async def test_close_codes_resume_or_identify_afresh(running, fake, code, fresh) -> None:
    async with running() as (_, host):
        await fake.close_with(code)
        if fresh:  # session timed out: a new IDENTIFY
            await fake.until(lambda: fake.identifies == 2 and fake.connected)
            assert not fake.resumes
        else:
            await fake.until(lambda: len(fake.resumes) == 1 and fake.connected)
            assert fake.identifies == 1
        await fake.message("after the close")
        assert await _texts(host, 1) == ["after the close"]


async def test_a_redelivered_attachment_is_not_downloaded_again(running, fake) -> None:
    picture = fake.add_file("cat.png", b"\x89PNG cat", "image/png")
    async with running() as (_, host):
        payload = fake.message_payload("look", attachments=[picture])
        await fake.dispatch("MESSAGE_CREATE", payload)
        await fake.dispatch("MESSAGE_CREATE", payload)
        await host.wait_for_deliveries(2, timeout=15)
    assert fake.downloads == ["cat.png"]
    assert host.results.count(DeliveryResult.DUPLICATE) == 1
