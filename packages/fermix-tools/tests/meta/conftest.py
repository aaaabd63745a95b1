from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fermix_core.channel import ConversationKey
from fermix_core.gateway.reply import ChannelReplyPort
from fermix_core.home import FermixHome
from fermix_core.testing import MemoryChannel, StubChannelHost
from fermix_core.tool import ToolContext, Trust


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "workspace"
    root.mkdir()
    return root


@pytest.fixture
def channel() -> MemoryChannel:
    return MemoryChannel("memory")


@pytest.fixture
async def running(channel: MemoryChannel) -> MemoryChannel:
    await channel.start(StubChannelHost(channel.name))
    return channel


@pytest.fixture
def make_context(tmp_path: Path, workspace: Path) -> Callable[..., ToolContext]:
    def build(*, services: dict[str, Any] | None = None, **overrides: Any) -> ToolContext:
        home = FermixHome(tmp_path / "home")
        home.ensure()
        values: dict[str, Any] = {
            "trust": Trust.OPERATOR,
            "cwd": workspace,
            "home": home,
            "conversation_key": ConversationKey("memory", "chat", None),
            "session_id": "main-1",
            "attended": True,
            "services": services or {},
        }
        values.update(overrides)
        return ToolContext(**values)

    return build


@pytest.fixture
def port(channel: MemoryChannel) -> ChannelReplyPort:
    return ChannelReplyPort(channel)
