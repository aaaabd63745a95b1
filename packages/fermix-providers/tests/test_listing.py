"""Live model listings (OpenRouter, Ollama) and the Ollama context probe, over real sockets."""

from __future__ import annotations

import httpx
import pytest
from fermix_core.testing.loopback import LoopbackServer, RecordedRequest, Reply
from fermix_providers.listing import (
    ModelListing,
    list_models,
    list_ollama_models,
    list_openrouter_models,
    ollama_compat_base,
    ollama_native_root,
    probe_ollama,
)

pytestmark = pytest.mark.anyio

SECRET = "sk-or-listing-secret"


def or_model(model_id, created, params, *, modalities=("text",), context=100_000):
    return {
        "id": model_id,
        "name": model_id.split("/")[-1].title(),
        "created": created,
        "context_length": context,
        "architecture": {"input_modalities": list(modalities)},
        "supported_parameters": params,
    }


OPENROUTER_CATALOG = {
    "data": [
        or_model("old/tool-model", 1_600_000_000, ["tools", "temperature"]),
        or_model("new/vision-model", 1_790_000_000, ["tools"], modalities=("text", "image")),
        or_model("mid/no-tools", 1_700_000_000, ["temperature"]),
        or_model("anthropic/claude-sonnet-4.6", 1_780_000_000, ["tools", "reasoning"], context=1),
        {"id": "broken/no-params", "created": 1_800_000_000},
        "not-a-model",
        or_model("tie/b", 1_650_000_000, ["tools"]),
        or_model("tie/a", 1_650_000_000, ["tools"]),
    ]
}


# --------------------------------------------------------------------------- OpenRouter


async def test_openrouter_keeps_tool_models_newest_first() -> None:
    async with LoopbackServer() as server:
        server.queue(Reply(body=OPENROUTER_CATALOG))
        listing = await list_openrouter_models(base_url=f"{server.url}/api/v1")
    assert listing.ok and listing.error is None
    assert listing.ids == [
        "new/vision-model",
        "anthropic/claude-sonnet-4.6",
        "tie/a",
        "tie/b",
        "old/tool-model",
    ]
    [sent] = server.requests
    assert (sent.method, sent.path) == ("GET", "/api/v1/models")
    assert sent.header("authorization") is None, "the list is public; no key unless given"
    by_id = {m.id: m for m in listing.models}
    assert by_id["new/vision-model"].vision is True
    assert by_id["old/tool-model"].vision is False
    assert by_id["new/vision-model"].created == 1_790_000_000
    assert by_id["old/tool-model"].context_window == 100_000
    # The static catalog stays authoritative for windows it knows.
    assert by_id["anthropic/claude-sonnet-4.6"].context_window == 200_000


async def test_openrouter_with_key_and_shared_client() -> None:
    async with LoopbackServer() as server, httpx.AsyncClient() as client:
        server.queue(Reply(body={"data": []}))
        listing = await list_models(
            "openrouter", base_url=f"{server.url}/api/v1/", api_key=SECRET, client=client
        )
        assert not client.is_closed
    assert listing == ModelListing(models=())
    assert server.requests[0].header("authorization") == f"Bearer {SECRET}"


@pytest.mark.parametrize(
    ("reply", "needle"),
    [
        (
            Reply(status=500, body={"error": {"message": "upstream down"}}),
            "HTTP 500: upstream down",
        ),
        (Reply(status=401, body={"error": {"message": "No auth credentials found"}}), "HTTP 401"),
        (Reply(body="<html>captive portal</html>"), "not JSON"),
        (Reply(body={"models": []}), "no 'data' array"),
    ],
)
async def test_openrouter_failures_return_the_error_text(reply, needle) -> None:
    async with LoopbackServer() as server:
        server.queue(reply)
        listing = await list_openrouter_models(base_url=f"{server.url}/api/v1", api_key=SECRET)
    assert not listing.ok
    assert listing.models == ()
    assert needle in listing.error
    assert SECRET not in listing.error


async def test_openrouter_unreachable_and_stalled() -> None:
    async with LoopbackServer() as server:
        url = server.url
    listing = await list_openrouter_models(base_url=url)
    assert not listing.ok
    assert "could not fetch the OpenRouter model list" in listing.error

    async with LoopbackServer() as server:
        server.queue(Reply(stall=True))
        async with httpx.AsyncClient() as client:
            stalled = await list_openrouter_models(
                client, base_url=server.url, api_key=SECRET, timeout=0.3
            )
    assert not stalled.ok
    assert "ReadTimeout" in stalled.error
    assert SECRET not in stalled.error


# --------------------------------------------------------------------------- Ollama tags


TAGS = {
    "models": [
        {"name": "qwen3:latest", "model": "qwen3:latest", "details": {"parameter_size": "8.2B"}},
        {"name": "gemma3:12b", "model": "gemma3:12b", "details": {"parameter_size": "12.2B"}},
        {"name": "mistral-nemo:latest", "model": "mistral-nemo:latest", "details": {}},
        {"model": "llama3.2-vision:latest"},
        {"name": ""},
        42,
    ]
}


async def test_ollama_lists_local_models_by_name() -> None:
    async with LoopbackServer() as server:
        server.queue(Reply(body=TAGS))
        listing = await list_ollama_models(f"{server.url}/v1")
    assert listing.ok
    assert listing.ids == ["gemma3:12b", "llama3.2-vision", "mistral-nemo", "qwen3"]
    assert server.requests[0].path == "/api/tags"
    by_id = {m.id: m for m in listing.models}
    assert by_id["qwen3"].label == "qwen3 (8.2B)"
    assert by_id["qwen3"].vision is False
    assert by_id["qwen3"].context_window == 40_960
    assert by_id["gemma3:12b"].vision is True, "a sized tag inherits its family's vision"
    assert by_id["llama3.2-vision"].vision is True
    assert by_id["mistral-nemo"].vision is None, "unknown to the catalog: unknown"


async def test_ollama_unreachable_names_the_fix() -> None:
    async with LoopbackServer() as server:
        url = server.url
    listing = await list_models("ollama", base_url=url)
    assert listing is not None and not listing.ok
    assert "cannot reach Ollama" in listing.error
    assert "ollama serve" in listing.error


@pytest.mark.parametrize(
    ("reply", "needle"),
    [
        (Reply(status=404, body="404 page not found"), "an Ollama server?"),
        (Reply(body="hello"), "not JSON"),
        (Reply(body={"models": "nope"}), "without a model list"),
    ],
)
async def test_ollama_odd_answers(reply, needle) -> None:
    async with LoopbackServer() as server:
        server.queue(reply)
        listing = await list_ollama_models(server.url)
    assert not listing.ok
    assert needle in listing.error


async def test_providers_without_a_live_list() -> None:
    assert await list_models("mistral") is None


def test_ollama_url_forms() -> None:
    assert ollama_native_root("http://h:11434/v1/") == "http://h:11434"
    assert ollama_native_root("http://h:11434") == "http://h:11434"
    assert ollama_native_root(None) == "http://localhost:11434"
    assert ollama_compat_base("http://h:11434") == "http://h:11434/v1"
    assert ollama_compat_base("http://h:11434/") == "http://h:11434/v1"
    assert ollama_compat_base("http://h:11434/v1") == "http://h:11434/v1"
    assert ollama_compat_base("https://proxy.test/ollama/v1") == "https://proxy.test/ollama/v1"


# --------------------------------------------------------------------------- Ollama probe


def show(num_ctx=None, trained=40_960, arch="qwen3"):
    parameters = 'stop                           "<|im_start|>"\ntemperature                    0.6'
    if num_ctx is not None:
        parameters += f"\nnum_ctx                        {num_ctx}"
    return {
        "parameters": parameters,
        "model_info": {"general.architecture": arch, f"{arch}.context_length": trained},
        "capabilities": ["completion", "tools"],
    }


def ollama(show_reply: Reply, ps: dict | None = None):
    def handle(request: RecordedRequest) -> Reply:
        if request.path == "/api/show":
            return show_reply
        if request.path == "/api/ps" and ps is not None:
            return Reply(body=ps)
        return Reply(status=404, body="404 page not found")

    return handle


async def probe(handler, window=40_960, model="qwen3"):
    async with LoopbackServer(handler) as server:
        result = await probe_ollama(f"{server.url}/v1", model, window, None)
    return result, server.requests


async def test_probe_fails_loud_when_num_ctx_is_below_the_window() -> None:
    result, requests = await probe(ollama(Reply(body=show(num_ctx=4096))))
    assert not result.ok
    assert result.served_context == 4096
    assert "4096" in result.message and "40960" in result.message
    assert "OLLAMA_CONTEXT_LENGTH=40960" in result.fix
    assert "num_ctx 40960" in result.fix
    assert requests[0].path == "/api/show"
    assert requests[0].json() == {"model": "qwen3"}


async def test_probe_ok_when_the_modelfile_pins_enough() -> None:
    result, requests = await probe(ollama(Reply(body=show(num_ctx=65536))))
    assert result.ok and result.verified
    assert result.served_context == 65536
    assert result.fix is None
    assert [r.path for r in requests] == ["/api/show"], "no /api/ps needed when pinned"


async def test_probe_404_means_pull_the_model() -> None:
    reply = Reply(status=404, body={"error": "model 'qwen3' not found"})
    result, _ = await probe(ollama(reply))
    assert not result.ok
    assert result.fix == "ollama pull qwen3"


async def test_probe_reads_the_loaded_allocation_when_nothing_is_pinned() -> None:
    loaded = {"models": [{"name": "qwen3:latest", "model": "qwen3:latest", "context_length": 4096}]}
    result, requests = await probe(ollama(Reply(body=show()), ps=loaded))
    assert not result.ok
    assert result.served_context == 4096
    assert "ollama ps" in result.message
    assert [r.path for r in requests] == ["/api/show", "/api/ps"]

    roomy = {
        "models": [{"name": "qwen3:latest", "model": "qwen3:latest", "context_length": 131072}]
    }
    result, _ = await probe(ollama(Reply(body=show(trained=131072)), ps=roomy))
    assert result.ok and result.served_context == 131072


async def test_probe_unverifiable_default_context_fails_with_the_fix() -> None:
    other = {"models": [{"name": "gemma3:12b", "context_length": 131072}]}
    result, _ = await probe(ollama(Reply(body=show()), ps=other))
    assert not result.ok
    assert not result.verified
    assert result.served_context is None
    assert "OLLAMA_CONTEXT_LENGTH" in result.fix
    # An older server without /api/ps reads the same way.
    result, _ = await probe(ollama(Reply(body=show())))
    assert not result.ok and not result.verified


async def test_probe_model_smaller_than_its_catalog_window() -> None:
    result, _ = await probe(ollama(Reply(body=show(num_ctx=131072, trained=8192))), 131_072)
    assert not result.ok
    assert "supports only 8192 tokens" in result.message


async def test_probe_without_a_catalog_window() -> None:
    result, _ = await probe(ollama(Reply(body=show(num_ctx=8192))), None, "my-finetune")
    assert result.ok
    assert "8192" in result.message


@pytest.mark.parametrize(
    ("reply", "needle"),
    [
        (Reply(status=500, body={"error": "llama runner crashed"}), "llama runner crashed"),
        (Reply(body="not json"), "not JSON"),
    ],
)
async def test_probe_odd_answers(reply, needle) -> None:
    result, _ = await probe(ollama(reply))
    assert not result.ok
    assert needle in result.message


async def test_probe_unreachable_server() -> None:
    async with LoopbackServer() as server:
        url = server.url
    async with httpx.AsyncClient() as client:
        result = await probe_ollama(url, "qwen3", 40_960, client)
    assert not result.ok
    assert "cannot reach Ollama" in result.message
    assert "ollama serve" in result.fix
