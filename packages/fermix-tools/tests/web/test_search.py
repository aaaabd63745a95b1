"""``web_search`` against loopback stand-ins for DuckDuckGo and the keyed backends.

Config is real (a ``config.toml`` in a scratch home, loaded against a registry that holds
the web plugin), keys come through the real secret resolver, and the trace is a real
``Tracer`` writing JSONL — so the degrade path is checked the way an operator would see it.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import pytest
from fermix_core.config import LoadedConfig, load_config
from fermix_core.home import FermixHome
from fermix_core.hookspecs import hookimpl
from fermix_core.plugins import PluginHost, SpecRegistry
from fermix_core.specs import WebSearchBackendSpec
from fermix_core.testing import ToolContract
from fermix_core.testing.loopback import LoopbackServer, Reply, ThreadedLoopback
from fermix_core.traces import Tracer
from fermix_tools.web import plugin as web_plugin
from fermix_tools.web.backends.base import SearchBackendError, SearchHit
from fermix_tools.web.backends.duckduckgo import DuckDuckGoSearch, parse_results, real_url
from fermix_tools.web.backends.keyed import BraveSearch, ExaSearch, FirecrawlSearch, TavilySearch
from fermix_tools.web.plugin import WEB_SEARCH
from fermix_tools.web.search import WebSearch

pytestmark = pytest.mark.anyio

DATA = Path(__file__).parent / "data"
RESULTS = (DATA / "ddg_results.html").read_text(encoding="utf-8")
NO_RESULTS = (DATA / "ddg_no_results.html").read_text(encoding="utf-8")
KEY = "brv-test-key-0123456789"


def ddg_page(body: str = RESULTS, status: int = 200) -> Reply:
    return Reply(status=status, body=body, headers={"content-type": "text/html; charset=utf-8"})


class BrokenBackend:
    """A third-party backend with a bug: its search raises something that is not ours."""

    def __init__(self, **options: Any) -> None:
        pass

    async def search(self, query: str, *, max_results: int) -> list[SearchHit]:
        raise KeyError("results")


class ExtraBackends:
    @hookimpl
    def fermix_web_search_backends(self):
        yield WebSearchBackendSpec(name="broken", factory=BrokenBackend, keyless=True)
        yield WebSearchBackendSpec(name="ghost", factory="no_such_module.anywhere:Backend")


@pytest.fixture
def registry() -> SpecRegistry:
    host = PluginHost()
    host.register(web_plugin, "tools.web", distribution="fermix-tools", version="0.1.0")
    host.register(ExtraBackends(), "tools.extra", distribution="fermix-extra", version="1.0")
    registry = host.collect()
    assert registry.errors == []
    return registry


@pytest.fixture
def configure(fermix_home: FermixHome, registry: SpecRegistry) -> Callable[..., LoadedConfig]:
    def write(text: str = "", environ: dict[str, str] | None = None) -> LoadedConfig:
        fermix_home.config_file.write_text(text, encoding="utf-8")
        return load_config(fermix_home, registry, environ=environ or {})

    return write


def search_tool(**urls: str) -> WebSearch:
    return WebSearch(WEB_SEARCH, base_urls=urls, environ={})


# --------------------------------------------------------------------------- contract

_CONTRACT: dict[str, str] = {}


@pytest.fixture(scope="module", autouse=True)
def contract_server():
    with ThreadedLoopback(lambda request: ddg_page()) as server:
        _CONTRACT["url"] = server.url
        yield


class TestWebSearchContract(ToolContract):
    valid_args: ClassVar[dict[str, Any]] = {"query": "green tea temperature"}
    invalid_args: ClassVar[dict[str, Any]] = {"query": "", "max_results": 99}
    invalid_field: ClassVar[str] = "query"

    def make_tool(self) -> WebSearch:
        return search_tool(duckduckgo=_CONTRACT["url"])


# --------------------------------------------------------------------------- DuckDuckGo


def test_results_page_is_parsed_without_ads_duplicates_or_odd_links() -> None:
    hits = parse_results(RESULTS, 10)
    assert hits is not None
    assert [h.url for h in hits] == [
        "https://tea.example/guide/green?lang=en",
        "https://en.wikipedia.example/wiki/Green_tea",
        "https://kettles.example/chart",
    ]
    assert hits[0].title == "How to Brew Green Tea & Why Temperature Matters"
    assert hits[0].snippet.startswith("Steep green tea at 70–80 °C")
    assert hits[2].snippet.startswith("A chart of temperatures")
    assert parse_results(RESULTS, 2) == hits[:2]


def test_no_results_page_and_unknown_pages_are_told_apart() -> None:
    assert parse_results(NO_RESULTS, 5) == []
    assert parse_results("<html><body><h1>Welcome</h1></body></html>", 5) is None
    changed = '<div class="results"><div class="result"><span>layout moved</span></div></div>'
    assert parse_results(changed, 5) is None


@pytest.mark.parametrize(
    ("href", "url"),
    [
        ("//duckduckgo.com/l/?uddg=https%3A%2F%2Fa.example%2Fx&rut=1", "https://a.example/x"),
        ("/l/?uddg=http%3A%2F%2Fb.example%2F", "http://b.example/"),
        ("https://c.example/page", "https://c.example/page"),
        ("https://duckduckgo.com/y.js?ad_domain=x", None),
        ("//duckduckgo.com/l/?rut=missing-target", None),
        ("//duckduckgo.com/l/?uddg=javascript%3Aalert(1)", None),
        ("mailto:someone@example.com", None),
    ],
)
def test_result_links_are_decoded(href: str, url: str | None) -> None:
    assert real_url(href) == url


async def test_default_backend_is_keyless_duckduckgo(make_context) -> None:
    async with LoopbackServer() as ddg:
        ddg.queue(ddg_page())
        out = await search_tool(duckduckgo=ddg.url).invoke(
            {"query": "green tea temperature", "max_results": 2}, make_context()
        )
    assert not out.is_error, out.text
    assert out.data["backend"] == "duckduckgo" and out.data["degraded"] is False
    assert len(out.data["results"]) == 2
    assert "1. How to Brew Green Tea" in out.text and "https://tea.example/guide/green" in out.text
    request = ddg.requests[0]
    assert request.method == "POST" and request.path == "/html/"
    assert b"q=green+tea+temperature" in request.body
    assert "authorization" not in request.headers


async def test_duckduckgo_with_no_results_is_an_answer(make_context) -> None:
    async with LoopbackServer() as ddg:
        ddg.queue(ddg_page(NO_RESULTS))
        out = await search_tool(duckduckgo=ddg.url).invoke({"query": "qzxqzxqzx"}, make_context())
    assert not out.is_error and out.data["results"] == []
    assert "No results" in out.text


async def test_duckduckgo_challenge_and_outage_are_errors(make_context) -> None:
    challenge = '<html><body><div class="anomaly-modal">Select all squares</div></body></html>'
    async with LoopbackServer() as ddg:
        ddg.queue(ddg_page(challenge, status=202), ddg_page(status=503))
        blocked = await search_tool(duckduckgo=ddg.url).invoke({"query": "x"}, make_context())
        down = await search_tool(duckduckgo=ddg.url).invoke({"query": "x"}, make_context())
    assert blocked.is_error and "challenging automated requests" in blocked.text
    assert down.is_error and "HTTP 503" in down.text
    assert "degraded" not in blocked.text


# --------------------------------------------------------------------------- keyed backends


async def test_brave_sends_its_key_and_maps_results(make_context, configure) -> None:
    config = configure(
        f'[fermix_core.tools.web_search]\nbackend = "brave"\napi_key = "{KEY}"\nmax_results = 3\n'
    )
    body = {
        "web": {
            "results": [
                {
                    "title": "<strong>Tea</strong> guide",
                    "url": "https://t.example/",
                    "description": "All <strong>about</strong> tea",
                },
                {"title": "No URL here"},
                {"title": "Second", "url": "https://s.example/", "description": "More"},
            ]
        }
    }
    async with LoopbackServer() as brave:
        brave.queue(Reply(body=body))
        out = await search_tool(brave=brave.url).invoke(
            {"query": "tea"}, make_context(services={"config": config})
        )
    assert not out.is_error, out.text
    assert out.data["backend"] == "brave" and out.data["degraded"] is False
    assert out.data["results"][0] == {
        "title": "Tea guide",
        "url": "https://t.example/",
        "snippet": "All about tea",
    }
    request = brave.requests[0]
    assert request.path.startswith("/res/v1/web/search?") and "count=3" in request.path
    assert request.header("x-subscription-token") == KEY
    assert KEY not in out.text and KEY not in json.dumps(out.data)


async def test_the_key_comes_from_the_backends_environment_variable(
    make_context, registry, fermix_home
) -> None:
    fermix_home.config_file.write_text('[fermix_core.tools.web_search]\nbackend = "tavily"\n')
    config = load_config(fermix_home, registry, environ={"TAVILY_API_KEY": "tvly-env"})
    async with LoopbackServer() as tavily:
        tavily.queue(
            Reply(body={"results": [{"title": "T", "url": "https://t.example/", "content": "c"}]})
        )
        tool = WebSearch(
            WEB_SEARCH, base_urls={"tavily": tavily.url}, environ={"TAVILY_API_KEY": "tvly-env"}
        )
        out = await tool.invoke({"query": "tea"}, make_context(services={"config": config}))
    assert not out.is_error and out.data["backend"] == "tavily"
    assert tavily.requests[0].header("authorization") == "Bearer tvly-env"
    assert tavily.requests[0].json() == {"query": "tea", "max_results": 5, "search_depth": "basic"}


async def test_exa_and_firecrawl_request_and_response_shapes() -> None:
    async with LoopbackServer() as server:
        server.queue(
            Reply(
                body={
                    "results": [
                        {"title": "E", "url": "https://e.example/", "highlights": ["one", "two"]}
                    ]
                }
            ),
            Reply(
                body={
                    "success": True,
                    "data": {
                        "web": [{"title": "F", "url": "https://f.example/", "description": "d"}]
                    },
                }
            ),
            Reply(body={"success": True, "data": [{"title": "Old", "url": "https://o.example/"}]}),
        )
        exa = await ExaSearch(api_key="exa-k", base_url=server.url).search("q", max_results=4)
        fire = await FirecrawlSearch(api_key="fc-k", base_url=server.url).search("q", max_results=4)
        old = await FirecrawlSearch(api_key="fc-k", base_url=server.url).search("q", max_results=4)
    assert exa == [SearchHit("E", "https://e.example/", "one … two")]
    assert fire == [SearchHit("F", "https://f.example/", "d")]
    assert old == [SearchHit("Old", "https://o.example/", "")]
    exa_request, fire_request, _ = server.requests
    assert exa_request.path == "/search" and exa_request.header("x-api-key") == "exa-k"
    assert exa_request.json()["numResults"] == 4
    assert (
        fire_request.path == "/v2/search" and fire_request.header("authorization") == "Bearer fc-k"
    )
    assert fire_request.json() == {"query": "q", "limit": 4}


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (401, "auth"),
        (403, "auth"),
        (402, "credits"),
        (429, "rate_limit"),
        (500, "server"),
        (400, "request"),
    ],
)
async def test_http_statuses_map_to_error_kinds(status: int, kind: str) -> None:
    async with LoopbackServer() as server:
        server.queue(Reply(status=status, body={"error": f"bad key {KEY}"}))
        with pytest.raises(SearchBackendError) as info:
            await BraveSearch(api_key=KEY, base_url=server.url).search("q", max_results=3)
    assert info.value.kind == kind and info.value.status == status
    assert KEY not in str(info.value) and KEY not in info.value.reason
    assert info.value.degrades is (kind != "request")


@pytest.mark.parametrize(
    "body",
    [b"<html>not json</html>", b"[1, 2]", b'{"web": "nope"}', b'{"web": {"results": {"a": 1}}}'],
)
async def test_malformed_api_responses_are_bad_responses(body: bytes) -> None:
    async with LoopbackServer() as server:
        server.queue(Reply(body=body, headers={"content-type": "application/json"}))
        with pytest.raises(SearchBackendError) as info:
            await BraveSearch(api_key=KEY, base_url=server.url).search("q", max_results=3)
    assert info.value.kind == "bad_response"


async def test_a_keyed_backend_without_a_key_fails_before_any_request() -> None:
    async with LoopbackServer() as server:
        with pytest.raises(SearchBackendError) as info:
            await TavilySearch(api_key=None, base_url=server.url).search("q", max_results=3)
    assert info.value.kind == "missing_key" and server.requests == []


# --------------------------------------------------------------------------- degrading


def trace_events(home: FermixHome) -> list[dict[str, Any]]:
    records = []
    for path in (home.path / "traces").glob("*/agent_event.jsonl"):
        records += [json.loads(line) for line in path.read_text().splitlines()]
    return records


@pytest.mark.parametrize(
    ("status", "kind"), [(401, "auth"), (403, "auth"), (402, "credits"), (502, "server")]
)
async def test_a_broken_keyed_backend_degrades_once_and_loudly(
    make_context, configure, fermix_home, caplog, status: int, kind: str
) -> None:
    config = configure(f'[fermix_core.tools.web_search]\nbackend = "brave"\napi_key = "{KEY}"\n')
    tracer = Tracer(fermix_home, capture_content=False)
    async with LoopbackServer() as brave, LoopbackServer() as ddg:
        brave.queue(Reply(status=status, body={"message": "no"}))
        ddg.queue(ddg_page())
        tool = search_tool(brave=brave.url, duckduckgo=ddg.url)
        with caplog.at_level(logging.WARNING, logger="fermix.tools.web_search"):
            out = await tool.invoke(
                {"query": "green tea"},
                make_context(services={"config": config, "tracer": tracer}, session_id="main-7"),
            )
    tracer.close()
    assert not out.is_error, out.text
    assert out.data["degraded"] is True and out.data["backend"] == "duckduckgo"
    assert out.data["primary_backend"] == "brave"
    assert out.data["fallback_reason"] == f"{kind}: HTTP {status}"
    assert len(out.data["results"]) == 3
    assert out.text.startswith("Note: the configured search backend 'brave' failed")
    assert len(brave.requests) == 1 and len(ddg.requests) == 1, "one try each: degrade once"
    assert any("degrading to duckduckgo" in r.getMessage() for r in caplog.records)
    assert all(KEY not in r.getMessage() for r in caplog.records)
    events = [e for e in trace_events(fermix_home) if e.get("event") == "web_search.degraded"]
    assert len(events) == 1
    assert events[0]["session_id"] == "main-7"
    assert events[0]["primary_backend"] == "brave" and events[0]["degraded"] is True
    assert events[0]["fallback_reason"] == f"{kind}: HTTP {status}"


async def test_an_unreachable_backend_degrades(make_context, configure) -> None:
    config = configure(f'[fermix_core.tools.web_search]\nbackend = "exa"\napi_key = "{KEY}"\n')
    async with LoopbackServer() as closed:
        dead_url = closed.url
    async with LoopbackServer() as ddg:
        ddg.queue(ddg_page())
        out = await search_tool(exa=dead_url, duckduckgo=ddg.url).invoke(
            {"query": "tea"}, make_context(services={"config": config})
        )
    assert out.data["degraded"] is True and out.data["fallback_reason"].startswith("transport")


async def test_a_missing_key_degrades(make_context, configure) -> None:
    config = configure('[fermix_core.tools.web_search]\nbackend = "firecrawl"\n')
    async with LoopbackServer() as firecrawl, LoopbackServer() as ddg:
        ddg.queue(ddg_page())
        out = await search_tool(firecrawl=firecrawl.url, duckduckgo=ddg.url).invoke(
            {"query": "tea"}, make_context(services={"config": config})
        )
    assert out.data["degraded"] is True and out.data["fallback_reason"].startswith("missing_key")
    assert firecrawl.requests == []


async def test_broken_and_missing_plugin_backends_degrade(make_context, configure) -> None:
    for name in ("broken", "ghost"):
        config = configure(f'[fermix_core.tools.web_search]\nbackend = "{name}"\n')
        async with LoopbackServer() as ddg:
            ddg.queue(ddg_page())
            out = await search_tool(duckduckgo=ddg.url).invoke(
                {"query": "tea"}, make_context(services={"config": config})
            )
        assert not out.is_error, out.text
        assert out.data["degraded"] is True and out.data["primary_backend"] == name
        assert out.data["fallback_reason"].startswith("unavailable")


async def test_empty_results_do_not_degrade(make_context, configure) -> None:
    config = configure(f'[fermix_core.tools.web_search]\nbackend = "brave"\napi_key = "{KEY}"\n')
    async with LoopbackServer() as brave, LoopbackServer() as ddg:
        brave.queue(Reply(body={"web": {"results": []}}))
        out = await search_tool(brave=brave.url, duckduckgo=ddg.url).invoke(
            {"query": "qzxqzx"}, make_context(services={"config": config})
        )
    assert not out.is_error and out.data["degraded"] is False
    assert out.data["backend"] == "brave" and out.data["results"] == []
    assert ddg.requests == []


async def test_a_rejected_request_does_not_degrade(make_context, configure) -> None:
    config = configure(f'[fermix_core.tools.web_search]\nbackend = "brave"\napi_key = "{KEY}"\n')
    async with LoopbackServer() as brave, LoopbackServer() as ddg:
        brave.queue(Reply(status=422, body={"error": "query too long"}))
        out = await search_tool(brave=brave.url, duckduckgo=ddg.url).invoke(
            {"query": "x"}, make_context(services={"config": config})
        )
    assert out.is_error and "HTTP 422" in out.text and ddg.requests == []


async def test_when_the_fallback_fails_too_both_reasons_are_reported(
    make_context, configure
) -> None:
    config = configure(f'[fermix_core.tools.web_search]\nbackend = "brave"\napi_key = "{KEY}"\n')
    async with LoopbackServer() as brave, LoopbackServer() as ddg:
        brave.queue(Reply(status=401))
        ddg.queue(ddg_page(status=500))
        out = await search_tool(brave=brave.url, duckduckgo=ddg.url).invoke(
            {"query": "x"}, make_context(services={"config": config})
        )
    assert out.is_error
    assert "'brave' failed (auth: HTTP 401)" in out.text and "server: HTTP 500" in out.text
    assert KEY not in out.text


async def test_ddg_backend_class_is_usable_on_its_own() -> None:
    async with LoopbackServer() as ddg:
        ddg.queue(ddg_page())
        hits = await DuckDuckGoSearch(base_url=ddg.url).search("tea", max_results=1)
    assert [h.url for h in hits] == ["https://tea.example/guide/green?lang=en"]
    assert "api_key" not in repr(DuckDuckGoSearch(api_key="secret-value"))
    assert "secret-value" not in repr(BraveSearch(api_key="secret-value"))


async def test_blank_queries_are_refused(make_context) -> None:
    out = await search_tool(duckduckgo="http://127.0.0.1:9").invoke(
        {"query": "   "}, make_context()
    )
    assert out.is_error and "blank" in out.text


def test_the_plugin_registers_five_backends_with_their_key_variables() -> None:
    names = {spec.name for spec in web_plugin.BACKENDS}
    assert names == {"duckduckgo", "brave", "exa", "tavily", "firecrawl"}
    keyed = {spec.name: spec.env_var for spec in web_plugin.BACKENDS if not spec.keyless}
    assert keyed == {
        "brave": "BRAVE_API_KEY",
        "exa": "EXA_API_KEY",
        "tavily": "TAVILY_API_KEY",
        "firecrawl": "FIRECRAWL_API_KEY",
    }


def test_the_web_plugin_registers_both_tools(registry: SpecRegistry) -> None:
    from fermix_core.specs import PolicyClass, ToolSpec

    tools = registry.typed(ToolSpec)
    assert {"web_fetch", "web_search"} <= set(tools)
    assert all(tools[name].policy is PolicyClass.NETWORK for name in ("web_fetch", "web_search"))
    assert set(registry.typed(WebSearchBackendSpec)) >= {"duckduckgo", "brave", "exa"}
