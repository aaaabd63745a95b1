"""Telegram albums: parts sharing a media_group_id become one turn, durably."""

from __future__ import annotations

import json

import pytest
from fermix_channels.telegram.adapter import OFFSET_FILE, TelegramChannel
from fermix_core.home import FermixHome
from fermix_core.testing import StubChannelHost

from .conftest import ft, telegram_config

pytestmark = pytest.mark.anyio


def _album(fake, group: str, count: int, caption: str | None = "the album") -> list[dict]:
    updates = []
    for n in range(count):
        file_id = fake.add_file(f"image-{group}-{n}".encode(), path=f"photos/{group}_{n}.jpg")
        extra = {"caption": caption} if caption and n == 0 else {}
        updates.append(
            fake.message(
                None,
                media_group_id=group,
                photo=[{"file_id": file_id, "width": 8, "height": 8, "file_size": 9}],
                **extra,
            )
        )
    return updates


async def test_album_parts_become_one_message(fake, running) -> None:
    async with running(album_debounce_ms=150) as (_, host):
        updates = _album(fake, "g1", 3)
        await host.wait_for_deliveries(1)
        await fake.wait_confirmed(updates[-1]["update_id"] + 1)
    (message,) = host.deliveries
    assert message.text == "the album"
    assert [a.data for a in message.attachments] == [b"image-g1-0", b"image-g1-1", b"image-g1-2"]
    first = updates[0]["message"]
    assert message.message_id == f"{ft.OWNER_ID}:{first['message_id']}"


async def test_debounce_zero_delivers_each_part(fake, running) -> None:
    async with running(album_debounce_ms=0) as (_, host):
        _album(fake, "g2", 2)
        await host.wait_for_deliveries(2)
    assert [len(m.attachments) for m in host.deliveries] == [1, 1]


async def test_held_parts_survive_a_restart(fake, tmp_path) -> None:
    home = FermixHome(tmp_path / "home")
    slow = telegram_config(fake, album_debounce_ms=600_000)
    async with StubChannelHost("telegram", config=slow, home=home) as host:
        channel = TelegramChannel(slow, jitter=lambda: 0.0)
        await channel.start(host)
        updates = _album(fake, "g3", 2)
        await fake.wait_confirmed(updates[-1]["update_id"] + 1)  # Telegram forgot them
        await channel.stop()
    assert not host.deliveries
    state = json.loads((home.path / OFFSET_FILE).read_text())
    assert [u["update_id"] for u in state["held"]] == [u["update_id"] for u in updates]

    quick = telegram_config(fake, album_debounce_ms=100)
    async with StubChannelHost("telegram", config=quick, home=home) as host2:
        channel2 = TelegramChannel(quick, jitter=lambda: 0.0)
        await channel2.start(host2)
        await host2.wait_for_deliveries(1)
        await fake.until(lambda: "held" not in json.loads((home.path / OFFSET_FILE).read_text()))
        await channel2.stop()
    (message,) = host2.deliveries
    assert len(message.attachments) == 2


async def test_a_strangers_album_is_not_held_or_downloaded(fake, running) -> None:
    async with running(album_debounce_ms=150) as (_, host):
        host.drop_senders = {str(ft.STRANGER_ID)}
        file_id = fake.add_file(b"x", path="photos/s.jpg")
        update = fake.message(
            None,
            sender=ft.STRANGER_ID,
            media_group_id="g4",
            photo=[{"file_id": file_id, "width": 1, "height": 1, "file_size": 1}],
        )
        await fake.wait_confirmed(update["update_id"] + 1)
    assert not fake.calls_to("getFile")
    assert not host.deliveries
