"""Fixtures for the Discord adapter tests: the loopback gateway + REST (``fake_discord.py``)
and a running channel on a :class:`~fermix_core.testing.StubChannelHost`."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

_MODULE = "fermix_channels_tests_fake_discord"

try:  # the `discord` extra; an environment without it has nothing to test here
    import websockets  # noqa: F401
except ImportError:  # pragma: no cover - only without the extra
    collect_ignore_glob = ["test_*.py"]


def load_fake_discord() -> Any:
    """The helper module, loaded once by path (test directories are not packages)."""
    if _MODULE not in sys.modules:
        path = Path(__file__).with_name("fake_discord.py")
        spec = importlib.util.spec_from_file_location(_MODULE, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[_MODULE] = module
        spec.loader.exec_module(module)
    return sys.modules[_MODULE]


fd = load_fake_discord() if "collect_ignore_glob" not in globals() else None


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # websockets' client and server run on asyncio


@pytest.fixture
async def fake() -> AsyncIterator[Any]:
    async with fd.FakeDiscord() as discord:
        yield discord


def discord_config(fake: Any, **overrides: Any) -> Any:
    from fermix_channels.discord.config import DiscordConfig

    values: dict[str, Any] = {
        "enabled": True,
        "bot_token": fd.TOKEN,
        "api_base_url": fake.api_base_url,
        "owner_user_id": fd.OWNER_ID,
        "allowed_user_ids": [fd.GUEST_ID],
    }
    values.update(overrides)
    return DiscordConfig.model_validate(values)


def make_channel(fake: Any, **overrides: Any) -> Any:
    from fermix_channels.discord.adapter import DiscordChannel

    fatal_retry = overrides.pop("fatal_retry", 3600.0)
    return DiscordChannel(
        discord_config(fake, **overrides), jitter=lambda: 0.0, fatal_retry=fatal_retry
    )


@pytest.fixture
def running(fake: Any) -> Callable[..., Any]:
    """``async with running(**overrides) as (channel, host):`` a started channel."""

    @asynccontextmanager
    async def run(
        *, home: Any = None, fatal_retry: float = 3600.0, **overrides: Any
    ) -> AsyncIterator[tuple[Any, Any]]:
        from fermix_core.testing import StubChannelHost

        channel = make_channel(fake, fatal_retry=fatal_retry, **overrides)
        async with StubChannelHost("discord", config=channel.config, home=home) as host:
            await channel.start(host)
            try:
                yield channel, host
            finally:
                await channel.stop()

    return run
