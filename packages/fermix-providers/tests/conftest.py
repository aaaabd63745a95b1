"""Shared fixtures of the provider tests."""

from __future__ import annotations

import pytest
from fermix_core.httpclient import provider_client
from fermix_providers.http import base


@pytest.fixture(params=["httpx", "direct"])
def both_clients(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Runs a test once with each client an adapter meets: its own ``httpx.AsyncClient``
    (a provider built without a shared client, as plugins and ``fermix providers`` use it)
    and the service's :class:`~fermix_core.directclient.DirectClient`, which must fail,
    time out and retry exactly as httpx does."""
    if request.param == "direct":
        monkeypatch.setattr(base, "new_client", provider_client)
    return request.param
