"""Fixtures for the WhatsApp adapter tests: the loopback Graph API and a running channel."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

_MODULE = "fermix_channels_tests_fake_graph"


def load_fake_graph() -> Any:
    if _MODULE not in sys.modules:
        path = Path(__file__).with_name("fake_graph.py")
        spec = importlib.util.spec_from_file_location(_MODULE, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[_MODULE] = module
        spec.loader.exec_module(module)
    return sys.modules[_MODULE]


fg = load_fake_graph()


@pytest.fixture
async def graph() -> AsyncIterator[Any]:
    async with fg.FakeGraph() as fake:
        yield fake


def _whatsapp_config(graph: Any, **overrides: Any) -> Any:
    from fermix_channels.whatsapp.config import WhatsAppConfig

    values: dict[str, Any] = {
        "enabled": True,
        "access_token": fg.ACCESS_TOKEN,
        "app_secret": fg.APP_SECRET,
        "verify_token": fg.VERIFY_TOKEN,
        "phone_number_id": fg.PHONE_NUMBER_ID,
        "api_base_url": graph.url,
        "owner_user_id": fg.OWNER,
        "allowed_sender_ids": [fg.GUEST],
    }
    values.update(overrides)
    return WhatsAppConfig.model_validate(values)


fg.whatsapp_config = _whatsapp_config
