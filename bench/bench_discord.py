"""The Discord channel end to end: gateway message → reply, and reconnect-and-resume time.

A real ``fermix`` daemon with Discord enabled connects to the loopback Discord of the adapter
tests (``packages/fermix-channels/tests/discord/fake_discord.py``: a websocket gateway and
REST on 127.0.0.1, found through ``GET /gateway/bot``); the model is a loopback Chat
Completions server on the same REST socket that answers at once (the "instant provider").

* ``message_to_reply`` — from the MESSAGE_CREATE frame being sent on the gateway to the
  reply's ``POST /channels/{id}/messages`` reaching the fake: frame parse, delivery, gateway,
  turn, rendering, REST send. Each message comes from the owner in its own DM channel and
  streaming is off, so the reply is one POST.
* ``reconnect_resume`` — from the socket being cut (no close frame, as on a network drop) to
  the fake having sent RESUMED on a new connection: drop detection, reconnect to
  ``resume_gateway_url``, HELLO, RESUME, replay.
* ``library_import`` — what importing the gateway stack adds in a fresh interpreter that
  already has what the daemon loads anyway (asyncio, ssl, httpx, anyio): ``websockets``
  (what the adapter uses) against ``discord.py`` (which brings aiohttp): wall time, resident
  memory added, modules added.

The machine running this is shared, so the figures are pessimistic.

    uv run python bench/run.py discord
"""

from __future__ import annotations

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

MESSAGES = 60
WARMUP = 5
DROPS = 20
ROOT = Path(__file__).parents[1]
FAKE = ROOT / "packages/fermix-channels/tests/discord/fake_discord.py"
FERMIX = shutil.which("fermix", path=os.path.dirname(sys.executable)) or "fermix"
#: What the daemon has loaded anyway is imported first, so the figure is the marginal cost.
_IMPORT = (
    "import asyncio, ssl, sys, time, httpx, anyio\n"
    "def rss():\n"
    "    for line in open('/proc/self/status'):\n"
    "        if line.startswith('VmRSS:'):\n"
    "            return int(line.split()[1]) / 1024\n"
    "before, loaded = rss(), len(sys.modules)\n"
    "started = time.perf_counter()\n"
    "import {module}\n"
    "took = time.perf_counter() - started\n"
    "print(took, rss() - before, len(sys.modules) - loaded)\n"
)


def _fake() -> Any:
    from _fakes import load_fake

    return load_fake("fermix_channels_bench_fake_discord", FAKE)


def _summary(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)

    def pct(p: float) -> float:
        return ordered[min(len(ordered) - 1, int(p * len(ordered)))] * 1e3

    return {
        "n": len(ordered),
        "p50_ms": round(pct(0.50), 2),
        "p99_ms": round(pct(0.99), 2),
        "mean_ms": round(statistics.fmean(ordered) * 1e3, 2),
    }


def _import_cost(module: str, runs: int = 3) -> dict[str, Any]:
    """Median wall ms, RSS MB added and modules added by ``import module``, fresh process."""
    rows = []
    for _ in range(runs):
        out = subprocess.run(
            [sys.executable, "-c", _IMPORT.format(module=module)],
            capture_output=True,
            text=True,
            check=True,
            timeout=120,
        ).stdout.split()
        rows.append((float(out[0]) * 1e3, float(out[1]), int(out[2])))
    rows.sort()
    wall, rss, modules = rows[len(rows) // 2]
    return {"import_ms": round(wall, 1), "rss_added_mb": round(rss, 1), "modules": modules}


def _completion() -> dict[str, Any]:
    return {
        "id": "c",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": "qwen3",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "done."},
             "finish_reason": "stop"}
        ],
    }  # fmt: skip


def run() -> dict[str, Any]:
    from anyio.from_thread import start_blocking_portal
    from fermix_core.testing.loopback import Reply

    fd = _fake()

    async def model(request: Any) -> Any:
        if not request.body:
            return Reply(status=404, body={"error": "not found"})
        return Reply(body=_completion())

    discord = fd.FakeDiscord(fallback=model)
    with (
        start_blocking_portal() as portal,
        portal.wrap_async_context_manager(discord),
        tempfile.TemporaryDirectory() as tmp,
    ):
        home = Path(tmp) / "h"
        home.mkdir(mode=0o700)
        (home / "config.toml").write_text(
            "[fermix_core.providers.ollama]\nprimary = true\n"
            f'base_url = "{discord.url}/v1"\ndefault_model = "qwen3"\n'
            "[fermix_core.memory]\nreview_enabled = false\n"
            "[fermix_web]\nport = 0\n"
            "[fermix_channels.telegram]\nenabled = false\n"
            "[fermix_channels.acp]\nenabled = false\n"
            "[fermix_channels.discord]\nenabled = true\n"
            f'bot_token = "{fd.TOKEN}"\nowner_user_id = "{fd.OWNER_ID}"\n'
            f'api_base_url = "{discord.api_base_url}"\nstreaming = "off"\n'
        )
        env = dict(os.environ, FERMIX_HOME=str(home))
        env["PYTHON_KEYRING_BACKEND"] = "fermix_core.keyring_backend.MemoryKeyring"
        env.pop("FERMIX_LOAD_PLUGINS", None)
        env.pop("DISCORD_BOT_TOKEN", None)
        subprocess.run([FERMIX, "start"], env=env, check=True, capture_output=True, timeout=120)
        try:
            portal.call(discord.until, lambda: discord.connected, 60)
            replies: list[float] = []
            for n in range(MESSAGES + WARMUP):
                channel = str(int(fd.DM_CHANNEL) + 1000 + n)
                started = time.perf_counter()
                portal.call(lambda ch=channel, n=n: discord.message(f"ping {n}", channel=ch))
                portal.call(discord.until, lambda ch=channel: bool(discord.sent(ch)), 60)
                if n >= WARMUP:
                    replies.append(time.perf_counter() - started)
            resumes: list[float] = []
            for _ in range(DROPS):
                done = len(discord.resumes)
                started = time.perf_counter()
                portal.call(discord.drop)
                portal.call(
                    discord.until,
                    lambda done=done: len(discord.resumes) > done and discord.connected,
                    60,
                )
                resumes.append(time.perf_counter() - started)
            identifies = discord.identifies
        finally:
            subprocess.run([FERMIX, "stop"], env=env, capture_output=True, timeout=60)
    return {
        "message_to_reply": _summary(replies),
        "reconnect_resume": {**_summary(resumes), "identifies": identifies},
        "library_import": {
            "websockets (used)": _import_cost("websockets.asyncio.client"),
            "discord.py (not used)": _import_cost("discord"),
        },
        "notes": "shared, loaded 2-core machine: figures are pessimistic; resume is timed "
        "to the fake having sent RESUMED on the new connection",
    }


if __name__ == "__main__":
    print(json.dumps(run(), indent=2))
