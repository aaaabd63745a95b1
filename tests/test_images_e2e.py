"""Vision without a messaging app: ``Fermix.ask(images=...)`` and ``fermix ask --image``.

Real runtime, real provider adapters, loopback model servers speaking the real wires; the
pictures are real files made here. History keeps the stored file's name, never base64.
"""

from __future__ import annotations

import base64
import io
import json
import os
import shutil
import sqlite3
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fermix_core.api import Fermix
from fermix_core.media.images import ImageError
from fermix_core.testing.loopback import LoopbackServer, RecordedRequest, Reply, ThreadedLoopback

Image = pytest.importorskip("PIL.Image", reason="Pillow is a fermix-core dependency")

FERMIX = shutil.which("fermix", path=os.path.dirname(sys.executable)) or "fermix"


def photo(path: Path, size: tuple[int, int] = (3000, 2000)) -> Path:
    width, height = size
    Image.frombytes("RGB", size, os.urandom(width * height * 3)).save(path, quality=95)
    return path


def anthropic_reply(request: RecordedRequest) -> Reply:
    return Reply(
        body={
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-6",
            "content": [{"type": "text", "text": "A noisy picture."}],
            "stop_reason": "end_turn",
            "usage": {"input_tokens": 10, "output_tokens": 4},
        }
    )


def completion(request: RecordedRequest) -> Reply:
    body = request.json()
    last = body["messages"][-1]["content"]
    kinds = [p["type"] for p in last] if isinstance(last, list) else ["text"]
    message = {"role": "assistant", "content": f"parts: {','.join(kinds)}"}
    return Reply(
        body={
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body["model"],
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13},
        }
    )


def config_for(provider: str, url: str, model: str) -> dict:
    block = {"primary": True, "base_url": url, "default_model": model}
    if provider != "ollama":
        block["api_key"] = "sk-loopback"
    return {
        "fermix_core": {
            "providers": {provider: block},
            "memory": {"review_enabled": False},
        }
    }


def image_blocks(request: RecordedRequest) -> list[dict]:
    return [
        block
        for message in request.json()["messages"]
        if isinstance(message["content"], list)
        for block in message["content"]
        if block["type"] == "image"
    ]


@pytest.mark.anyio
async def test_embedding_ask_with_an_image_stores_a_file_and_fits_it_per_turn(
    fermix_home, tmp_path
) -> None:
    picture = photo(tmp_path / "holiday.jpg", size=(2000, 1500))
    async with LoopbackServer(anthropic_reply) as server:
        config = config_for("anthropic", f"{server.url}/v1", "claude-sonnet-4-6")
        async with Fermix.open(fermix_home, config=config, entry_points=True) as fx:
            first = await fx.ask("What is in this picture?", session="pics", images=[picture])
            second = await fx.ask("And the colours?", session="pics")
            db = fx.service.runtime.home.memory_db
    assert first.status == "ok" and first.text == "A noisy picture."
    assert second.status == "ok"
    one, two = server.requests
    (block,) = image_blocks(one)
    assert block["source"]["type"] == "base64" and block["source"]["media_type"] == "image/jpeg"
    shown = Image.open(io.BytesIO(base64.b64decode(block["source"]["data"])))
    assert max(shown.size) == 1568  # Anthropic's long edge, from a 2000 px original
    # The next turn re-sends it from the stored file, fitted the same way.
    assert [b["source"] for b in image_blocks(two)] == [block["source"]]

    stored = list((fermix_home.path / "media" / "images").iterdir())
    assert [p.read_bytes() for p in stored] == [picture.read_bytes()]
    assert stat.S_IMODE(stored[0].stat().st_mode) == 0o600
    with sqlite3.connect(db) as conn:
        bodies = [row[0] for row in conn.execute("SELECT body FROM messages WHERE role='user'")]
    parts = json.loads(bodies[0])["content"]
    assert parts[1] == {"type": "image", "media_type": "image/jpeg", "data": None, "url": None,
                        "path": str(stored[0])}  # fmt: skip
    assert max(len(body) for body in bodies) < 2000  # no base64 in the row


@pytest.mark.anyio
async def test_embedding_images_as_bytes_and_bad_paths(fermix_home, tmp_path) -> None:
    small = tmp_path / "dot.png"
    Image.new("RGB", (32, 32), (10, 200, 10)).save(small)
    async with LoopbackServer(completion) as server:
        config = config_for("ollama", f"{server.url}/v1", "gemma3")
        async with Fermix.open(fermix_home, config=config, entry_points=True) as fx:
            outcome = await fx.ask("", session="bytes", images=[small.read_bytes()])
            refused = await fx.ask("and this?", session="bytes", images=[b"%PDF-1.7 no"])
            with pytest.raises(ImageError, match="does not exist"):
                await fx.ask("x", images=[tmp_path / "missing.png"])
            (tmp_path / "notes.txt").write_text("not a picture")
            with pytest.raises(ImageError, match="does not look like a picture"):
                await fx.ask("x", images=[tmp_path / "notes.txt"])
    assert outcome.text == "parts: image_url"  # a captionless image is a turn
    assert refused.status == "media_refused" and "does not look like a picture" in refused.text
    assert len(server.requests) == 1  # the refused ones never reached the model


@pytest.mark.anyio
async def test_a_model_without_vision_is_named_to_the_sender_and_text_still_works(
    fermix_home, tmp_path
) -> None:
    picture = photo(tmp_path / "p.jpg", size=(300, 200))
    async with LoopbackServer(completion) as server:
        config = config_for("ollama", f"{server.url}/v1", "qwen3")
        async with Fermix.open(fermix_home, config=config, entry_points=True) as fx:
            refused = await fx.ask("what is this?", session="tv", images=[picture])
            after = await fx.ask("ok, what is 2+2?", session="tv")
    assert refused.status == "error"
    assert "qwen3 cannot read images" in refused.text
    assert "vision_models" in refused.text
    assert after.status == "ok" and after.text == "parts: text"
    (only,) = server.requests  # the refused turn sent nothing
    assert "[an earlier image is not shown: qwen3 cannot read images]" in json.dumps(
        only.json()["messages"]
    )


@pytest.fixture
def cli_env(tmp_path):
    def make(url: str, model: str) -> dict:
        home = tmp_path / "h"
        home.mkdir(mode=0o700, exist_ok=True)
        (home / "config.toml").write_text(
            "[fermix_core.providers.ollama]\nprimary = true\n"
            f'base_url = "{url}/v1"\ndefault_model = "{model}"\n'
            "[fermix_core.memory]\nreview_enabled = false\n"
        )
        env = dict(os.environ)
        env["FERMIX_HOME"] = str(home)
        env["PYTHON_KEYRING_BACKEND"] = "fermix_core.keyring_backend.MemoryKeyring"
        env.pop("FERMIX_LOAD_PLUGINS", None)
        env.pop("OLLAMA_BASE_URL", None)
        return env

    return make


def fermix(env, *args):
    return subprocess.run(
        [FERMIX, *args], env=env, capture_output=True, text=True, timeout=120, cwd=env["CWD"]
    )


def test_fermix_ask_image_end_to_end(cli_env, tmp_path) -> None:
    photo(tmp_path / "big.jpg", size=(2400, 1600))
    second = tmp_path / "small.png"
    Image.new("RGB", (40, 30), (0, 0, 255)).save(second)
    with ThreadedLoopback(completion) as server:
        env = {**cli_env(server.url, "gemma3"), "CWD": str(tmp_path)}
        result = fermix(
            env, "ask", "compare", "--image", "big.jpg", "--image", str(second), "--json"
        )
        assert result.returncode == 0, result.stderr
        assert json.loads(result.stdout)["reply"] == "parts: text,image_url,image_url"
        (request,) = server.requests
        parts = request.json()["messages"][-1]["content"]
        urls = [p["image_url"]["url"] for p in parts if p["type"] == "image_url"]
        assert urls[0].startswith("data:image/jpeg;base64,")
        big = Image.open(io.BytesIO(base64.b64decode(urls[0].partition(",")[2])))
        assert max(big.size) == 2048
        assert urls[1] == "data:image/png;base64," + base64.b64encode(second.read_bytes()).decode()

        missing = fermix(env, "ask", "hi", "--image", "nope.png")
        (tmp_path / "notes.txt").write_text("hello")
        wrong = fermix(env, "ask", "hi", "--image", "notes.txt")
        typer_path = fermix(env, "ask", "hi", "--session", "s", "--image=notes.txt", "--stdin")
    assert missing.returncode == 2
    assert "--image nope.png" in missing.stderr and "does not exist" in missing.stderr
    assert wrong.returncode == 2 and "does not look like a picture" in wrong.stderr
    assert typer_path.returncode == 2 and "does not look like a picture" in typer_path.stderr
    assert len(server.requests) == 1  # nothing was sent for the refused files


def test_fermix_ask_image_through_a_running_daemon(cli_env, tmp_path) -> None:
    picture = tmp_path / "chart.png"
    Image.new("RGB", (120, 80), (250, 200, 0)).save(picture)
    with ThreadedLoopback(completion) as server:
        env = {**cli_env(server.url, "gemma3"), "CWD": str(tmp_path)}
        try:
            started = fermix(env, "start")
            assert started.returncode == 0, started.stderr
            asked = fermix(env, "ask", "what colour?", "--image", "chart.png", "--json")
        finally:
            fermix(env, "stop")
    assert asked.returncode == 0, asked.stderr
    assert json.loads(asked.stdout)["reply"] == "parts: text,image_url"
    (request,) = server.requests
    url = request.json()["messages"][-1]["content"][1]["image_url"]["url"]
    assert url == "data:image/png;base64," + base64.b64encode(picture.read_bytes()).decode()
    stored = list((Path(env["FERMIX_HOME"]) / "media" / "images").iterdir())
    assert [p.read_bytes() for p in stored] == [picture.read_bytes()]
