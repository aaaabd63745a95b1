"""A throwaway PKI and a one-request TLS server on 127.0.0.1, for tests of HTTPS clients.

Needs ``cryptography`` (a development dependency of the workspace); import this module
only from tests that skip without it.
"""

from __future__ import annotations

import datetime
import ipaddress
import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import anyio
from anyio.abc import ByteStream
from anyio.streams.tls import TLSListener
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

__all__ = ["TLSServer", "make_pki", "serve_tls"]


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def make_pki(
    tmp: Path, dns_name: str, *, ip: str | None = None
) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """(server context for *dns_name* (and *ip*), client context trusting only the test CA).

    The CA certificate is left in ``tmp / "ca.pem"`` (for ``SSL_CERT_FILE``)."""
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
    names: list[x509.GeneralName] = [x509.DNSName(dns_name)]
    if ip is not None:
        names.append(x509.IPAddress(ipaddress.ip_address(ip)))
    leaf = (
        x509.CertificateBuilder()
        .subject_name(_name(dns_name))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
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
