"""Fixtures for the Signal adapter tests: the stub signal-cli (``stub_signal_cli.py``,
driven through ``signal_stub.py``) and a running channel on a
:class:`~fermix_core.testing.StubChannelHost`."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

_MODULE = "fermix_channels_tests_signal_stub"


def load_signal_stub() -> Any:
    """The helper module, loaded once by path (test directories are not packages)."""
    if _MODULE not in sys.modules:
        path = Path(__file__).with_name("signal_stub.py")
        spec = importlib.util.spec_from_file_location(_MODULE, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[_MODULE] = module
        spec.loader.exec_module(module)
    return sys.modules[_MODULE]


ss = load_signal_stub()


@pytest.fixture
def stub() -> Iterator[Any]:
    with ss.StubSignalCli() as fake:
        yield fake


def signal_config(stub: Any, **overrides: Any) -> Any:
    from fermix_channels.signal.config import SignalConfig

    values: dict[str, Any] = {
        "enabled": True,
        "account": ss.ACCOUNT,
        "cli_path": str(stub.path),
        "owner_user_id": ss.OWNER,
        "allowed_sender_ids": [ss.GUEST],
        "request_timeout": 10,
    }
    values.update(overrides)
    return SignalConfig.model_validate(values)


def make_channel(stub: Any, *, environ: Any = None, probe_every: float = 60.0, **overrides: Any):
    from fermix_channels.signal.adapter import SignalChannel

    return SignalChannel(
        signal_config(stub, **overrides),
        jitter=lambda: 0.0,
        probe_every=probe_every,
        environ=environ if environ is not None else ss.minimal_environ(),
    )


@pytest.fixture
def running(stub: Any) -> Callable[..., Any]:
    """``async with running(**overrides) as (channel, host):`` a started channel."""

    @asynccontextmanager
    async def run(
        *, home: Any = None, environ: Any = None, probe_every: float = 60.0, **overrides: Any
    ) -> AsyncIterator[tuple[Any, Any]]:
        from fermix_core.testing import StubChannelHost

        channel = make_channel(stub, environ=environ, probe_every=probe_every, **overrides)
        async with StubChannelHost("signal", config=channel.config, home=home) as host:
            await channel.start(host)
            try:
                yield channel, host
            finally:
                await channel.stop()

    return run
