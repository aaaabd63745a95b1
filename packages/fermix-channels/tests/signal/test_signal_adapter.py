"""The Signal adapter against the stub signal-cli: message flow, sends, health and restarts."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import anyio
import pytest
from fermix_channels.signal.adapter import (
    MEDIA_CAP,
    PENDING_FILE,
    SignalChannel,
    attachments_folder,
    child_env,
)
from fermix_core.channel import (
    Attachment,
    AttachmentKind,
    ChannelError,
    ChannelRateLimited,
    ChannelTransientError,
    DeliveryResult,
    OutboundMessage,
)
from fermix_core.testing import StubChannelHost

from .conftest import make_channel, signal_config, ss

pytestmark = pytest.mark.anyio


async def wait(stub: Any, predicate: Any, timeout: float = 30.0) -> Any:
    return await anyio.to_thread.run_sync(lambda: stub.wait(predicate, timeout))


async def wait_state(host: StubChannelHost, state: str, timeout: float = 30.0) -> None:
    await host.wait_for_state(state, timeout=timeout)


class _Home:
    def __init__(self, path: Path) -> None:
        self.path = path


# --------------------------------------------------------------------------- inbound


@pytest.mark.parametrize("style", ["plain", "subscription"])
async def test_both_notification_shapes_become_turns(style: str) -> None:
    with ss.StubSignalCli(style=style) as stub:
        channel = make_channel(stub)
        async with StubChannelHost("signal", config=channel.config) as host:
            await channel.start(host)
            assert host.state == "ready"
            stub.message("hello from the phone")
            await host.wait_for_deliveries(1, timeout=30)
            await channel.stop()
    (message,) = host.deliveries
    assert message.channel == "signal"
    assert message.text == "hello from the phone"
    assert message.chat_id == ss.OWNER and message.sender_id == ss.OWNER
    assert message.sender_name == "Owner"
    assert not message.is_group
    assert message.message_id.startswith(ss.OWNER + ":")
    (argv,) = [e["argv"] for e in stub.named("hello")]
    assert argv[-6:] == [
        "-a",
        ss.ACCOUNT,
        "jsonRpc",
        "--receive-mode",
        "manual",
        "--ignore-stories",
    ]
    assert stub.requests("subscribeReceive")


async def test_receipts_typing_sync_and_own_messages_are_not_turns(stub, running) -> None:
    async with running() as (_channel, host):
        stub.envelope(ss.receipt())
        stub.envelope(
            {
                "source": ss.OWNER,
                "sourceNumber": ss.OWNER,
                "timestamp": 5,
                "typingMessage": {"action": "STARTED", "timestamp": 5},
            }
        )
        stub.envelope(
            {
                "source": ss.ACCOUNT,
                "sourceNumber": ss.ACCOUNT,
                "timestamp": 6,
                "syncMessage": {"sentMessage": {"destination": ss.OWNER, "message": "x"}},
            }
        )
        stub.message("talking to myself", sender=ss.ACCOUNT, uuid=None)
        stub.message("a real one")
        await host.wait_for_deliveries(1, timeout=30)
    assert [m.text for m in host.deliveries] == ["a real one"]


async def test_a_group_is_a_chat_and_only_addressed_messages_count(stub, running) -> None:
    async with running() as (channel, host):
        stub.message("chatter between people", group=ss.GROUP_ID)
        mention = {"name": ss.ACCOUNT, "number": ss.ACCOUNT, "uuid": "x", "start": 4, "length": 1}
        stub.message("hey \ufffc what time is it", group=ss.GROUP_ID, mentions=[mention])
        stub.message("/help", group=ss.GROUP_ID)
        stub.message(
            "and you?",
            group=ss.GROUP_ID,
            quote={"id": 1, "author": ss.ACCOUNT, "authorNumber": ss.ACCOUNT, "text": "hi"},
        )
        await host.wait_for_deliveries(3, timeout=30)
        first = host.deliveries[0]
        await channel.send(
            OutboundMessage(chat_id=first.chat_id, text="it is noon", reply_to=first.message_id)
        )
        await wait(stub, lambda s: s.sends())
    texts = [m.text for m in host.deliveries]
    assert texts == [f"hey @{ss.ACCOUNT} what time is it", "/help", "and you?"]
    assert all(m.is_group and m.chat_id == f"group:{ss.GROUP_ID}" for m in host.deliveries)
    (params,) = stub.sends()
    assert params["groupId"] == ss.GROUP_ID and "recipient" not in params
    assert params["quoteAuthor"] == ss.OWNER
    assert params["quoteTimestamp"] == int(first.message_id.rsplit(":", 1)[1])


async def test_an_owner_known_by_uuid_is_identified_by_uuid(stub, running) -> None:
    async with running(owner_user_id=ss.OWNER_UUID, allowed_sender_ids=[]) as (_c, host):
        stub.message("by uuid")
        stub.message("hidden number", sender=None, uuid="5a5a5a5a-0000-4000-8000-000000000005")
        await host.wait_for_deliveries(2, timeout=30)
    assert host.deliveries[0].sender_id == ss.OWNER_UUID
    assert host.deliveries[0].chat_id == ss.OWNER_UUID
    assert host.deliveries[1].sender_id == "5a5a5a5a-0000-4000-8000-000000000005"


async def test_attachments_are_local_files_for_the_owner(stub, running, tmp_path) -> None:
    data_dir = tmp_path / "signal-data"
    (data_dir / "attachments").mkdir(parents=True)
    (data_dir / "attachments" / "AbCd123.jpg").write_bytes(b"\xff\xd8jpeg")
    items = [
        {"contentType": "image/jpeg", "filename": "cat.jpg", "id": "AbCd123.jpg", "size": 6},
        {"contentType": "audio/aac", "filename": None, "id": "missing.aac", "size": 10},
        {"contentType": "text/plain", "filename": "x", "id": "../../etc/passwd", "size": 1},
    ]
    async with running(config_dir=str(data_dir)) as (_c, host):
        stub.message("look", attachments=items)
        await host.wait_for_deliveries(1, timeout=30)
    (message,) = host.deliveries
    (attachment,) = message.attachments
    assert attachment.kind is AttachmentKind.IMAGE
    assert attachment.path == (data_dir / "attachments" / "AbCd123.jpg").resolve()
    assert attachment.mime_type == "image/jpeg" and attachment.filename == "cat.jpg"
    assert attachment.size == 6
    assert "signal-cli did not store audio" in message.text
    assert "invalid id" in message.text


async def test_a_strangers_attachments_are_never_looked_at(stub, running, tmp_path) -> None:
    data_dir = tmp_path / "signal-data"
    async with running(config_dir=str(data_dir)) as (channel, host):
        # The folder does not even exist: any look would turn into a "not stored" note.
        item = {"contentType": "image/png", "filename": "a.png", "id": "s1.png", "size": 9}
        stub.message("let me in", sender=ss.STRANGER, uuid=None, attachments=[item])
        stub.message("owner after")
        await host.wait_for_deliveries(2, timeout=30)
    # StubChannelHost accepts everyone; the adapter left the stranger's files alone.
    stranger = next(m for m in host.deliveries if m.sender_id == ss.STRANGER)
    assert stranger.attachments == [] and stranger.text == "let me in"
    assert not data_dir.exists()
    assert channel._trust.authorize(ss.STRANGER) is None


async def test_strangers_are_dropped_by_the_gateway_path(stub) -> None:
    channel = make_channel(stub)
    async with StubChannelHost(
        "signal", config=channel.config, drop_senders=(ss.STRANGER,)
    ) as host:
        await channel.start(host)
        stub.message("let me in", sender=ss.STRANGER, uuid=None)
        stub.message("owner here")
        await host.wait_for_deliveries(2, timeout=30)
        await channel.stop()
    assert [m.text for m in host.deliveries] == ["owner here"]
    assert DeliveryResult.DROPPED in host.results


# --------------------------------------------------------------------------- hostile input


async def test_garbage_malformed_and_giant_lines_are_skipped(stub, running, caplog) -> None:
    async with running() as (channel, host):
        stub.raw("this is not json\n")
        stub.raw('{"jsonrpc":"2.0","method":"receive","params":{"envelope":\n')
        stub.raw("[1, 2, 3]\n")
        stub.raw('"a string"\n')
        stub.raw("x" * (3 * 1024 * 1024) + "\n")  # over the 1 MiB line cap
        stub.raw('{"jsonrpc":"2.0","method":"receive","params":{"envelope":' + "7" * 10 + "}}\n")
        stub.message("still here")
        await host.wait_for_deliveries(1, timeout=30)
        rpc = channel._rpc
        assert rpc is not None and rpc.skipped >= 5
        assert host.state == "ready"
        assert channel.sessions == 1
    assert [m.text for m in host.deliveries] == ["still here"]
    assert "not JSON" in caplog.text and "longer than" in caplog.text


# --------------------------------------------------------------------------- outbound


async def test_send_reaction_typing_and_ids(stub, running) -> None:
    async with running() as (channel, _host):
        sent = await channel.send(OutboundMessage(chat_id=ss.OWNER, text="plain text"))
        author, ts = sent.message_id.rsplit(":", 1)
        assert author == ss.ACCOUNT and ts.isdigit()
        await channel.react(ss.OWNER, f"{ss.OWNER}:1234", "🎉")
        await channel.typing(ss.OWNER)
        with pytest.raises(ChannelError, match="one emoji"):
            await channel.react(ss.OWNER, f"{ss.OWNER}:1234", "two words")
    (send,) = stub.sends()
    assert send == {"recipient": [ss.OWNER], "message": "plain text"}
    (reaction,) = [r["params"] for r in stub.requests("sendReaction")]
    assert reaction == {
        "recipient": [ss.OWNER],
        "emoji": "🎉",
        "targetAuthor": ss.OWNER,
        "targetTimestamp": 1234,
    }
    assert [r["params"] for r in stub.requests("sendTyping")] == [{"recipient": [ss.OWNER]}]


async def test_attachments_go_as_paths_or_data_uris(stub, running, tmp_path) -> None:
    photo = tmp_path / "photo.png"
    photo.write_bytes(b"\x89PNG....")
    async with running() as (channel, _host):
        await channel.send(
            OutboundMessage(
                chat_id=ss.OWNER,
                text="two files",
                attachments=[
                    Attachment(kind=AttachmentKind.IMAGE, path=photo, filename="photo.png"),
                    Attachment(
                        kind=AttachmentKind.DOCUMENT,
                        data=b"print(1)\n",
                        filename="snippet-1.py",
                        mime_type="text/plain",
                    ),
                ],
            )
        )
    (params,) = stub.sends()
    assert params["attachments"][0] == str(photo.resolve())
    assert params["attachments"][1] == "data:text/plain;filename=snippet-1.py;base64,cHJpbnQoMSkK"


async def test_media_over_100_mb_is_refused_before_sending(stub, running, tmp_path) -> None:
    big = tmp_path / "big.mp4"
    with big.open("wb") as handle:
        handle.truncate(MEDIA_CAP + 1)  # sparse: no 100 MB written
    async with running() as (channel, _host):
        with pytest.raises(ChannelError, match="up to 100 MB"):
            await channel.send(
                OutboundMessage(
                    chat_id=ss.OWNER,
                    attachments=[Attachment(kind=AttachmentKind.VIDEO, path=big)],
                )
            )
    assert stub.sends() == []


async def test_the_reply_port_refuses_oversized_media_and_keeps_the_confirm_line(
    stub, running
) -> None:
    from fermix_core.channels.outbound import MediaTooLarge, OutboundPort
    from fermix_core.gateway.reply import features_of

    class Proposal:
        token = "K7QZ"

        def prompt(self, *, include_token: bool = True) -> str:
            return "Allow /tmp/x?" + ("\n/confirm K7QZ" if include_token else "")

    events: list[tuple[str, dict[str, Any]]] = []
    async with running() as (channel, _host):
        port = OutboundPort(
            channel, features_of(channel), emit=lambda name, **data: events.append((name, data))
        )
        too_big = Attachment(kind=AttachmentKind.DOCUMENT, data=b"x", size=MEDIA_CAP + 1)
        with pytest.raises(MediaTooLarge, match="signal accepts document files"):
            await port.send(OutboundMessage(chat_id=ss.OWNER, attachments=[too_big]))
        # A failed upload is a media send error too (signal-cli could not read the file).
        await anyio.to_thread.run_sync(
            stub.fail, "send", {"code": -1, "message": "Invalid attachment: no such file"}
        )
        small = Attachment(kind=AttachmentKind.IMAGE, data=b"png", filename="a.png")
        with pytest.raises(ChannelError, match="Invalid attachment"):
            await port.send(OutboundMessage(chat_id=ss.OWNER, attachments=[small]))
        # No Approve button on Signal: the typed line stays, in a group chat too.
        await port.approval(f"group:{ss.GROUP_ID}", None, Proposal())
    params = stub.sends()[-1]
    assert params["groupId"] == ss.GROUP_ID
    assert params["message"].endswith("/confirm K7QZ")
    errors = [data for name, data in events if name == "channel.media_send_error"]
    assert [e["kind"] for e in errors] == ["document", "image"]
    assert "104.9 MB" in errors[0]["error"]  # the cap is 100 MiB
    replies = [data for name, data in events if name == "channel.reply"]
    assert replies and all("duration_ms" in r for r in replies)
    outbound = [d for n, d in events if n == "channel.message" and d["direction"] == "outbound"]
    assert len(outbound) == len(replies)


@pytest.mark.parametrize(
    ("error", "expected", "words"),
    [
        (
            {"code": -5, "message": "Failed to send message due to rate limiting"},
            ChannelRateLimited,
            "rate",
        ),
        ({"code": -3, "message": "Connection reset"}, ChannelTransientError, "Connection reset"),
        (
            {
                "code": -1,
                "message": "Failed to send message",
                "data": {
                    "response": {
                        "timestamp": 1,
                        "results": [
                            {
                                "recipientAddress": {"number": ss.STRANGER},
                                "type": "UNREGISTERED_FAILURE",
                            }
                        ],
                    }
                },
            },
            ChannelError,
            "not registered on Signal",
        ),
        ({"code": -32602, "message": "Invalid group id"}, ChannelError, "Invalid group id"),
    ],
)
async def test_signal_cli_errors_are_typed(stub, running, error, expected, words) -> None:
    async with running() as (channel, _host):
        await anyio.to_thread.run_sync(stub.fail, "send", error)
        with pytest.raises(expected, match=words) as info:
            await channel.send(OutboundMessage(chat_id=ss.STRANGER, text="hi"))
    if expected is ChannelError:
        assert not isinstance(info.value, ChannelTransientError | ChannelRateLimited)


# --------------------------------------------------------------------------- failures


async def test_a_crash_mid_stream_restarts_and_receives_again(stub, running) -> None:
    async with running() as (channel, host):
        stub.message("before the crash")
        await host.wait_for_deliveries(1, timeout=30)
        stub.exit(7, "Exception in thread main: boom\n")
        await wait(stub, lambda s: s.starts() >= 2 and len(s.requests("subscribeReceive")) >= 2)
        await wait_state(host, "ready")
        degraded = [error for state, error in host.reports if state == "degraded"]
        assert degraded and "exited with code 7" in degraded[0] and "boom" in degraded[0]
        stub.message("after the restart")
        await host.wait_for_deliveries(2, timeout=30)
        sent = await channel.send(OutboundMessage(chat_id=ss.OWNER, text="back"))
        assert sent.message_id
    assert [m.text for m in host.deliveries] == ["before the crash", "after the restart"]
    assert channel.sessions == 2


async def test_an_unregistered_account_is_degraded_with_what_to_do() -> None:
    with ss.StubSignalCli(startup="unregistered") as stub:
        channel = make_channel(stub)
        async with StubChannelHost("signal", config=channel.config) as host:
            await channel.start(host)  # returns: the daemon is never taken down
            assert host.state == "degraded"
            error = host.reports[-1][1]
            await channel.stop()
    assert f"{ss.ACCOUNT} is not registered" in error
    assert f"signal-cli -a {ss.ACCOUNT} register" in error and "link" in error
    with pytest.raises(ChannelTransientError, match="not running"):
        await channel.send(OutboundMessage(chat_id=ss.OWNER, text="hi"))


async def test_a_missing_executable_is_degraded_and_recovers_once_installed(tmp_path) -> None:
    with ss.StubSignalCli() as stub:
        missing = tmp_path / "bin" / "signal-cli"
        channel = make_channel(stub, cli_path=str(missing))
        async with StubChannelHost("signal", config=channel.config) as host:
            await channel.start(host)
            assert host.state == "degraded"
            assert "not found at" in host.reports[-1][1]
            assert "SIGNAL_CLI_PATH" in host.reports[-1][1]
            missing.parent.mkdir()
            missing.symlink_to(stub.path)  # "installed": the next try finds it
            await wait_state(host, "ready", timeout=60)
            await channel.stop()


async def test_not_on_path_says_how_to_install(stub, tmp_path) -> None:
    channel = make_channel(
        stub, cli_path=None, environ={"PATH": str(tmp_path), "HOME": str(tmp_path)}
    )
    async with StubChannelHost("signal", config=channel.config) as host:
        await channel.start(host)
        await channel.stop()
    assert host.reports[1][0] == "degraded"
    assert "not installed (not found on PATH)" in host.reports[1][1]


async def test_a_hanging_signal_cli_is_killed_and_restarted(stub, running) -> None:
    async with running(request_timeout=1, probe_every=0.2) as (_channel, host):
        first_pid = stub.named("hello")[0]["pid"]
        stub.hang()
        await wait(stub, lambda s: s.starts() >= 2, timeout=60)
        await wait_state(host, "ready", timeout=60)
        assert any(
            state == "degraded" and "stopped answering" in (error or "")
            for state, error in host.reports
        )
        stub.message("after the hang")
        await host.wait_for_deliveries(1, timeout=30)
    # The hung process group is gone.
    with pytest.raises(ProcessLookupError):
        os.kill(first_pid, 0)


async def test_an_unset_account_is_refused(stub) -> None:
    channel = make_channel(stub, account=None)
    async with StubChannelHost("signal", config=channel.config) as host:
        await channel.start(host)
        await channel.stop()
    assert host.state == "refused"
    assert "SIGNAL_ACCOUNT" in host.reports[-1][1]
    assert stub.starts() == 0


async def test_signal_cli_gets_a_minimal_environment(stub) -> None:
    environ = ss.minimal_environ(
        OPENAI_API_KEY="sk-test-not-for-signal",
        ANTHROPIC_API_KEY="sk-ant-test",
        TELEGRAM_BOT_TOKEN="1:abc",
        JAVA_HOME="/opt/java",
    )
    channel = make_channel(stub, environ=environ)
    async with StubChannelHost("signal", config=channel.config) as host:
        await channel.start(host)
        await channel.stop()
    (hello,) = stub.named("hello")
    names = set(hello["env"])
    assert "JAVA_HOME" in names and "PATH" in names
    assert not names & {"OPENAI_API_KEY", "ANTHROPIC_API_KEY", "TELEGRAM_BOT_TOKEN"}
    assert set(child_env(environ)) <= {"PATH", "HOME", "LANG", "JAVA_HOME"}


async def test_stop_ends_signal_cli_and_its_group(stub, running) -> None:
    async with running() as (_channel, _host):
        pid = stub.named("hello")[0]["pid"]
    await wait(stub, lambda s: s.named("closed"))
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


# --------------------------------------------------------------------------- restarts


async def test_a_message_read_before_a_stop_is_delivered_on_the_next_start(stub, tmp_path) -> None:
    home = _Home(tmp_path)
    channel = make_channel(stub)
    tried = anyio.Event()
    down = True

    def gateway(message: Any) -> None:
        if down:  # the gateway cannot take it: it stays pending
            tried.set()
            raise RuntimeError("the gateway is restarting")

    pending_file = tmp_path / PENDING_FILE
    async with StubChannelHost(
        "signal", config=channel.config, home=home, on_deliver=gateway
    ) as host:
        await channel.start(host)
        stub.message("sent while the gateway was down")
        with anyio.fail_after(30):
            await tried.wait()
        await channel.stop()
        saved = json.loads(pending_file.read_text())
        assert saved["account"] == ss.ACCOUNT
        assert [e["dataMessage"]["message"] for e in saved["pending"]] == [
            "sent while the gateway was down"
        ]
        down = False
        await channel.start(host)  # the same instance, as the runtime restarts it
        await host.wait_for_deliveries(1, timeout=30)
        # signal-cli printing it again (a redelivery) is a duplicate, not a second turn.
        stub.envelope(saved["pending"][0])
        stub.message("next")
        await host.wait_for_deliveries(3, timeout=30)
        await channel.stop()
    assert [m.text for m in host.deliveries] == ["sent while the gateway was down", "next"]
    assert DeliveryResult.DUPLICATE in host.results
    assert json.loads(pending_file.read_text())["pending"] == []


def test_attachments_folder_follows_signal_cli_defaults(tmp_path) -> None:
    config = signal_config(ss.StubSignalCli())
    assert attachments_folder(config, {"HOME": "/home/u"}) == Path(
        "/home/u/.local/share/signal-cli/attachments"
    )
    assert attachments_folder(config, {"XDG_DATA_HOME": "/x"}) == Path("/x/signal-cli/attachments")
    custom = config.model_copy(update={"config_dir": str(tmp_path)})
    assert attachments_folder(custom, {}) == tmp_path / "attachments"
    assert SignalChannel.max_text == 2000 and SignalChannel.dialect == "signal"
