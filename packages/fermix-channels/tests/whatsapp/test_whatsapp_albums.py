"""WhatsApp albums: the Cloud API sends each picture of a multi-image message as its own
signed webhook; the adapter holds them for ``album_debounce_ms`` and delivers one message.

No test waits on a clock: the debounce is either long (the album is closed by the next
message of the chat, or by stop) or short with the assertion made only after the webhook's
own answer, which is sent once the merged message was handed off.
"""

from __future__ import annotations

import sys
from typing import Any

import anyio
import pytest
from fermix_channels.whatsapp.adapter import WhatsAppChannel
from fermix_core.channel import DeliveryResult, WebhookRequest, WebhookResponse
from fermix_core.testing import StubChannelHost

pytestmark = pytest.mark.anyio

fg = sys.modules["fermix_channels_tests_fake_graph"]
whatsapp_config = fg.whatsapp_config

LONG = 600_000  # ms: only the next message of the chat (or stop) ends the album


def post(body: bytes) -> WebhookRequest:
    return WebhookRequest("POST", "/webhook/whatsapp", {}, fg.signed_headers(body), body)


def image_delivery(graph: Any, n: int, sender: str = fg.OWNER, caption: str | None = None) -> bytes:
    media_id = f"ALBUM{n}"
    graph.add_media(media_id, b"\xff\xd8\xff" + f"picture-{n}".encode(), "image/jpeg")
    item = {"caption": caption} if caption else {}
    message = fg.media_message(sender, "image", media_id, f"wamid.A{n}", **item)
    return fg.delivery(fg.value([message]))


async def start(graph: Any, host: StubChannelHost, debounce: int) -> WhatsAppChannel:
    channel = WhatsAppChannel(whatsapp_config(graph, album_debounce_ms=debounce))
    await channel.start(host)
    return channel


async def until_held(channel: WhatsAppChannel, chat: str, count: int) -> None:
    with anyio.fail_after(30):
        while channel.held(chat) < count:
            await channel.held_changed.wait()


async def test_per_image_webhooks_become_one_turn_with_every_image_and_caption(graph) -> None:
    answers: dict[str, WebhookResponse] = {}

    async def send(name: str, body: bytes) -> None:
        answers[name] = await channel.handle_webhook(post(body))

    async with StubChannelHost("whatsapp") as host:
        channel = await start(graph, host, LONG)
        async with anyio.create_task_group() as tg:
            for n, caption in ((1, "the garden"), (2, None), (3, "and the shed")):
                tg.start_soon(send, f"image{n}", image_delivery(graph, n, caption=caption))
                await until_held(channel, fg.OWNER, n)
            assert host.deliveries == []  # held, and every webhook still waiting for its answer
            text = fg.delivery(fg.value([fg.text_message(fg.OWNER, "which is older?", "wamid.T")]))
            tg.start_soon(send, "text", text)
        await channel.stop()
    assert {name: a.status for name, a in answers.items()} == dict.fromkeys(answers, 200)
    album, question = host.deliveries
    assert [a.data for a in album.attachments] == [
        b"\xff\xd8\xffpicture-1",
        b"\xff\xd8\xffpicture-2",
        b"\xff\xd8\xffpicture-3",
    ]
    assert album.text == "the garden\nand the shed"
    assert album.message_id == "wamid.A1"
    assert question.text == "which is older?"  # after the album: turns keep their order


async def test_a_redelivered_part_is_a_duplicate_not_a_new_turn(graph) -> None:
    async with StubChannelHost("whatsapp") as host:
        channel = await start(graph, host, LONG)
        async with anyio.create_task_group() as tg:
            for n in (1, 2):
                tg.start_soon(channel.handle_webhook, post(image_delivery(graph, n)))
                await until_held(channel, fg.OWNER, n)
            closing = fg.delivery(fg.value([fg.text_message(fg.OWNER, "ok", "wamid.K")]))
            tg.start_soon(channel.handle_webhook, post(closing))
        downloads = list(graph.downloads)
        again = await channel.handle_webhook(post(image_delivery(graph, 2)))
        await channel.stop()
    assert again.status == 200
    album, ok = host.deliveries
    assert len(album.attachments) == 2 and ok.text == "ok"
    assert await host.seen("wamid.A2")  # remembered with the merged delivery
    assert graph.downloads == downloads  # the redelivery fetched nothing


async def test_a_single_image_is_delivered_when_the_debounce_ends(graph) -> None:
    async with StubChannelHost("whatsapp") as host:
        channel = await start(graph, host, 20)
        answer = await channel.handle_webhook(post(image_delivery(graph, 7, caption="one")))
        await channel.stop()
    assert answer.status == 200
    (message,) = host.deliveries
    assert message.text == "one" and len(message.attachments) == 1
    assert host.results == [DeliveryResult.ACCEPTED]


async def test_stop_during_the_debounce_answers_503_and_meta_redelivers(graph) -> None:
    answers: list[int] = []

    async def send(body: bytes) -> None:
        answers.append((await channel.handle_webhook(post(body))).status)

    async with StubChannelHost("whatsapp") as host:
        channel = await start(graph, host, LONG)
        bodies = [image_delivery(graph, n) for n in (1, 2)]
        async with anyio.create_task_group() as tg:
            for n, body in enumerate(bodies, start=1):
                tg.start_soon(send, body)
                await until_held(channel, fg.OWNER, n)
            await channel.stop()
        assert answers == [503, 503]
        assert host.deliveries == [] and not await host.seen("wamid.A1")

        # Meta retries both parts against the next start; the album is merged then.
        channel = await start(graph, host, LONG)
        async with anyio.create_task_group() as tg:
            for n, body in enumerate(bodies, start=1):
                tg.start_soon(send, body)
                await until_held(channel, fg.OWNER, n)
            closing = fg.delivery(fg.value([fg.text_message(fg.OWNER, "done", "wamid.D")]))
            tg.start_soon(send, closing)
        await channel.stop()
    assert answers[2:] == [200, 200, 200]
    album, done = host.deliveries
    assert len(album.attachments) == 2 and done.text == "done"


async def test_albums_are_per_chat_and_strangers_are_never_downloaded(graph) -> None:
    async with StubChannelHost("whatsapp") as host:
        channel = await start(graph, host, LONG)
        graph.add_media("STRANGE", b"\xff\xd8\xffx", "image/jpeg")
        stranger = fg.delivery(
            fg.value([fg.media_message(fg.STRANGER, "image", "STRANGE", "wamid.S")])
        )
        assert (await channel.handle_webhook(post(stranger))).status == 200
        assert channel.held(fg.STRANGER) == 0
        async with anyio.create_task_group() as tg:
            tg.start_soon(channel.handle_webhook, post(image_delivery(graph, 1)))
            await until_held(channel, fg.OWNER, 1)
            guest = image_delivery(graph, 2, sender=fg.GUEST)
            tg.start_soon(channel.handle_webhook, post(guest))
            await until_held(channel, fg.GUEST, 1)
            assert channel.held(fg.OWNER) == 1  # the guest's picture is not in the owner's album
            await channel.stop()
    assert "STRANGE" not in graph.lookups and "STRANGE" not in graph.downloads


async def test_an_oversized_image_is_withheld_for_the_gateway_to_refuse(graph) -> None:
    graph.add_media("BIG", b"\xff\xd8\xffbig", "image/jpeg", declared=30 * 1024 * 1024)
    body = fg.delivery(fg.value([fg.media_message(fg.OWNER, "image", "BIG", "wamid.BIG")]))
    async with StubChannelHost("whatsapp") as host:
        channel = await start(graph, host, 20)
        assert (await channel.handle_webhook(post(body))).status == 200
        await channel.stop()
    (message,) = host.deliveries
    (attachment,) = message.attachments
    assert attachment.withheld and attachment.size == 30 * 1024 * 1024
    assert "BIG" not in graph.downloads
