"""The Approve button: a message component whose custom_id holds a nonce (not the token);
the owner's tap becomes the owner-only ``/confirm`` path, anyone else gets an ephemeral
"not authorized" before anything is consumed, and a button works once."""

from __future__ import annotations

from pathlib import Path

import pytest
from fermix_core.sandbox.grants import Proposal

from .conftest import fd

pytestmark = pytest.mark.anyio

TOKEN = "K7Q2M9XA"


def _proposal() -> Proposal:
    return Proposal(TOKEN, Path("/srv/data"), "read the logs", "+ /srv/data")


def _button(message: dict) -> dict:
    (row,) = message["components"]
    (button,) = row["components"]
    return button


async def test_in_a_dm_the_prompt_keeps_the_typed_line_and_the_owner_tap_confirms(
    running, fake
) -> None:
    async with running() as (channel, host):
        await fake.message("hi")  # the DM channel is known once someone wrote in it
        await host.wait_for_deliveries(1, timeout=15)
        await channel.send_approval(fd.DM_CHANNEL, None, _proposal())
        (message,) = fake.sent(fd.DM_CHANNEL)
        button = _button(message)
        assert button["type"] == 2 and button["label"] == "Approve" and button["style"] == 3
        assert TOKEN not in button["custom_id"]  # the token never rides in the component
        assert f"/confirm {TOKEN}" in message["content"]
        await fake.tap(button["custom_id"], sender=fd.OWNER_ID, channel=fd.DM_CHANNEL)
        await host.wait_for_deliveries(2, timeout=15)
        await fake.until(lambda: len(fake.callbacks) == 1)
    confirm = host.deliveries[1]
    assert confirm.text == f"/confirm {TOKEN}" and confirm.sender_id == fd.OWNER_ID
    assert confirm.chat_id == fd.DM_CHANNEL and confirm.message_id.startswith("interaction:")
    (callback,) = fake.callbacks
    assert callback["type"] == 4 and callback["data"]["flags"] == 64
    assert callback["data"]["content"] == "Approving…"


async def test_in_a_server_the_code_is_withheld_and_a_stranger_is_refused_ephemerally(
    running, fake
) -> None:
    async with running() as (channel, host):
        await channel.send_approval(fd.GUILD_CHANNEL, fd.THREAD_ID, _proposal())
        (message,) = fake.sent(fd.THREAD_ID)
        assert TOKEN not in message["content"] and "button" in message["content"]
        custom_id = _button(message)["custom_id"]
        for sender, bot in ((fd.GUEST_ID, False), (fd.STRANGER_ID, False), (fd.OWNER_ID, True)):
            await fake.tap(
                custom_id, sender=sender, channel=fd.THREAD_ID, guild=fd.GUILD_ID, bot=bot
            )
        await fake.until(lambda: len(fake.callbacks) == 3)
        assert not host.deliveries  # nothing reached the confirmation path
        assert all(c["data"] == {"content": "not authorized", "flags": 64} for c in fake.callbacks)
        # The owner's tap still works: the refusals consumed nothing.
        await fake.tap(custom_id, sender=fd.OWNER_ID, channel=fd.THREAD_ID, guild=fd.GUILD_ID)
        await host.wait_for_deliveries(1, timeout=15)
    confirm = host.deliveries[0]
    assert confirm.text == f"/confirm {TOKEN}" and confirm.is_group
    assert (confirm.chat_id, confirm.thread_id) == (fd.GUILD_CHANNEL, fd.THREAD_ID)


async def test_a_button_is_single_use(running, fake) -> None:
    async with running() as (channel, host):
        await channel.send_approval(fd.GUILD_CHANNEL, None, _proposal())
        custom_id = _button(fake.sent(fd.GUILD_CHANNEL)[0])["custom_id"]
        await fake.tap(custom_id, channel=fd.GUILD_CHANNEL, guild=fd.GUILD_ID)
        await fake.tap(custom_id, channel=fd.GUILD_CHANNEL, guild=fd.GUILD_ID)
        await fake.tap("fx-approve:forged", channel=fd.GUILD_CHANNEL, guild=fd.GUILD_ID)
        await fake.tap("someone-elses-button", channel=fd.GUILD_CHANNEL, guild=fd.GUILD_ID)
        await fake.until(lambda: len(fake.callbacks) == 4)
    assert [m.text for m in host.deliveries] == [f"/confirm {TOKEN}"]
    assert [c["data"]["content"] for c in fake.callbacks] == [
        "Approving…",
        "This button is no longer active.",
        "This button is no longer active.",
        "This button is no longer active.",
    ]
