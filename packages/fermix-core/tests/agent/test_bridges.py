from __future__ import annotations

import json

import pytest
from fermix_core.agent.bm25 import BM25Index, tokenize
from fermix_core.agent.capabilities import CapabilityRegistry
from fermix_core.specs import PolicyClass
from fermix_core.tool import Trust

pytestmark = pytest.mark.anyio


def caps_for(kit, trust=Trust.OPERATOR):
    return CapabilityRegistry(kit.standard_specs(), sources=kit.sources).snapshot(trust)


# ---------------------------------------------------------------------- BM25


def test_tokenize_splits_identifiers_and_folds_plurals():
    assert tokenize("gmail_search sendEmail Entries the messages") == [
        "gmail",
        "search",
        "send",
        "email",
        "entry",
        "message",
    ]


def test_bm25_ranks_the_most_specific_document_first():
    index = BM25Index(
        [
            ("mail", "search email messages in the inbox"),
            ("calendar", "list calendar events for a day"),
            ("drive", "search files in drive; files and folders"),
        ]
    )
    assert [key for key, _ in index.search("email", 5)] == ["mail"]
    ranked = [key for key, _ in index.search("search files", 5)]
    assert ranked[0] == "drive"
    assert set(ranked) == {"drive", "mail"}
    assert index.search("weather", 5) == []
    assert index.search("the and of", 5) == []
    assert index.search("email", 0) == []


def test_bm25_over_an_empty_catalog_finds_nothing():
    index = BM25Index([])
    assert len(index) == 0
    assert index.search("anything") == []


# ---------------------------------------------------------------------- tool_search


async def test_tool_search_finds_deferred_tools_by_meaning_words(kit, ctx):
    caps = caps_for(kit)
    search = caps.tool("tool_search")
    out = await search.invoke({"query": "email inbox"}, ctx)
    assert not out.is_error
    assert out.data["matches"][0] == "gmail_search"
    assert "gmail_search — Search the owner's email messages in Gmail." in out.text
    rain = await search.invoke({"query": "will it rain tomorrow"}, ctx)
    assert rain.data["matches"] == ["weather_lookup"]


async def test_tool_search_only_searches_the_deferred_catalog(kit, ctx):
    out = await caps_for(kit).tool("tool_search").invoke({"query": "repeat text back"}, ctx)
    assert out.data["matches"] == []
    assert "No deferred tool matches" in out.text
    assert "gmail_search" in out.text  # the miss lists what can be searched


async def test_guest_search_cannot_find_owner_or_plugin_tools(kit, guest_ctx):
    caps = caps_for(kit, Trust.GUEST)
    search = caps.tool("tool_search")
    for query in ("email gmail", "scheduled job runs"):
        out = await search.invoke({"query": query}, guest_ctx)
        assert out.data["matches"] == []
        assert "gmail_search" not in out.text
        assert "job_runs" not in out.text


async def test_tool_search_rejects_bad_arguments_readably(kit, ctx):
    out = await caps_for(kit).tool("tool_search").invoke({"query": "", "limit": 99}, ctx)
    assert out.is_error
    assert "query" in out.text and "limit" in out.text


# ---------------------------------------------------------------------- tool_describe


async def test_tool_describe_returns_the_full_schema(kit, ctx):
    out = await caps_for(kit).tool("tool_describe").invoke({"name": "weather_lookup"}, ctx)
    assert not out.is_error
    assert out.data["schema"]["properties"]["text"]["type"] == "string"
    assert "Use for rain, temperature or wind questions." in out.text
    assert json.loads(out.text.split("## Arguments (JSON schema)\n", 1)[1].split("\n\n")[0])


async def test_guest_cannot_describe_a_tool_it_cannot_call(kit, guest_ctx):
    describe = caps_for(kit, Trust.GUEST).tool("tool_describe")
    for hidden in ("gmail_search", "job_runs", "shell"):
        out = await describe.invoke({"name": hidden}, guest_ctx)
        assert out.is_error
        assert f"No tool named {hidden!r} is available" in out.text
        assert "schema" not in out.data


# ---------------------------------------------------------------------- tool_call


async def test_tool_call_invokes_a_deferred_tool_when_run_directly(kit, ctx):
    bridge = caps_for(kit).tool("tool_call")
    out = await bridge.invoke({"name": "gmail_search", "arguments": {"text": "invoice"}}, ctx)
    assert out.text == "gmail_search: invoice"
    assert ctx.state["calls"] == [("gmail_search", {"text": "invoice"})]


async def test_tool_call_accepts_arguments_as_a_json_string(kit, ctx):
    bridge = caps_for(kit).tool("tool_call")
    out = await bridge.invoke({"name": "weather_lookup", "arguments": '{"text": "Oslo"}'}, ctx)
    assert out.text == "weather_lookup: Oslo"
    bad = await bridge.invoke({"name": "weather_lookup", "arguments": "{oops"}, ctx)
    assert bad.is_error and "not valid JSON" in bad.text


async def test_tool_call_refuses_itself_and_unavailable_tools(kit, guest_ctx):
    bridge = caps_for(kit, Trust.GUEST).tool("tool_call")
    nested = await bridge.invoke({"name": "tool_call", "arguments": {}}, guest_ctx)
    assert nested.is_error and "cannot run tool_call" in nested.text
    hidden = await bridge.invoke({"name": "shell", "arguments": {}}, guest_ctx)
    assert hidden.is_error and "No tool named 'shell'" in hidden.text
    assert "calls" not in guest_ctx.state


async def test_bridges_expose_their_own_specs_for_tool_help(kit):
    caps = caps_for(kit)
    spec = caps.specs["tool_call"]
    assert spec.policy is PolicyClass.READ_ONLY
    assert spec.description and spec.guidance
    assert caps.definition("tool_search").parameters["properties"]["query"]["type"] == "string"
