"""The runtime's HTTP client loads its CA certificates on the first TLS connection only,
and still verifies exactly as httpx's default context does."""

from __future__ import annotations

import ssl
from pathlib import Path

import httpx
import pytest
from fermix_core.httpclient import DeferredTrustContext, runtime_client

pytest.importorskip("cryptography.x509")
from fermix_core.testing.tls import make_pki, serve_tls

pytestmark = pytest.mark.anyio


async def test_building_the_client_loads_no_certificates() -> None:
    async with runtime_client() as client:
        context = client._transport._pool._ssl_context  # what every connection will use
        assert isinstance(context, DeferredTrustContext)
        assert context.cert_store_stats()["x509_ca"] == 0 and not context.trust_loaded
        assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
        assert client.follow_redirects is False


def test_the_first_wrap_loads_the_trust_store_once() -> None:
    context = DeferredTrustContext()
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    context.wrap_bio(incoming, outgoing, server_hostname="example.org")
    loaded = context.cert_store_stats()["x509_ca"]
    assert context.trust_loaded and loaded > 0  # certifi's bundle
    context.wrap_bio(ssl.MemoryBIO(), ssl.MemoryBIO(), server_hostname="example.org")
    assert context.cert_store_stats()["x509_ca"] == loaded


async def test_a_certificate_from_an_unknown_ca_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    server_ctx, _ = make_pki(tmp_path, "localhost", ip="127.0.0.1")
    async with serve_tls(server_ctx) as server, runtime_client() as client:
        with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
            await client.get(f"https://127.0.0.1:{server.port}/")
    assert server.requests == []


async def test_ssl_cert_file_is_honoured_as_httpx_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server_ctx, _ = make_pki(tmp_path, "localhost", ip="127.0.0.1")
    monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "ca.pem"))
    async with serve_tls(server_ctx) as server, runtime_client() as client:
        reply = await client.get(f"https://127.0.0.1:{server.port}/page")
    assert reply.status_code == 200 and b"secure hello" in reply.content
    assert server.requests[0].startswith(b"GET /page ")
