"""The Web API client against the loopback Slack: Slack's JSON shapes and its failures,
mapped onto the channel's typed errors. The first tests drive the fake with slack_sdk's
own AsyncWebClient directly, so the stand-in cannot drift from what the SDK speaks."""

from __future__ import annotations

import sys

import anyio
import pytest
from fermix_channels.slack.client import SlackApi, SlackRefused
from fermix_core.channel import ChannelError, ChannelRateLimited, ChannelTransientError
from fermix_core.testing.loopback import Reply
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

pytestmark = pytest.mark.anyio

#: The loopback Slack helpers, loaded by conftest.py.
fs = sys.modules["fermix_channels_tests_fake_slack"]


async def test_the_real_sdk_posts_updates_reacts_and_uploads_against_the_fake(fake) -> None:
    client = AsyncWebClient(token=fs.BOT_TOKEN, base_url=fake.api_url)
    identity = await client.auth_test()
    assert identity["user_id"] == fs.BOT_USER_ID
    posted = await client.chat_postMessage(channel="C0CHAN001", text="*hi*", thread_ts="1.2")
    assert posted["ok"] is True and posted["channel"] == "C0CHAN001" and posted["ts"]
    await client.chat_update(channel="C0CHAN001", ts=posted["ts"], text="*hi* again")
    await client.reactions_add(channel="C0CHAN001", timestamp=posted["ts"], name="eyes")
    record = fake.find("C0CHAN001", posted["ts"])
    assert (
        record.text == "*hi* again" and record.thread_ts == "1.2" and record.reactions == ["eyes"]
    )
    upload = await client.files_upload_v2(
        channel="C0CHAN001", file=b"report body", filename="report.txt", title="Report"
    )
    file = fake.files[upload["file"]["id"]]
    assert file.data == b"report body" and file.channel == "C0CHAN001" and file.title == "Report"
    with pytest.raises(SlackApiError) as caught:
        await client.chat_delete(channel="C0CHAN001", ts="9.9")
    assert caught.value.response["error"] == "message_not_found"
    bad = AsyncWebClient(token="xoxb-wrong", base_url=fake.api_url)
    with pytest.raises(SlackApiError) as caught:
        await bad.auth_test()
    assert caught.value.response["error"] == "invalid_auth"


async def test_socket_mode_urls_need_the_app_token(fake) -> None:
    api = SlackApi(fs.BOT_TOKEN, fake.api_url)
    try:
        url = await api.connections_open(fs.APP_TOKEN)
        assert url.startswith("ws://127.0.0.1:")
        with pytest.raises(SlackRefused) as caught:
            await api.connections_open("xapp-wrong")
        assert caught.value.code == "invalid_auth"
    finally:
        await api.aclose()


@pytest.fixture
async def api(fake):
    client = SlackApi(fs.BOT_TOKEN, fake.api_url)
    yield client
    await client.aclose()


async def test_429_is_rate_limited_with_slacks_retry_after(fake, api) -> None:
    fake.fail(
        "chat.postMessage",
        Reply(status=429, headers={"Retry-After": "7"}, body={"ok": False, "error": "ratelimited"}),
    )
    with pytest.raises(ChannelRateLimited) as caught:
        await api.post_message("C1", "hi", thread_ts=None, mrkdwn=True)
    assert caught.value.retry_after == 7.0


async def test_ratelimited_code_without_429_is_still_rate_limited(fake, api) -> None:
    fake.fail("reactions.add", Reply(body={"ok": False, "error": "ratelimited"}))
    with pytest.raises(ChannelRateLimited) as caught:
        await api.react("C1", "1.2", "eyes")
    assert caught.value.retry_after is None


@pytest.mark.parametrize(
    "reply",
    [
        Reply(status=500, body={"ok": False, "error": "internal_error"}),
        Reply(status=503, body="<html>upstream down</html>", headers={"content-type": "text/html"}),
        Reply(status=502, body=""),
        Reply(body={"ok": False, "error": "service_unavailable"}),
        Reply(status=200, body="not json at all", headers={"content-type": "application/json"}),
    ],
)
async def test_server_failures_are_transient(fake, api, reply) -> None:
    fake.fail("chat.postMessage", reply)
    with pytest.raises(ChannelTransientError):
        await api.post_message("C1", "hi", thread_ts=None, mrkdwn=True)


async def test_a_refusal_is_permanent_and_names_slacks_code_and_the_fix(fake, api) -> None:
    fake.missing_channels.add("C0GONE001")
    with pytest.raises(SlackRefused) as caught:
        await api.post_message("C0GONE001", "hi", thread_ts=None, mrkdwn=True)
    error = caught.value
    assert not isinstance(error, ChannelTransientError | ChannelRateLimited)
    assert error.code == "channel_not_found"
    assert "channel_not_found" in str(error) and "/invite" in str(error)


async def test_a_wrong_token_is_refused_without_echoing_it(fake) -> None:
    api = SlackApi("xoxb-definitely-wrong-token", fake.api_url)
    try:
        with pytest.raises(ChannelError) as caught:
            await api.auth_test()
    finally:
        await api.aclose()
    assert "invalid_auth" in str(caught.value)
    assert "xoxb-definitely-wrong-token" not in str(caught.value)


async def test_a_network_failure_is_transient() -> None:
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
    port = listener.extra(anyio.abc.SocketAttribute.local_port)  # noqa: S610
    await listener.aclose()  # nothing listens there now
    api = SlackApi(fs.BOT_TOKEN, f"http://127.0.0.1:{port}/api/")
    try:
        with pytest.raises(ChannelTransientError):
            await api.post_message("C1", "hi", thread_ts=None, mrkdwn=True)
    finally:
        await api.aclose()


async def test_a_failed_upload_post_is_transient(fake, api) -> None:
    async def refuse_upload(request):
        return Reply(status=500, body="upload failed", headers={"content-type": "text/plain"})

    original = fake.http.handler

    async def handler(request):
        if request.path.startswith("/upload/"):
            return await refuse_upload(request)
        return await original(request)

    fake.http.handler = handler
    with pytest.raises(ChannelTransientError):
        await api.upload(
            "C1", b"data", filename="a.txt", title=None, initial_comment=None, thread_ts=None
        )
    assert not fake.calls_of("files.completeUploadExternal")


async def test_the_session_is_reused_across_calls(fake, api) -> None:
    for n in range(3):
        await api.post_message("C1", f"m{n}", thread_ts=None, mrkdwn=True)
    assert fake.http.connections == 1
