"""Fixtures for the Telegram adapter tests: the loopback Bot API (``fake_telegram.py``) and
a running channel on a :class:`~fermix_core.testing.StubChannelHost`."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

_MODULE = "fermix_channels_tests_fake_telegram"


def load_fake_telegram() -> Any:
    """The helper module, loaded once by path (test directories are not packages)."""
    if _MODULE not in sys.modules:
        path = Path(__file__).with_name("fake_telegram.py")
        spec = importlib.util.spec_from_file_location(_MODULE, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[_MODULE] = module
        spec.loader.exec_module(module)
    return sys.modules[_MODULE]


ft = load_fake_telegram()


@pytest.fixture
async def fake() -> AsyncIterator[Any]:
    async with ft.FakeBotApi() as api:
        yield api


def telegram_config(fake: Any, **overrides: Any) -> Any:
    from fermix_channels.telegram.config import TelegramConfig

    values: dict[str, Any] = {
        "enabled": True,
        "bot_token": ft.TOKEN,
        "api_base_url": fake.url,
        "owner_user_id": str(ft.OWNER_ID),
        "allowed_user_ids": [str(ft.GUEST_ID)],
        "poll_timeout": 5,
    }
    values.update(overrides)
    return TelegramConfig.model_validate(values)


@pytest.fixture
def running(fake: Any) -> Callable[..., Any]:
    """``async with running(home=None, **overrides) as (channel, host):`` a started channel."""

    @asynccontextmanager
    async def run(*, home: Any = None, **overrides: Any) -> AsyncIterator[tuple[Any, Any]]:
        from fermix_channels.telegram.adapter import TelegramChannel
        from fermix_core.testing import StubChannelHost

        config = telegram_config(fake, **overrides)
        channel = TelegramChannel(config, jitter=lambda: 0.0)
        async with StubChannelHost("telegram", config=config, home=home) as host:
            await channel.start(host)
            try:
                yield channel, host
            finally:
                await channel.stop()

    return run
