"""A real ``fermix run`` daemon with WhatsApp enabled in config.toml, end to end.

Meta's side is the loopback Graph API stand-in of the adapter tests (checked against pywa
there); the model is an OpenAI-compatible loopback on the same server. The test signs
deliveries with the app secret and POSTs them to the daemon's real HTTP ingress.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from fermix_core.testing.loopback import RecordedRequest, Reply, ThreadedLoopback

FERMIX = shutil.which("fermix", path=os.path.dirname(sys.executable)) or "fermix"
FAKE = Path(__file__).resolve().parents[1] / "packages/fermix-channels/tests/whatsapp/fake_graph.py"


def load_fake() -> Any:
    name = "fermix_channels_tests_fake_graph"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, FAKE)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


fg = load_fake()


def chunks(text: str) -> list:
    def chunk(delta: dict, finish: str | None = None) -> dict:
        return {
            "id": "c1",
            "object": "chat.completion.chunk",
            "model": "qwen3",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }

    return [
        chunk({"role": "assistant", "content": ""}),
        chunk({"content": text}),
        chunk({}, "stop"),
        "[DONE]",
    ]


@pytest.fixture
def server():
    graph = fg.FakeGraph()

    async def handle(request: RecordedRequest) -> Reply:
        if request.path.startswith("/v1/"):
            body = request.json()
            user = [m for m in body["messages"] if m["role"] == "user"][-1]["content"]
            pictures = 0
            if isinstance(user, list):
                pictures = sum(p.get("type") == "image_url" for p in user)
                user = "".join(p.get("text", "") for p in user)
            text = f"echo: **{user}**" + (f" ({pictures} images)" if pictures else "")
            if body.get("stream"):
                return Reply(sse=chunks(text))
            return Reply(
                body={
                    "id": "c1",
                    "object": "chat.completion",
                    "model": "qwen3",
                    "choices": [
                        {
                            "index": 0,
                            "finish_reason": "stop",
                            "message": {"role": "assistant", "content": text},
                        }
                    ],
                }
            )
        return await graph._handle(request)

    with ThreadedLoopback(handle) as threaded:
        graph.server = threaded.server  # the stand-in's URLs now name the threaded server
        threaded.graph = graph
        yield threaded


@pytest.fixture
def env(tmp_path, server):
    home = tmp_path / "h"
    home.mkdir(mode=0o700)
    graph = server.graph
    (home / "config.toml").write_text(
        "[fermix_core.providers.ollama]\nprimary = true\n"
        f'base_url = "{server.url}/v1"\ndefault_model = "qwen3"\n'
        "[fermix_core.memory]\nreview_enabled = false\n"
        "[fermix_web]\nport = 0\n"
        "[fermix_channels.telegram]\nenabled = false\n"
        "[fermix_channels.acp]\nenabled = false\n"
        "[fermix_channels.whatsapp]\nenabled = true\n"
        f'access_token = "{fg.ACCESS_TOKEN}"\napp_secret = "{fg.APP_SECRET}"\n'
        f'verify_token = "{fg.VERIFY_TOKEN}"\nphone_number_id = "{fg.PHONE_NUMBER_ID}"\n'
        f'api_base_url = "{graph.url}"\nowner_user_id = "{fg.OWNER}"\n'
    )
    os.chmod(home / "config.toml", 0o600)
    environ = dict(os.environ)
    environ.update(
        FERMIX_HOME=str(home), PYTHON_KEYRING_BACKEND="fermix_core.keyring_backend.MemoryKeyring"
    )
    for name in ("FERMIX_LOAD_PLUGINS", "FERMIX_HTTP_BIND", "OLLAMA_BASE_URL"):
        environ.pop(name, None)
    yield environ
    subprocess.run([FERMIX, "stop"], env=environ, capture_output=True, timeout=60)


def fermix(env, *args):
    result = subprocess.run([FERMIX, *args], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, f"fermix {args}: {result.stdout}{result.stderr}"
    return result


def test_whatsapp_answers_a_signed_delivery_through_the_daemon(env, server) -> None:
    fermix(env, "start")
    status = json.loads(fermix(env, "status", "--json").stdout)
    url = status["http"]["url"]
    whatsapp = {c["name"]: c for c in status["channels"]}["whatsapp"]
    assert whatsapp["state"] == "ready", whatsapp
    assert {"GET /webhook/whatsapp", "POST /webhook/whatsapp"} <= set(status["http"]["routes"])

    handshake = httpx.get(
        f"{url}/webhook/whatsapp",
        params={
            "hub.mode": "subscribe",
            "hub.verify_token": fg.VERIFY_TOKEN,
            "hub.challenge": "42",
        },
        timeout=30,
    )
    assert handshake.status_code == 200 and handshake.text == "42"

    body = fg.delivery(fg.value([fg.text_message(fg.OWNER, "hello", "wamid.E2E1")]))
    wrong = fg.signed_headers(body, "wrong")
    forged = httpx.post(f"{url}/webhook/whatsapp", content=body, headers=wrong, timeout=30)
    assert forged.status_code == 403
    answer = httpx.post(
        f"{url}/webhook/whatsapp", content=body, headers=fg.signed_headers(body), timeout=30
    )
    assert answer.status_code == 200
    server.call(server.graph.wait_texts, 1, fg.OWNER)
    # Rendered in WhatsApp's markup: **bold** became *bold*.
    assert server.graph.texts(fg.OWNER) == ["echo: *hello*"]
    # Meta redelivers the same message: nothing runs twice.
    again = httpx.post(
        f"{url}/webhook/whatsapp", content=body, headers=fg.signed_headers(body), timeout=30
    )
    assert again.status_code == 200
    stranger = fg.delivery(fg.value([fg.text_message(fg.STRANGER, "hi", "wamid.E2E2")]))
    httpx.post(
        f"{url}/webhook/whatsapp", content=stranger, headers=fg.signed_headers(stranger), timeout=30
    )
    second = fg.delivery(fg.value([fg.text_message(fg.OWNER, "again", "wamid.E2E3")]))
    httpx.post(
        f"{url}/webhook/whatsapp", content=second, headers=fg.signed_headers(second), timeout=30
    )
    server.call(server.graph.wait_texts, 2, fg.OWNER)
    assert server.graph.texts() == ["echo: *hello*", "echo: *again*"]
    ready = httpx.get(f"{url}/health/ready", timeout=30).json()
    assert {c["name"]: c["state"] for c in ready["channels"]}["whatsapp"] == "ready"


def post(url: str, body: bytes) -> httpx.Response:
    return httpx.post(
        f"{url}/webhook/whatsapp", content=body, headers=fg.signed_headers(body), timeout=60
    )


def test_an_album_reaches_a_vision_model_as_one_turn_and_oversize_is_refused(env, server) -> None:
    config = Path(env["FERMIX_HOME"]) / "config.toml"
    text = config.read_text().replace('default_model = "qwen3"', 'default_model = "gemma3"')
    config.write_text(text + "album_debounce_ms = 300\n")
    graph = server.graph
    fermix(env, "start")
    url = json.loads(fermix(env, "status", "--json").stdout)["http"]["url"]

    # Two pictures of one message (Meta may batch them into one delivery): one turn.
    for n in (1, 2):
        graph.add_media(f"PIC{n}", b"\xff\xd8\xff\xe0" + bytes(64) + bytes([n]), "image/jpeg")
    album = fg.delivery(
        fg.value(
            [
                fg.media_message(fg.OWNER, "image", "PIC1", "wamid.P1", caption="before"),
                fg.media_message(fg.OWNER, "image", "PIC2", "wamid.P2", caption="after"),
            ]
        )
    )
    assert post(url, album).status_code == 200
    server.call(graph.wait_texts, 1, fg.OWNER)
    assert graph.texts(fg.OWNER) == ["echo: *before\nafter* (2 images)"]

    # Over WhatsApp's 25 MB inbound cap: never downloaded, the sender told why.
    graph.add_media("HUGE", b"x", "image/jpeg", declared=30 * 1024 * 1024)
    huge = fg.delivery(fg.value([fg.media_message(fg.OWNER, "image", "HUGE", "wamid.P3")]))
    assert post(url, huge).status_code == 200
    server.call(graph.wait_texts, 2, fg.OWNER)
    refusal = graph.texts(fg.OWNER)[1]
    assert "over the 25 MB limit for images on whatsapp" in refusal, refusal
    assert "HUGE" not in graph.downloads

    # A stranger's picture is not even looked up.
    graph.add_media("STRANGE", b"\xff\xd8\xff\xe0" + bytes(64), "image/jpeg")
    stranger = fg.delivery(fg.value([fg.media_message(fg.STRANGER, "image", "STRANGE", "wamid.S")]))
    assert post(url, stranger).status_code == 200
    assert "STRANGE" not in graph.lookups and "STRANGE" not in graph.downloads
    models = [r for r in server.requests if r.path.startswith("/v1/")]
    assert len(models) == 1  # the refused and the stranger's pictures reached no model
