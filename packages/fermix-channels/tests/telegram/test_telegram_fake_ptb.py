"""The loopback Bot API checked with python-telegram-bot's own client, so it cannot drift
from what the real Bot API speaks (PTB sends form-encoded and multipart bodies)."""

from __future__ import annotations

import datetime as dt

import pytest
import telegram
from telegram.error import BadRequest, Conflict, InvalidToken, RetryAfter
from telegram.request import HTTPXRequest

from .conftest import ft

pytestmark = pytest.mark.anyio


def _bot(fake, token: str = ft.TOKEN) -> telegram.Bot:
    return telegram.Bot(
        token,
        base_url=f"{fake.url}/bot",
        base_file_url=f"{fake.url}/file/bot",
        request=HTTPXRequest(read_timeout=10),
        get_updates_request=HTTPXRequest(read_timeout=15),
    )


async def test_ptb_talks_to_the_fake(fake) -> None:
    async with _bot(fake) as bot:
        me = await bot.get_me()
        assert (me.id, me.is_bot, me.username) == (ft.BOT_ID, True, ft.BOT_USERNAME)

        pushed = fake.message("hi from a user", chat_id=ft.GROUP_ID)
        updates = await bot.get_updates(timeout=5, allowed_updates=["message"])
        (update,) = updates
        assert update.update_id == pushed["update_id"]
        assert update.message.text == "hi from a user"
        assert update.message.from_user.is_bot is False
        assert update.message.chat.type == "supergroup"
        assert update.message.date.timestamp() == pushed["message"]["date"]
        # Confirmed by the next offset: gone, and the next poll blocks until its timeout.
        assert await bot.get_updates(offset=update.update_id + 1, timeout=1) == ()

        sent = await bot.send_message(
            ft.OWNER_ID, "<b>bold</b>", parse_mode="HTML", disable_notification=True
        )
        assert sent.from_user.id == ft.BOT_ID and sent.text == "bold"
        assert sent.text_html == "<b>bold</b>"  # PTB rebuilds the HTML from the entities
        edited = await bot.edit_message_text(
            "<i>new</i> 😀 <a href='https://example.org'>x</a>",
            ft.OWNER_ID,
            sent.message_id,
            parse_mode="HTML",
        )
        assert edited.text == "new 😀 x"
        assert edited.text_html == '<i>new</i> 😀 <a href="https://example.org">x</a>'
        with pytest.raises(BadRequest, match=r"(?i)not modified"):
            await bot.edit_message_text(
                "<i>new</i> 😀 <a href='https://example.org'>x</a>",
                ft.OWNER_ID,
                sent.message_id,
                parse_mode="HTML",
            )
        with pytest.raises(BadRequest, match=r"(?i)can't parse entities"):
            await bot.send_message(ft.OWNER_ID, "<b>open", parse_mode="HTML")
        assert await bot.set_message_reaction(ft.OWNER_ID, sent.message_id, "👍")
        assert await bot.send_chat_action(ft.OWNER_ID, "typing")

        photo = await bot.send_photo(ft.OWNER_ID, b"\x89PNG fake bytes", caption="pic")
        assert photo.caption == "pic"
        upload = fake.calls_to("sendPhoto")[0]
        assert upload.content_type.startswith("multipart/form-data")
        file = await bot.get_file(photo.photo[-1].file_id)
        assert bytes(await file.download_as_bytearray()) == b"\x89PNG fake bytes"

        fake.fail("sendMessage", 429, "Too Many Requests: retry after 3", retry_after=3)
        with pytest.raises(RetryAfter) as limited:
            await bot.send_message(ft.OWNER_ID, "x")
        # PTB 22 gives an int (a timedelta with PTB_TIMEDELTA=1, the next major default).
        assert limited.value.retry_after in (3, dt.timedelta(seconds=3))

        fake.set_webhook("https://example.invalid/hook")
        with pytest.raises(Conflict, match="webhook is active"):
            await bot.get_updates(timeout=1)
        assert await bot.delete_webhook()
        assert (await bot.get_webhook_info()).url == ""
        assert await bot.delete_message(ft.OWNER_ID, sent.message_id)


async def test_wrong_token_is_unauthorized(fake) -> None:
    with pytest.raises(InvalidToken):
        async with _bot(fake, token="1:AAwrong-token-value-for-the-fake-test"):
            pass
