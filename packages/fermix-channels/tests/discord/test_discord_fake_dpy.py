"""discord.py's own client against the loopback Discord, so the fake cannot drift from
what the real gateway and REST speak: discord.py logs in, identifies, parses READY,
GUILD_CREATE, a message and an interaction, sends a message and a reaction, answers the
interaction, and resumes after op 7 — all with its own parsers and request builders."""

from __future__ import annotations

import anyio
import pytest

from .conftest import fd

discord = pytest.importorskip("discord", reason="discord.py is a dev dependency")

pytestmark = pytest.mark.anyio


async def test_discord_py_speaks_with_the_fake(fake, monkeypatch) -> None:
    import yarl

    # Both of discord.py's addresses point at the fakes: REST, and the gateway (a single
    # client connects to its default gateway rather than asking GET /gateway/bot).
    monkeypatch.setattr(discord.http.Route, "BASE", fake.api_base_url)
    monkeypatch.setattr(
        discord.gateway.DiscordWebSocket, "DEFAULT_GATEWAY", yarl.URL(fake.gateway_url)
    )
    intents = discord.Intents.default()
    intents.message_content = True
    client = discord.Client(intents=intents)
    ready, resumed = anyio.Event(), anyio.Event()
    messages: list = []
    interactions: list = []
    got = anyio.Event()

    @client.event
    async def on_ready() -> None:
        ready.set()

    @client.event
    async def on_resumed() -> None:
        resumed.set()

    @client.event
    async def on_message(message) -> None:
        messages.append(message)
        got.set()

    @client.event
    async def on_interaction(interaction) -> None:
        interactions.append(interaction)
        await interaction.response.send_message("not authorized", ephemeral=True)

    async with anyio.create_task_group() as tg:
        tg.start_soon(client.start, fd.TOKEN)
        try:
            with anyio.fail_after(30):
                await ready.wait()
            assert client.user is not None and str(client.user.id) == fd.BOT_ID
            (identify,) = fake.identify_payloads
            assert identify["intents"] & (1 << 15)  # discord.py asked for message content
            guild = client.get_guild(int(fd.GUILD_ID))
            assert guild is not None and guild.get_thread(int(fd.THREAD_ID)) is not None

            await fake.message(
                f"<@{fd.BOT_ID}> hi", channel=fd.GUILD_CHANNEL, guild=fd.GUILD_ID,
                mentions=[fd.BOT_ID],
            )  # fmt: skip
            with anyio.fail_after(30):
                await got.wait()
            (message,) = messages
            assert message.content == f"<@{fd.BOT_ID}> hi"
            assert str(message.author.id) == fd.OWNER_ID and client.user in message.mentions

            sent = await message.channel.send("**hello** from discord.py")
            assert str(sent.channel.id) == fd.GUILD_CHANNEL
            assert fake.texts(fd.GUILD_CHANNEL) == ["**hello** from discord.py"]
            await sent.add_reaction("👍🏽")
            assert fake.reactions[-1][2] == "👍🏽"
            await sent.edit(content="edited")
            assert fake.texts(fd.GUILD_CHANNEL) == ["edited"]

            await fake.tap("fx-approve:nonce", sender=fd.GUEST_ID, channel=fd.GUILD_CHANNEL,
                           guild=fd.GUILD_ID)  # fmt: skip
            await fake.until(lambda: len(fake.callbacks) == 1, 30)
            assert fake.callbacks[0]["type"] == 4
            assert fake.callbacks[0]["data"]["flags"] == 64
            assert interactions[0].data["custom_id"] == "fx-approve:nonce"

            await fake.request_reconnect()
            with anyio.fail_after(30):
                await resumed.wait()
            assert fake.identifies == 1 and len(fake.resumes) == 1
            assert fake.resumes[0]["session_id"] == fake.current.session_id
        finally:
            await client.close()
            tg.cancel_scope.cancel()
