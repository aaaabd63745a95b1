"""HTTPS through the pinned address: SNI and the certificate check use the original name.

A real TLS server on 127.0.0.1 with a certificate from a throwaway CA made here; the fetch
connects to the vetted IP and must still send ``secure.example`` as the server name and
refuse a certificate issued for another name.
"""

from __future__ import annotations

import datetime
import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import pytest
from anyio.abc import ByteStream
from anyio.streams.tls import TLSListener
from fermix_tools.web.fetch import WebFetch, WebFetcher
from fermix_tools.web.plugin import WEB_FETCH
from fermix_tools.web.ssrf import SSRFGuard

x509 = pytest.importorskip("cryptography.x509")
from cryptography.hazmat.primitives import hashes, serialization  # noqa: E402
from cryptography.hazmat.primitives.asymmetric import ec  # noqa: E402
from cryptography.x509.oid import NameOID  # noqa: E402

pytestmark = pytest.mark.anyio


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def make_pki(tmp: Path, dns_name: str) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """(server context for *dns_name*, client context trusting only the test CA)."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (
        x509.CertificateBuilder()
        .subject_name(_name("Fermix test CA"))
        .issuer_name(_name("Fermix test CA"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    leaf = (
        x509.CertificateBuilder()
        .subject_name(_name(dns_name))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(dns_name)]), critical=False)
        .add_extension(
            x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    cert_file, key_file, ca_file = tmp / "leaf.pem", tmp / "leaf.key", tmp / "ca.pem"
    cert_file.write_bytes(leaf.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    ca_file.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server.load_cert_chain(cert_file, key_file)
    client = ssl.create_default_context(cafile=str(ca_file))
    return server, client


@dataclass
class TLSServer:
    port: int = 0
    server_names: list[str | None] = field(default_factory=list)
    requests: list[bytes] = field(default_factory=list)


async def _answer(stream: ByteStream, server: TLSServer) -> None:
    data = b""
    try:
        while b"\r\n\r\n" not in data:
            data += await stream.receive()
    except (anyio.EndOfStream, anyio.BrokenResourceError, ssl.SSLError, OSError):
        return
    server.requests.append(data)
    body = b"<p>secure hello</p>"
    head = (
        b"HTTP/1.1 200 OK\r\ncontent-type: text/html\r\nconnection: close\r\n"
        b"content-length: " + str(len(body)).encode() + b"\r\n\r\n"
    )
    await stream.send(head + body)
    await stream.aclose()


class _QuietTLSListener(TLSListener):
    @staticmethod
    async def handle_handshake_error(exc: BaseException, stream) -> None:
        await anyio.aclose_forcefully(stream)  # the client refusing our cert is the test


@asynccontextmanager
async def serve_tls(context: ssl.SSLContext) -> AsyncIterator[TLSServer]:
    server = TLSServer()

    def remember(sslobj: ssl.SSLObject, name: str | None, ctx: ssl.SSLContext) -> None:
        server.server_names.append(name)

    context.sni_callback = remember  # type: ignore[assignment]
    tcp = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
    server.port = tcp.extra(anyio.abc.SocketAttribute.local_port)  # noqa: S610
    listener = _QuietTLSListener(tcp, context, standard_compatible=False)
    async with anyio.create_task_group() as tg:

        async def handle(stream: ByteStream) -> None:
            await _answer(stream, server)

        tg.start_soon(listener.serve, handle)
        try:
            yield server
        finally:
            tg.cancel_scope.cancel()
    await listener.aclose()


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
