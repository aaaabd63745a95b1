"""The SSRF guard on its own: spellings, resolved answers, and what the test switch admits.

No test here opens a socket: every host name goes through an injected resolver, and a
resolver that must not be consulted fails the test if it is.
"""

from __future__ import annotations

import ipaddress

import pytest
from fermix_core.tool import ToolError
from fermix_tools.web.ssrf import (
    SSRFBlocked,
    SSRFGuard,
    address_problem,
    parse_ip_literal,
)

pytestmark = pytest.mark.anyio


def table_resolver(answers: dict[str, list[str]]):
    calls: list[tuple[str, int]] = []

    async def resolve(host: str, port: int) -> list[str]:
        calls.append((host, port))
        if host not in answers:
            raise OSError(f"no such host {host}")
        return answers[host]

    resolve.calls = calls  # type: ignore[attr-defined]
    return resolve


async def never_resolve(host: str, port: int) -> list[str]:
    raise AssertionError(f"the guard must decide {host!r} without DNS")


@pytest.mark.parametrize(
    ("spelling", "address"),
    [
        ("2130706433", "127.0.0.1"),
        ("0x7f000001", "127.0.0.1"),
        ("0177.0.0.1", "127.0.0.1"),
        ("0177.0.0.01", "127.0.0.1"),
        ("127.1", "127.0.0.1"),
        ("0x7f.1", "127.0.0.1"),
        ("0", "0.0.0.0"),  # noqa: S104 - an address under test, not a bind
        ("10.1", "10.0.0.1"),
        ("[::1]", "::1"),
        ("::ffff:7f00:1", "::ffff:127.0.0.1"),
        ("%31%32%37.0.0.1", "127.0.0.1"),
        ("fe80::1%25eth0", "fe80::1"),
        ("93.184.216.34.", "93.184.216.34"),
    ],
)
def test_every_spelling_of_an_address_is_parsed(spelling: str, address: str) -> None:
    assert parse_ip_literal(spelling) == ipaddress.ip_address(address)


@pytest.mark.parametrize("name", ["example.com", "1e100.net", "cafe.be", "xn--bcher-kva.de"])
def test_host_names_are_not_addresses(name: str) -> None:
    assert parse_ip_literal(name) is None


@pytest.mark.parametrize("bad", ["08.0.0.1", "09.1.1.1", "1.2.3.4.5", "256.1.1.1", "1.16777216"])
def test_malformed_numeric_hosts_are_refused_not_guessed(bad: str) -> None:
    with pytest.raises(SSRFBlocked) as info:
        parse_ip_literal(bad)
    assert info.value.reason == "malformed_address"


@pytest.mark.parametrize(
    ("address", "phrase"),
    [
        ("127.0.0.1", "loopback"),
        ("127.255.255.254", "loopback"),
        ("::1", "loopback"),
        ("10.0.0.7", "RFC 1918"),
        ("172.16.5.4", "RFC 1918"),
        ("192.168.1.1", "RFC 1918"),
        ("100.64.0.1", "carrier-grade NAT"),
        ("100.127.255.255", "carrier-grade NAT"),
        ("fd12:3456::1", "unique local"),
        ("fc00::1", "unique local"),
        ("169.254.10.10", "link-local"),
        ("fe80::abcd", "link-local"),
        ("169.254.169.254", "metadata"),
        ("fd00:ec2::254", "metadata"),
        ("100.100.100.200", "metadata"),
        ("0.0.0.0", "unspecified"),  # noqa: S104 - an address under test, not a bind
        ("0.1.2.3", "unspecified"),
        ("::", "unspecified"),
        ("224.0.0.1", "multicast"),
        ("239.255.255.250", "multicast"),
        ("ff02::1", "multicast"),
        ("255.255.255.255", "reserved"),
        ("240.0.0.1", "reserved"),
        ("192.0.2.10", "not a public address"),
        ("::ffff:127.0.0.1", "IPv4-mapped"),
        ("::ffff:10.0.0.1", "IPv4-mapped"),
        ("::ffff:8.8.8.8", "IPv4-mapped"),
        ("64:ff9b::7f00:1", "NAT64"),
        ("64:ff9b::a9fe:a9fe", "NAT64"),
        ("2002:7f00:1::", "6to4"),
        ("2002:c0a8:101::1", "6to4"),
        ("::127.0.0.1", "IPv4-compatible"),
    ],
)
def test_forbidden_addresses_name_their_reason(address: str, phrase: str) -> None:
    problem = address_problem(ipaddress.ip_address(address))
    assert problem is not None and phrase in problem


@pytest.mark.parametrize(
    "address", ["93.184.216.34", "8.8.8.8", "2606:4700:4700::1111", "64:ff9b::808:808"]
)
def test_public_addresses_pass(address: str) -> None:
    assert address_problem(ipaddress.ip_address(address)) is None


def test_the_test_switch_admits_loopback_and_nothing_else() -> None:
    for address in ("127.0.0.1", "127.3.2.1", "::1"):
        assert address_problem(ipaddress.ip_address(address), allow_loopback=True) is None
    refused = ("10.0.0.1", "169.254.169.254", "::ffff:127.0.0.1", "0.0.0.0", "fd00::1")  # noqa: S104
    for address in refused:
        assert address_problem(ipaddress.ip_address(address), allow_loopback=True) is not None


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1/",
        "http://127.0.0.1:8080/admin",
        "http://localhost/",
        "http://LOCALHOST./",
        "http://app.localhost/",
        "http://[::1]/",
        "http://[::ffff:127.0.0.1]/",
        "http://2130706433/",
        "http://0x7f000001/",
        "http://0177.0.0.1/",
        "http://127.1/",
        "https://169.254.169.254/latest/meta-data/",
        "http://metadata.google.internal/computeMetadata/v1/",
        "http://[fd00:ec2::254]/",
        "http://10.0.0.1/",
        "http://100.64.1.1/",
        "http://0.0.0.0:22/",
        "http://[fe80::1%25eth0]/",
    ],
)
async def test_default_guard_refuses_without_dns(url: str) -> None:
    guard = SSRFGuard(never_resolve)
    with pytest.raises(SSRFBlocked) as info:
        await guard.vet(url)
    assert "Refused to fetch" in str(info.value)


@pytest.mark.parametrize(
    "url",
    [
        "file:///etc/passwd",
        "gopher://example.com/",
        "ftp://example.com/",
        "javascript:alert(1)",
        "http://user:secret@example.com/",
        "http://example.com@127.0.0.1/",
        "http://example.com\\@127.0.0.1/",
    ],
)
async def test_schemes_and_credentials_are_refused(url: str) -> None:
    with pytest.raises(SSRFBlocked) as info:
        await SSRFGuard(never_resolve).vet(url)
    assert "secret" not in str(info.value) or "credentials" in str(info.value)


async def test_names_resolving_to_private_addresses_are_refused() -> None:
    resolver = table_resolver(
        {
            "intranet.example": ["10.0.0.7"],
            "router.example": ["192.168.0.1"],
            "meta.example": ["169.254.169.254"],
            "six.example": ["fd00::5"],
            "mapped.example": ["::ffff:10.0.0.1"],
        }
    )
    guard = SSRFGuard(resolver)
    for host in ("intranet.example", "router.example", "meta.example", "six.example"):
        with pytest.raises(SSRFBlocked) as info:
            await guard.vet(f"https://{host}/page")
        assert f"{host} resolves to" in str(info.value)
        assert info.value.host == host
    with pytest.raises(SSRFBlocked, match="IPv4-mapped"):
        await guard.vet("http://mapped.example/")


async def test_one_private_answer_among_public_ones_is_enough_to_refuse() -> None:
    guard = SSRFGuard(table_resolver({"mixed.example": ["93.184.216.34", "10.9.8.7"]}))
    with pytest.raises(SSRFBlocked) as info:
        await guard.vet("http://mixed.example/")
    assert info.value.address == "10.9.8.7"


async def test_public_names_resolve_to_the_addresses_used() -> None:
    resolver = table_resolver({"example.com": ["93.184.216.34", "2606:2800:220:1::1"]})
    target = await SSRFGuard(resolver).vet("https://Example.COM./path?q=1")
    assert target.host == "example.com"
    assert target.port == 443
    assert target.addresses == ("93.184.216.34", "2606:2800:220:1::1")
    assert resolver.calls == [("example.com", 443)]


async def test_unicode_names_are_resolved_in_idna_form() -> None:
    resolver = table_resolver({"xn--bcher-kva.de": ["93.184.216.34"]})
    target = await SSRFGuard(resolver).vet("http://bücher.de/")
    assert target.host == "xn--bcher-kva.de"


async def test_unresolvable_and_empty_answers_are_tool_errors() -> None:
    async def empty(host: str, port: int) -> list[str]:
        return []

    with pytest.raises(ToolError, match="Could not resolve"):
        await SSRFGuard(table_resolver({})).vet("http://nowhere.example/")
    with pytest.raises(ToolError, match="no addresses"):
        await SSRFGuard(empty).vet("http://nowhere.example/")


async def test_a_resolver_answer_that_is_not_an_address_is_refused() -> None:
    guard = SSRFGuard(table_resolver({"odd.example": ["not-an-ip"]}))
    with pytest.raises(SSRFBlocked, match="not an address"):
        await guard.vet("http://odd.example/")


@pytest.mark.parametrize("url", ["http:///nohost", "http://[::1/", "http://example.com:99999/"])
async def test_broken_urls_are_tool_errors(url: str) -> None:
    with pytest.raises(ToolError):
        await SSRFGuard(never_resolve).vet(url)


async def test_test_switch_admits_loopback_names_and_literals_only() -> None:
    guard = SSRFGuard(
        table_resolver({"localhost": ["127.0.0.1"], "lan.example": ["10.0.0.2"]}),
        allow_loopback_for_tests=True,
    )
    assert (await guard.vet("http://127.0.0.1:9/")).addresses == ("127.0.0.1",)
    assert (await guard.vet("http://localhost:9/")).addresses == ("127.0.0.1",)
    with pytest.raises(SSRFBlocked):
        await guard.vet("http://lan.example/")
    with pytest.raises(SSRFBlocked):
        await guard.vet("http://169.254.169.254/")
