"""``web_fetch`` over the real wire: a loopback server, real TCP, real HTTP framing.

The guard in these tests is built with ``allow_loopback_for_tests`` so the fetch path can
reach 127.0.0.1; everything else it refuses exactly as in production, which is what the
redirect tests lean on. Host names map to 127.0.0.1 through an injected resolver, so the
``Host`` header and DNS pinning are checked without any real lookup.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from typing import Any, ClassVar

import pytest
from fermix_core.testing import ToolContract
from fermix_core.testing.loopback import LoopbackServer, RecordedRequest, Reply, ThreadedLoopback
from fermix_core.tool import build_tool
from fermix_tools.web.fetch import WebFetch, WebFetcher, _same_host
from fermix_tools.web.plugin import WEB_FETCH
from fermix_tools.web.ssrf import SSRFGuard, Target

pytestmark = pytest.mark.anyio

ARTICLE = """<!doctype html><html><head><title>Tea &amp; Biscuits</title>
<style>body{color:red}</style><script>window.secret = "do not show";</script></head>
<body><header><a href="/">Site home</a></header><nav><a href="/menu">Menu</a></nav>
<main><h1>Brewing green tea</h1><p>Use water at <b>80&nbsp;°C</b>, see the
<a href="/guide/temps">temperature guide</a>.</p><h2>Steps</h2><ol><li>Warm the pot</li>
<li>Steep 2 minutes</li></ol></main><footer>© Tea Corp</footer></body></html>"""


def html(body: str, **headers: str) -> Reply:
    return Reply(body=body, headers={"content-type": "text/html; charset=utf-8", **headers})


def fetcher(guard: SSRFGuard | None = None, **options: Any) -> WebFetcher:
    return WebFetcher(guard or SSRFGuard(allow_loopback_for_tests=True), **options)


def tool(**options: Any) -> WebFetch:
    return WebFetch(WEB_FETCH, fetcher=fetcher(**options))


def pinned_resolver(*answers: list[str]):
    """Answers one list per call (the last repeats); records every lookup."""
    calls: list[str] = []

    async def resolve(host: str, port: int) -> list[str]:
        calls.append(host)
        return answers[min(len(calls), len(answers)) - 1]

    resolve.calls = calls  # type: ignore[attr-defined]
    return resolve


# --------------------------------------------------------------------------- contract

_CONTRACT: dict[str, str] = {}


def _contract_page(request: RecordedRequest) -> Reply:
    return html(ARTICLE)


@pytest.fixture(scope="module", autouse=True)
def contract_server() -> Iterator[None]:
    with ThreadedLoopback(_contract_page) as server:
        _CONTRACT["url"] = server.url
        yield


class TestWebFetchContract(ToolContract):
    invalid_args: ClassVar[dict[str, Any]] = {"url": ""}
    invalid_field: ClassVar[str] = "url"

    @property
    def valid_args(self) -> dict[str, Any]:  # type: ignore[override]
        return {"url": _CONTRACT["url"] + "/article"}

    def make_tool(self) -> WebFetch:
        return tool()


async def test_the_registered_factory_uses_the_production_guard(make_context) -> None:
    built = build_tool(WEB_FETCH)
    assert isinstance(built, WebFetch)
    assert built.fetcher.guard.allow_loopback is False
    out = await built.invoke({"url": _CONTRACT["url"] + "/article"}, make_context())
    assert out.is_error and "Refused to fetch" in out.text and "loopback" in out.text


# --------------------------------------------------------------------------- content


async def test_html_becomes_readable_text(make_context) -> None:
    async with LoopbackServer() as server:
        server.queue(html(ARTICLE))
        out = await tool().invoke({"url": server.url + "/tea/green"}, make_context())
    assert not out.is_error, out.text
    text = out.text
    assert text.startswith("# Tea & Biscuits\nURL: ")
    assert "# Brewing green tea" in text and "## Steps" in text
    assert f"temperature guide ({server.url}/guide/temps)" in text
    assert "- Warm the pot\n- Steep 2 minutes" in text
    assert "80\xa0°C" in text or "80 °C" in text
    for chrome in ("window.secret", "color:red", "Menu", "Site home", "Tea Corp"):
        assert chrome not in text
    assert out.data["format"] == "html" and out.data["status"] == 200
    assert out.data["title"] == "Tea & Biscuits"


async def test_json_is_returned_verbatim(make_context) -> None:
    raw = '{"b": 2, "a": [1, 2.50, "x"],\n "nested": {"k": null}}'
    async with LoopbackServer() as server:
        server.queue(Reply(body=raw, headers={"content-type": "application/json"}))
        out = await tool().invoke({"url": server.url + "/api"}, make_context())
    assert not out.is_error
    assert out.text.endswith(raw)
    assert out.data["format"] == "json" and "json_valid" not in out.data


async def test_problem_json_and_invalid_json_are_flagged_not_rewritten(make_context) -> None:
    async with LoopbackServer() as server:
        server.queue(Reply(body="{oops", headers={"content-type": "application/problem+json"}))
        out = await tool().invoke({"url": server.url + "/api"}, make_context())
    assert not out.is_error and out.text.endswith("{oops")
    assert out.data["json_valid"] is False


async def test_plain_text_and_declared_charsets(make_context) -> None:
    latin = "caf\xe9 au lait".encode("latin-1")
    windows = '<html><head><meta charset="windows-1252"></head><p>na\xefve</p></html>'
    async with LoopbackServer() as server:
        server.queue(
            Reply(body=latin, headers={"content-type": "text/plain; charset=iso-8859-1"}),
            Reply(body=windows.encode("cp1252"), headers={"content-type": "text/html"}),
        )
        first = await tool().invoke({"url": server.url + "/a.txt"}, make_context())
        second = await tool().invoke({"url": server.url + "/b"}, make_context())
    assert "café au lait" in first.text and first.data["format"] == "text"
    assert "naïve" in second.text


async def test_binary_content_is_refused(make_context) -> None:
    async with LoopbackServer() as server:
        server.queue(
            Reply(body=b"\x89PNG\r\n\x1a\n\x00\x00", headers={"content-type": "image/png"})
        )
        out = await tool().invoke({"url": server.url + "/pic.png"}, make_context())
    assert out.is_error and "image/png" in out.text and "not a readable page" in out.text


async def test_untyped_bodies_are_sniffed(make_context) -> None:
    async with LoopbackServer() as server:
        server.queue(Reply(body='[{"id": 1}]'), Reply(body=b"\x00\x01\x02binary"))
        as_json = await tool().invoke({"url": server.url + "/j"}, make_context())
        as_bin = await tool().invoke({"url": server.url + "/b"}, make_context())
    assert as_json.data["format"] == "json" and as_json.text.endswith('[{"id": 1}]')
    assert as_bin.is_error


@pytest.mark.parametrize(
    ("status", "phrase"),
    [
        (404, "does not exist"),
        (403, "browser tool"),
        (401, "login"),
        (429, "rate-limiting"),
        (503, "server error"),
    ],
)
async def test_http_errors_say_what_to_do(make_context, status: int, phrase: str) -> None:
    async with LoopbackServer() as server:
        server.queue(Reply(status=status, body="nope"))
        out = await tool().invoke({"url": server.url + "/x"}, make_context())
    assert out.is_error and f"HTTP {status}" in out.text and phrase in out.text


async def test_long_pages_are_cut_at_max_chars_with_a_note(make_context) -> None:
    body = "<p>" + "word " * 5000 + "</p>"
    async with LoopbackServer() as server:
        server.queue(html(body))
        out = await tool().invoke({"url": server.url + "/long", "max_chars": 1000}, make_context())
    assert not out.is_error and out.data["truncated"] is True
    assert "[truncated:" in out.text and len(out.text) < 1300


async def test_a_page_with_no_text_points_at_the_browser(make_context) -> None:
    async with LoopbackServer() as server:
        server.queue(
            html('<html><body><div id="root"></div><script>render()</script></body></html>')
        )
        out = await tool().invoke({"url": server.url + "/spa"}, make_context())
    assert not out.is_error and "browser tool" in out.text


# --------------------------------------------------------------------------- caps and stalls


async def test_body_size_is_capped(make_context) -> None:
    async with LoopbackServer() as server:
        server.queue(Reply(body="x" * 50_000, headers={"content-type": "text/plain"}))
        page = await fetcher(max_bytes=4_000).fetch(server.url + "/big")
    assert page.truncated and len(page.body) == 4_000


async def test_a_gzip_bomb_inflates_only_to_the_cap(make_context) -> None:
    bomb = gzip.compress(b"\0" * 20_000_000)
    assert len(bomb) < 100_000
    async with LoopbackServer() as server:
        server.queue(
            Reply(body=bomb, headers={"content-type": "text/plain", "content-encoding": "gzip"})
        )
        page = await fetcher(max_bytes=64_000).fetch(server.url + "/bomb")
    assert page.truncated and len(page.body) == 64_000


async def test_gzip_and_raw_deflate_bodies_are_decoded(make_context) -> None:
    import zlib

    raw_deflate = zlib.compressobj(wbits=-15)
    deflated = raw_deflate.compress(b"deflated text") + raw_deflate.flush()
    async with LoopbackServer() as server:
        server.queue(
            Reply(
                body=gzip.compress(b"hello gzip"),
                headers={"content-type": "text/plain", "content-encoding": "gzip"},
            ),
            Reply(
                body=deflated, headers={"content-type": "text/plain", "content-encoding": "deflate"}
            ),
            Reply(body=b"???", headers={"content-type": "text/plain", "content-encoding": "br"}),
            Reply(
                body=b"not gzip", headers={"content-type": "text/plain", "content-encoding": "gzip"}
            ),
        )
        gz = await tool().invoke({"url": server.url + "/g"}, make_context())
        df = await tool().invoke({"url": server.url + "/d"}, make_context())
        br = await tool().invoke({"url": server.url + "/b"}, make_context())
        bad = await tool().invoke({"url": server.url + "/x"}, make_context())
    assert gz.text.endswith("hello gzip") and df.text.endswith("deflated text")
    assert br.is_error and "br-encoded" in br.text
    assert bad.is_error and "corrupt" in bad.text


async def test_a_stalled_server_hits_the_deadline(make_context) -> None:
    async with LoopbackServer() as server:
        server.queue(Reply(stall=True))
        out = await tool(total_timeout=0.3).invoke({"url": server.url + "/slow"}, make_context())
    assert out.is_error and "took longer than" in out.text


async def test_a_cut_connection_is_an_error_not_a_page(make_context) -> None:
    async with LoopbackServer() as server:
        server.queue(
            Reply(
                chunks=["<p>first part", "<p>second"],
                headers={"content-type": "text/html"},
                cut_after=1,
            )
        )
        out = await tool().invoke({"url": server.url + "/cut"}, make_context())
    assert out.is_error and "broke while reading" in out.text


async def test_a_refused_connection_is_reported(make_context) -> None:
    async with LoopbackServer() as server:
        url = server.url
    out = await tool().invoke({"url": url + "/gone"}, make_context())
    assert out.is_error and "Could not connect" in out.text


# --------------------------------------------------------------------------- pinning


async def test_host_header_and_pinned_address_for_a_named_host(make_context) -> None:
    resolve = pinned_resolver(["127.0.0.1"], ["10.0.0.1"])  # a rebinding second answer
    guard = SSRFGuard(resolve, allow_loopback_for_tests=True)
    async with LoopbackServer() as server:
        server.queue(html("<p>hello from docs</p>"))
        url = f"http://docs.example:{server.port}/intro"
        out = await WebFetch(WEB_FETCH, fetcher=fetcher(guard)).invoke({"url": url}, make_context())
    assert not out.is_error, out.text
    assert "hello from docs" in out.text
    assert server.requests[0].header("host") == f"docs.example:{server.port}"
    assert server.requests[0].path == "/intro"
    assert resolve.calls == ["docs.example"], "one lookup per hop: nothing left to rebind"
    assert out.data["final_url"] == url


async def test_every_redirect_hop_is_vetted_again(make_context) -> None:
    resolve = pinned_resolver(["127.0.0.1"], ["10.0.0.1"])
    guard = SSRFGuard(resolve, allow_loopback_for_tests=True)
    async with LoopbackServer() as server:
        server.queue(Reply(status=302, headers={"location": "/next"}))
        url = f"http://rebind.example:{server.port}/start"
        out = await WebFetch(WEB_FETCH, fetcher=fetcher(guard)).invoke({"url": url}, make_context())
    assert out.is_error and "resolves to 10.0.0.1" in out.text
    assert len(server.requests) == 1
    assert resolve.calls == ["rebind.example", "rebind.example"]


@pytest.mark.parametrize(
    "location",
    [
        "http://169.254.169.254/latest/meta-data/iam/security-credentials/",
        "http://10.0.0.5/admin",
        "http://0x0a000005/",
        "http://[::ffff:192.168.0.1]/",
        "http://metadata.google.internal/computeMetadata/v1/",
        "http://internal.example/",
        "file:///etc/passwd",
    ],
)
async def test_redirect_from_an_allowed_host_to_a_forbidden_one_is_refused(
    make_context, location: str
) -> None:
    resolve = pinned_resolver(["192.168.7.7"])
    guard = SSRFGuard(resolve, allow_loopback_for_tests=True)
    async with LoopbackServer() as server:
        server.queue(Reply(status=302, headers={"location": location}))
        out = await WebFetch(WEB_FETCH, fetcher=fetcher(guard)).invoke(
            {"url": server.url + "/go"}, make_context()
        )
    assert out.is_error and "Refused to fetch" in out.text
    assert len(server.requests) == 1


async def test_redirects_are_followed_and_bounded(make_context) -> None:
    async with LoopbackServer() as server:
        server.queue(
            Reply(status=301, headers={"location": "/b"}),
            Reply(status=307, headers={"location": f"{server.url}/c?x=1"}),
            html("<p>arrived</p>"),
        )
        out = await tool().invoke({"url": server.url + "/a"}, make_context())
        assert not out.is_error and "arrived" in out.text
        assert out.data["redirects"] == [server.url + "/b", server.url + "/c?x=1"]
        assert out.data["final_url"] == server.url + "/c?x=1"
        assert "(redirected from" in out.text

    async with LoopbackServer(
        lambda request: Reply(status=302, headers={"location": "/loop"})
    ) as loop:
        out = await tool().invoke({"url": loop.url + "/loop"}, make_context())
        assert out.is_error and "more than 5 times" in out.text
        assert len(loop.requests) == 6


async def test_a_redirect_without_location_is_an_error(make_context) -> None:
    async with LoopbackServer() as server:
        server.queue(Reply(status=302))
        out = await tool().invoke({"url": server.url + "/x"}, make_context())
    assert out.is_error and "without a usable redirect" in out.text


async def test_request_headers_are_plain_and_carry_no_credentials(make_context) -> None:
    async with LoopbackServer() as server:
        server.queue(html("<p>ok</p>"))
        await tool().invoke({"url": server.url + "/h"}, make_context())
    headers = server.requests[0].headers
    assert "authorization" not in headers and "cookie" not in headers
    assert "gzip" in headers["accept-encoding"] and "br" not in headers["accept-encoding"]
    assert headers["host"] == f"127.0.0.1:{server.port}"
    assert json.dumps(headers)  # nothing unprintable


class DisagreeingGuard(SSRFGuard):
    """A guard whose idea of the host differs from httpx's (a URL-parser differential)."""

    async def vet(self, url: str) -> Target:
        return Target("http", "other.example", 80, ("127.0.0.1",))


async def test_a_parser_disagreement_about_the_host_is_refused(make_context) -> None:
    async with LoopbackServer() as server:
        out = await WebFetch(WEB_FETCH, fetcher=fetcher(DisagreeingGuard())).invoke(
            {"url": server.url + "/x"}, make_context()
        )
    assert out.is_error and "ambiguous" in out.text
    assert server.requests == []


def test_same_host_compares_names_and_literal_spellings() -> None:
    import httpx

    target = Target("http", "a.example", 80, ("93.184.216.34",))
    assert _same_host(httpx.URL("http://A.Example./p"), target)
    assert not _same_host(httpx.URL("http://b.example/"), target)
    literal = Target("http", "127.0.0.1", 80, ("127.0.0.1",), literal=True)
    assert _same_host(httpx.URL("http://2130706433/"), literal)
    assert not _same_host(httpx.URL("http://10.0.0.1/"), literal)
