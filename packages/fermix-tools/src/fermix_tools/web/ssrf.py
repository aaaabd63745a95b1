"""The SSRF guard: which URLs ``web_fetch`` may reach, decided on addresses, not on spelling.

A model that can be talked into fetching ``http://169.254.169.254/`` or a router's admin page
is a way into the operator's network, so the guard answers one question for every hop of
every fetch: *does this host resolve only to public addresses?* Three rules make that
answer hold up against the usual tricks:

* **Spelling is normalised first.** ``2130706433``, ``0x7f000001``, ``0177.0.0.1``,
  ``127.1`` and ``[::ffff:127.0.0.1]`` are all loopback; the legacy ``inet_aton`` forms are
  parsed here rather than left to whatever the resolver happens to do with them.
* **The check runs after DNS.** A public-looking name that resolves to ``10.0.0.7`` is
  refused, and so is a name with *any* private answer among public ones.
* **The connection is pinned.** The caller connects to the address that was checked (with
  the original ``Host`` header and TLS server name), so a second lookup cannot be answered
  differently (DNS rebinding): there is no second lookup.

``allow_loopback_for_tests`` admits 127.0.0.0/8 and ``::1`` only — so tests can fetch from a
real loopback server — and nothing else; production code never sets it.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

from fermix_core.tool import ToolError

__all__ = [
    "METADATA_ADDRESSES",
    "METADATA_HOSTS",
    "Resolver",
    "SSRFBlocked",
    "SSRFGuard",
    "Target",
    "address_problem",
    "parse_ip_literal",
    "system_resolver",
]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
#: ``resolve(host, port)`` -> the addresses *host* resolves to, as strings.
Resolver = Callable[[str, int], Awaitable[Sequence[str]]]

#: Names of cloud instance-metadata services (they also resolve to link-local addresses,
#: but a custom resolver or /etc/hosts entry must not be able to change the verdict).
METADATA_HOSTS: frozenset[str] = frozenset(
    {
        "metadata",
        "metadata.google.internal",
        "metadata.goog",
        "instance-data",
        "instance-data.ec2.internal",
    }
)
METADATA_ADDRESSES: frozenset[IPAddress] = frozenset(
    ipaddress.ip_address(a)
    for a in (
        "169.254.169.254",  # AWS, GCP, Azure, OpenStack, DigitalOcean …
        "169.254.170.2",  # AWS ECS task metadata
        "100.100.100.200",  # Alibaba Cloud
        "fd00:ec2::254",  # AWS over IPv6
    )
)

_RFC1918 = tuple(ipaddress.ip_network(n) for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"))
_CGNAT = ipaddress.ip_network("100.64.0.0/10")
_THIS_NETWORK = ipaddress.ip_network("0.0.0.0/8")
_ULA = ipaddress.ip_network("fc00::/7")
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_NAT64_LOCAL = ipaddress.ip_network("64:ff9b:1::/48")
_IPV4_COMPAT = ipaddress.ip_network("::/96")
_LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost"})
_HEX_DIGITS = frozenset("0123456789abcdefx")


class SSRFBlocked(ToolError):
    """A URL the guard refuses; the message names the reason and never fetches anything."""

    def __init__(
        self, message: str, *, reason: str, host: str | None = None, address: str | None = None
    ) -> None:
        super().__init__(message)
        self.reason = reason
        self.host = host
        self.address = address


@dataclass(frozen=True)
class Target:
    """One vetted hop: the URL's host and port and the addresses a connection may use."""

    scheme: str
    host: str
    port: int
    addresses: tuple[str, ...]
    #: The host is itself an IP literal (no TLS server name is sent for it).
    literal: bool = False


async def system_resolver(host: str, port: int) -> list[str]:
    """Every address the system resolver gives for *host*, in its order, without repeats."""
    import anyio

    infos = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    seen: list[str] = []
    for info in infos:
        address = str(info[4][0])
        if address not in seen:
            seen.append(address)
    return seen


# --------------------------------------------------------------------------- literals


def _number(part: str) -> int:
    """One ``inet_aton`` component: ``0x`` hex, leading-zero octal, or decimal."""
    if part.startswith(("0x", "0X")):
        digits = part[2:]
        return int(digits, 16) if digits else 0
    if len(part) > 1 and part.startswith("0"):
        return int(part, 8)
    return int(part, 10)


def _legacy_ipv4(host: str) -> ipaddress.IPv4Address | None:
    """``127.1``, ``0x7f.1``, ``017700000001``: the forms ``inet_aton`` accepts.

    Returns ``None`` for anything that is not numeric at all (a host name); raises
    ``ValueError`` for something numeric-looking that no resolver should be handed.
    """
    parts = host.split(".")
    if not all(p and p[0].isdigit() and set(p.lower()) <= _HEX_DIGITS for p in parts):
        return None
    if len(parts) > 4:
        raise ValueError("too many dotted parts for an IPv4 address")
    try:
        numbers = [_number(p) for p in parts]
    except ValueError:
        raise ValueError("a part is not a valid decimal, octal or hex number") from None
    *head, last = numbers
    if any(n > 255 for n in head) or last >= 256 ** (4 - len(head)):
        raise ValueError("a part of the IPv4 address is out of range")
    value = 0
    for n in head:
        value = value * 256 + n
    value = value * 256 ** (4 - len(head)) + last
    return ipaddress.IPv4Address(value)


def parse_ip_literal(host: str) -> IPAddress | None:
    """The address *host* spells, in any notation, or ``None`` when it is a name.

    Raises :class:`SSRFBlocked` for a numeric-looking host that is not a valid address:
    refusing it is safer than guessing what a resolver would make of it.
    """
    text = host.strip().strip("[]").rstrip(".")
    if "%" in text:  # a zone id (fe80::1%eth0) or percent-encoding; neither names a public host
        text = text.split("%", 1)[0] if ":" in text else unquote(text)
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        pass
    try:
        return _legacy_ipv4(text)
    except ValueError as exc:
        raise SSRFBlocked(
            f"Refused: {host!r} looks like a numeric address but is malformed ({exc}). "
            "Use the site's host name.",
            reason="malformed_address",
            host=host,
        ) from None


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> tuple[str, ipaddress.IPv4Address] | None:
    """An IPv4 address carried inside an IPv6 one (mapped, 6to4, NAT64, compatible, Teredo)."""
    if ip.ipv4_mapped is not None:
        return "IPv4-mapped", ip.ipv4_mapped
    if ip.sixtofour is not None:
        return "6to4", ip.sixtofour
    if ip.teredo is not None:
        return "Teredo", ip.teredo[1]
    if ip in _NAT64 or ip in _NAT64_LOCAL:
        return "NAT64", ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    if ip in _IPV4_COMPAT and int(ip) > 1:
        return "IPv4-compatible", ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def address_problem(ip: IPAddress, *, allow_loopback: bool = False) -> str | None:
    """Why *ip* must not be fetched (a short phrase), or ``None`` for a public address."""
    if isinstance(ip, ipaddress.IPv6Address) and ip.scope_id:
        ip = ipaddress.IPv6Address(str(ip).split("%", 1)[0])
    if ip in METADATA_ADDRESSES:
        return "a cloud metadata address"
    if isinstance(ip, ipaddress.IPv6Address):
        embedded = _embedded_ipv4(ip)
        if embedded is not None:
            form, inner = embedded
            inner_problem = address_problem(inner, allow_loopback=False)
            if form in ("IPv4-mapped", "IPv4-compatible") or inner_problem:
                why = inner_problem or "an IPv4 address in IPv6 form"
                return f"{inner} in {form} form ({why})"
            if form == "NAT64":
                return None  # DNS64 networks reach every public IPv4 host this way
    if ip.is_loopback:
        return None if allow_loopback else "a loopback address"
    if ip.is_unspecified or ip in _THIS_NETWORK:
        return "the unspecified address"
    if ip.is_link_local:
        return "a link-local address"
    if ip.is_multicast:
        return "a multicast address"
    if isinstance(ip, ipaddress.IPv4Address) and any(ip in net for net in _RFC1918):
        return "a private (RFC 1918) address"
    if ip in _CGNAT:
        return "a carrier-grade NAT (100.64.0.0/10) address"
    if ip in _ULA:
        return "a private (unique local, fc00::/7) address"
    if ip.is_reserved:
        return "a reserved address"
    if not ip.is_global:
        return "not a public address"
    return None


def _ascii_host(host: str) -> str | None:
    """The IDNA (``xn--``) form of *host*, encoded the way httpx encodes it (IDNA 2008)."""
    if host.isascii():
        return host
    try:
        import idna  # httpx's own dependency, so the name vetted is the name requested

        return idna.encode(host).decode("ascii")
    except ImportError:
        pass
    except Exception:  # idna.IDNAError and friends
        return None
    try:
        return host.encode("idna").decode("ascii")
    except UnicodeError:
        return None


# --------------------------------------------------------------------------- the guard


class SSRFGuard:
    """Vets URLs for :mod:`fermix_tools.web.fetch`; one instance may serve many fetches.

    *resolver* replaces the system resolver (tests inject one that maps names to chosen
    addresses). *allow_loopback_for_tests* admits loopback only — it exists so the fetch
    path can be tested end to end against a real server on 127.0.0.1.
    """

    def __init__(
        self, resolver: Resolver | None = None, *, allow_loopback_for_tests: bool = False
    ) -> None:
        self.resolver: Resolver = resolver or system_resolver
        self.allow_loopback = allow_loopback_for_tests

    def _refuse(self, url: str, reason: str, what: str, **where: str | None) -> SSRFBlocked:
        return SSRFBlocked(
            f"Refused to fetch {url}: {what}. web_fetch only reaches public internet hosts; "
            "it never reaches this machine, the local network or cloud metadata services.",
            reason=reason,
            **where,
        )

    def check_address(self, url: str, host: str, address: str, *, literal: bool = False) -> None:
        """Raise :class:`SSRFBlocked` unless *address* (an answer for *host*) is public."""
        try:
            ip = ipaddress.ip_address(address.split("%", 1)[0])
        except ValueError:
            raise self._refuse(
                url, "bad_address", f"{host} resolved to {address!r}, which is not an address"
            ) from None
        problem = address_problem(ip, allow_loopback=self.allow_loopback)
        if problem is not None:
            if host == str(ip):
                what = f"{host} is {problem}"
            elif literal:
                what = f"{host} is another spelling of {ip}, {problem}"
            else:
                what = f"{host} resolves to {ip}, {problem}"
            raise self._refuse(url, "forbidden_address", what, host=host, address=str(ip))

    async def vet(self, url: str) -> Target:
        """Check *url* and resolve its host; the returned addresses are the only ones to use."""
        try:
            parts = urlsplit(url)
            port = parts.port
        except ValueError as exc:
            raise ToolError(f"Not a valid URL: {url!r} ({exc}).") from None
        scheme = parts.scheme.lower()
        if scheme not in ("http", "https"):
            raise self._refuse(url, "scheme", f"the scheme {scheme or '(none)'!r} is not http(s)")
        if parts.username is not None or parts.password is not None:
            raise self._refuse(url, "credentials", "URLs with embedded credentials are not fetched")
        raw_host = parts.hostname or ""
        if not raw_host:
            raise ToolError(f"Not a valid URL: {url!r} has no host.")
        port = port or (443 if scheme == "https" else 80)
        host = raw_host.rstrip(".").lower()
        if host in METADATA_HOSTS:
            raise self._refuse(url, "metadata", f"{host} is a cloud metadata service", host=host)
        literal = parse_ip_literal(raw_host)
        if literal is not None:
            self.check_address(url, host, str(literal), literal=True)
            return Target(scheme, str(literal), port, (str(literal),), literal=True)
        if "%" in host or any(ch.isspace() for ch in host):
            raise self._refuse(url, "malformed_host", f"{raw_host!r} is not a host name")
        if (host in _LOOPBACK_NAMES or host.endswith(".localhost")) and not self.allow_loopback:
            raise self._refuse(url, "forbidden_address", f"{host} is this machine", host=host)
        idna = _ascii_host(host)
        if idna is None:
            raise ToolError(f"Not a valid URL: {raw_host!r} is not a valid host name.")
        try:
            addresses = list(await self.resolver(idna, port))
        except (OSError, UnicodeError) as exc:
            raise ToolError(
                f"Could not resolve {host} ({type(exc).__name__}); check the address."
            ) from None
        if not addresses:
            raise ToolError(f"Could not resolve {host}: no addresses; check the address.")
        for address in addresses:
            self.check_address(url, host, address)
        return Target(scheme, idna, port, tuple(addresses))
