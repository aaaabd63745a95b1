"""Fixtures for the Slack adapter tests: the loopback Slack (``fake_slack.py``) and a
running channel on a :class:`~fermix_core.testing.StubChannelHost`."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

_MODULE = "fermix_channels_tests_fake_slack"


def load_fake_slack() -> Any:
    """The helper module, loaded once by path (test directories are not packages)."""
    if _MODULE not in sys.modules:
        path = Path(__file__).with_name("fake_slack.py")
        spec = importlib.util.spec_from_file_location(_MODULE, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[_MODULE] = module
        spec.loader.exec_module(module)
    return sys.modules[_MODULE]


fs = load_fake_slack()


@pytest.fixture
async def fake() -> AsyncIterator[Any]:
    async with fs.FakeSlack() as slack:
        yield slack


def slack_config(fake: Any, **overrides: Any) -> Any:
    from fermix_channels.slack.config import SlackConfig

    values: dict[str, Any] = {
        "enabled": True,
        "bot_token": fs.BOT_TOKEN,
        "signing_secret": fs.SIGNING_SECRET,
        "api_base_url": fake.api_url,
        "owner_user_id": fs.OWNER_ID,
    }
    values.update(overrides)
    return SlackConfig.model_validate(values)


@pytest.fixture
def config_for(fake: Any) -> Callable[..., Any]:
    """``config_for(**overrides)``: a SlackConfig pointing at the loopback Slack."""
    return lambda **overrides: slack_config(fake, **overrides)


@pytest.fixture
def running(fake: Any) -> Callable[..., Any]:
    """``async with running(**config) as (channel, host):`` — a started SlackChannel."""
    from fermix_channels.slack.adapter import SlackChannel
    from fermix_core.testing import StubChannelHost

    @asynccontextmanager
    async def start(*, drop: tuple[str, ...] = (fs.STRANGER_ID,), **overrides: Any):
        config = slack_config(fake, **overrides)
        channel = SlackChannel(config=config)
        async with StubChannelHost("slack", config=config, drop_senders=drop) as host:
            await channel.start(host)
            try:
                yield channel, host
            finally:
                await channel.stop()

    return start
