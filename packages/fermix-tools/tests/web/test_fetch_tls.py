"""HTTPS through the pinned address: SNI and the certificate check use the original name.

A real TLS server on 127.0.0.1 with a certificate from a throwaway CA made here; the fetch
connects to the vetted IP and must still send ``secure.example`` as the server name and
refuse a certificate issued for another name.
"""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest
from fermix_tools.web.fetch import WebFetch, WebFetcher
from fermix_tools.web.plugin import WEB_FETCH
from fermix_tools.web.ssrf import SSRFGuard

pytest.importorskip("cryptography.x509")
from fermix_core.testing.tls import make_pki, serve_tls

pytestmark = pytest.mark.anyio


@pytest.fixture
async def secure(tmp_path: Path):
    server_ctx, client_ctx = make_pki(tmp_path, "secure.example")
    async with serve_tls(server_ctx) as server:
        yield server, client_ctx


def fetch_tool(client_ctx: ssl.SSLContext) -> WebFetch:
    async def resolve(host: str, port: int) -> list[str]:
        return ["127.0.0.1"]

    guard = SSRFGuard(resolve, allow_loopback_for_tests=True)
    return WebFetch(WEB_FETCH, fetcher=WebFetcher(guard, ssl_context=client_ctx))


async def test_https_sends_the_original_name_while_connecting_to_the_pinned_ip(
    secure, make_context
) -> None:
    server, client_ctx = secure
    url = f"https://secure.example:{server.port}/page"
    out = await fetch_tool(client_ctx).invoke({"url": url}, make_context())
    assert not out.is_error, out.text
    assert "secure hello" in out.text
    assert server.server_names == ["secure.example"]
    assert f"host: secure.example:{server.port}".encode() in server.requests[0].lower()


async def test_a_certificate_for_another_name_is_refused(secure, make_context) -> None:
    server, client_ctx = secure
    url = f"https://elsewhere.example:{server.port}/page"
    out = await fetch_tool(client_ctx).invoke({"url": url}, make_context())
    assert out.is_error and "TLS certificate that is not valid" in out.text
    assert server.server_names == ["elsewhere.example"]
    assert server.requests == []
