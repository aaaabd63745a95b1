"""The ACP surface end to end: prompt → first ``session/update`` chunk through the bridge.

A real daemon (``fermix start``) serves ``acp``; the official ``agent-client-protocol``
client spawns ``fermix acp`` (the stdin/stdout ↔ ``acp.sock`` bridge) exactly as an editor
would. The model is a loopback Chat Completions server that streams its answer at once
(the "instant provider"), so the figures are Fermix's own cost: the bridge's two copies,
the SDK's JSON-RPC, gateway, queue, turn set-up, provider stream parsing and the
``session/update`` write.

* ``first_chunk`` — from sending ``session/prompt`` to the first ``agent_message_chunk``;
* ``prompt_done`` — to the prompt's response (``stopReason``);
* ``bridge_initialize`` — spawning ``fermix acp`` until ``initialize`` is answered (what an
  editor waits for when it opens the agent panel).

The machine running this is shared, so the figures are pessimistic.

    uv run python bench/run.py acp
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

PROMPTS = 40
WARMUP = 5
SPAWNS = 5
FERMIX = shutil.which("fermix", path=os.path.dirname(sys.executable)) or "fermix"


def _chunk(delta: dict, finish: str | None = None) -> dict:
    return {
        "id": "c",
        "object": "chat.completion.chunk",
        "model": "qwen3",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


async def _model(request: Any) -> Any:
    from fermix_core.testing.loopback import Reply

    body = request.json()
    sse = [
        _chunk({"role": "assistant", "content": ""}),
        _chunk({"content": "pong "}),
        _chunk({"content": "and the rest"}),
        _chunk({}, "stop"),
        "[DONE]",
    ]
    if not body.get("stream"):
        message = {"role": "assistant", "content": "pong and the rest"}
        choice = {"index": 0, "message": message, "finish_reason": "stop"}
        return Reply(body={"id": "c", "object": "chat.completion", "choices": [choice]})
    return Reply(sse=sse)


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _summary(values: list[float]) -> dict[str, float]:
    ms = [v * 1000 for v in values]
    return {
        "n": len(ms),
        "p50_ms": round(statistics.median(ms), 2),
        "p90_ms": round(_pct(ms, 0.9), 2),
        "p99_ms": round(_pct(ms, 0.99), 2),
        "max_ms": round(max(ms), 2),
    }


class _Client:
    def __init__(self) -> None:
        self.first: asyncio.Event = asyncio.Event()

    async def session_update(self, session_id: str, update: Any, **_: Any) -> None:
        if update.session_update == "agent_message_chunk":
            self.first.set()

    async def request_permission(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("not expected")


async def _measure(env: dict[str, str], work: str) -> dict[str, Any]:
    from acp import PROTOCOL_VERSION, spawn_agent_process, text_block

    first: list[float] = []
    done: list[float] = []
    spawn: list[float] = []
    client = _Client()
    async with spawn_agent_process(client, FERMIX, "acp", env=env) as (conn, _proc):
        await conn.initialize(protocol_version=PROTOCOL_VERSION)
        sid = (await conn.new_session(cwd=work, mcp_servers=[])).session_id
        for index in range(WARMUP + PROMPTS):
            client.first = asyncio.Event()
            began = time.perf_counter()
            task = asyncio.ensure_future(
                conn.prompt(session_id=sid, prompt=[text_block(f"ping {index}")])
            )
            await asyncio.wait_for(client.first.wait(), 60)
            got = time.perf_counter()
            answer = await asyncio.wait_for(task, 60)
            ended = time.perf_counter()
            assert answer.stop_reason == "end_turn"
            if index >= WARMUP:
                first.append(got - began)
                done.append(ended - began)
    for _ in range(SPAWNS):
        began = time.perf_counter()
        async with spawn_agent_process(_Client(), FERMIX, "acp", env=env) as (conn, _proc):
            await conn.initialize(protocol_version=PROTOCOL_VERSION)
            spawn.append(time.perf_counter() - began)
    return {
        "first_chunk": _summary(first),
        "prompt_done": _summary(done),
        "bridge_initialize": _summary(spawn),
    }


def run() -> dict[str, Any]:
    from fermix_core.testing.loopback import ThreadedLoopback

    with tempfile.TemporaryDirectory() as tmp, ThreadedLoopback(_model) as server:
        home = Path(tmp) / "h"
        home.mkdir(mode=0o700)
        (home / "config.toml").write_text(
            "[fermix_core.providers.ollama]\n"
            "primary = true\n"
            f'base_url = "{server.url}/v1"\n'
            'default_model = "qwen3"\n'
            "[fermix_core.memory]\nreview_enabled = false\n"
            "[fermix_web]\nport = 0\n"
            "[fermix_channels.telegram]\nenabled = false\n"
        )
        env = dict(os.environ)
        env["FERMIX_HOME"] = str(home)
        env["PYTHON_KEYRING_BACKEND"] = "fermix_core.keyring_backend.MemoryKeyring"
        env.pop("FERMIX_LOAD_PLUGINS", None)
        subprocess.run([FERMIX, "start"], env=env, check=True, capture_output=True, timeout=120)
        try:
            deadline = time.monotonic() + 60
            while True:
                out = subprocess.run(
                    [FERMIX, "status", "--json"], env=env, capture_output=True, text=True
                ).stdout
                channels = {c["name"]: c for c in json.loads(out).get("channels") or []}
                if channels.get("acp", {}).get("state") == "ready":
                    break
                if time.monotonic() > deadline:
                    raise RuntimeError(f"acp never became ready: {channels.get('acp')}")
                time.sleep(0.1)
            figures = asyncio.run(_measure(env, tmp))
        finally:
            subprocess.run([FERMIX, "stop"], env=env, capture_output=True, timeout=60)
    return {
        "prompts": PROMPTS,
        "warmup": WARMUP,
        "note": "shared, loaded machine: figures are pessimistic",
        **figures,
    }
