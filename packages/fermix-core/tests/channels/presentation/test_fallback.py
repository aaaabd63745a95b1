"""A platform that rejects a formatted message gets that message once more as plain text."""

from __future__ import annotations

import logging

import pytest
from fermix_core.channels.presentation import Dialect, present, send_with_plain_fallback

pytestmark = pytest.mark.anyio


class ParseError(Exception):
    pass


class Platform:
    """Records sends; refuses formatted text while ``reject_markup`` is set."""

    def __init__(self, *, reject_markup: bool = False, fail_with: Exception | None = None):
        self.reject_markup = reject_markup
        self.fail_with = fail_with
        self.sent: list[tuple[str, bool]] = []

    async def send(self, text: str, formatted: bool) -> str:
        self.sent.append((text, formatted))
        if self.fail_with is not None:
            raise self.fail_with
        if formatted and self.reject_markup:
            raise ParseError("Bad Request: can't parse entities")
        return f"id-{len(self.sent)}"


def is_parse_error(exc: BaseException) -> bool:
    return isinstance(exc, ParseError)


CHUNK = present("**bold** and [a link](https://e.com)", Dialect.TELEGRAM).chunks[0]


async def test_formatted_text_goes_out_as_is() -> None:
    platform = Platform()
    assert await send_with_plain_fallback(platform.send, CHUNK, is_parse_error) == "id-1"
    assert platform.sent == [('<b>bold</b> and <a href="https://e.com">a link</a>', True)]


async def test_a_rejected_format_is_resent_once_as_plain_text_and_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    platform = Platform(reject_markup=True)
    with caplog.at_level(logging.ERROR, logger="fermix.channels.presentation"):
        result = await send_with_plain_fallback(
            platform.send, CHUNK, is_parse_error, channel="telegram"
        )
    assert result == "id-2"
    assert platform.sent[1] == ("bold and a link: https://e.com", False)
    (record,) = caplog.records
    assert record.levelno == logging.ERROR
    assert "telegram rejected a formatted message" in record.getMessage()


async def test_other_errors_are_not_resent() -> None:
    platform = Platform(fail_with=TimeoutError("slow"))
    with pytest.raises(TimeoutError):
        await send_with_plain_fallback(platform.send, CHUNK, is_parse_error)
    assert len(platform.sent) == 1


async def test_a_failing_plain_resend_propagates_and_is_not_retried_again() -> None:
    class Always(Platform):
        async def send(self, text: str, formatted: bool) -> str:
            self.sent.append((text, formatted))
            raise ParseError("still bad")

    platform = Always()
    with pytest.raises(ParseError):
        await send_with_plain_fallback(platform.send, CHUNK, lambda e: True)
    assert [f for _, f in platform.sent] == [True, False]


async def test_the_default_format_error_is_the_channel_contracts() -> None:
    from fermix_core.channel import ChannelFormatError, ChannelTransientError

    class Contract(Platform):
        async def send(self, text: str, formatted: bool) -> str:
            self.sent.append((text, formatted))
            if formatted:
                raise ChannelFormatError("can't parse entities")
            return "ok"

    platform = Contract()
    assert await send_with_plain_fallback(platform.send, CHUNK) == "ok"
    assert [f for _, f in platform.sent] == [True, False]
    flaky = Platform(fail_with=ChannelTransientError("502"))
    with pytest.raises(ChannelTransientError):
        await send_with_plain_fallback(flaky.send, CHUNK)
    assert len(flaky.sent) == 1


async def test_plain_chunks_are_sent_plain_directly() -> None:
    platform = Platform(reject_markup=True)
    chunk = present("**bold**", Dialect.SIGNAL).chunks[0]
    await send_with_plain_fallback(platform.send, chunk, is_parse_error)
    assert platform.sent == [("bold", False)]
