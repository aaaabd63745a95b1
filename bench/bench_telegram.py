"""The Telegram channel end to end: update → reply, and the idle poll loop's CPU.

A real ``fermix run`` daemon with Telegram enabled polls the loopback Bot API of the
adapter tests (``packages/fermix-channels/tests/telegram/fake_telegram.py``); the model is
a loopback Chat Completions server that answers at once (the "instant provider"), on the
same in-process loopback server.

* ``update_to_reply`` — from the moment an update is queued on the fake to the moment the
  reply's ``sendMessage`` reached it: long-poll wake-up, parse, delivery, gateway, turn,
  rendering, send. Each update comes from the owner in its own group chat (addressed with
  an @mention), so Telegram's one-message-per-second pacing per chat does not enter the
  figure; streaming is off so the reply is one ``sendMessage``.
* ``idle_cpu`` — CPU seconds the daemon process used over an idle window while its
  poller waits in ``getUpdates`` (``poll_timeout`` 30 s), as a share of one core.

The machine running this is shared, so the figures are pessimistic.

    uv run python bench/run.py telegram
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

UPDATES = 60
WARMUP = 5
IDLE_SECONDS = 20.0
ROOT = Path(__file__).parents[1]
FAKE = ROOT / "packages/fermix-channels/tests/telegram/fake_telegram.py"
FERMIX = shutil.which("fermix", path=os.path.dirname(sys.executable)) or "fermix"


def _fake() -> Any:
    from _fakes import load_fake

    return load_fake("fermix_channels_bench_fake_telegram", FAKE)


def _completion(text: str, stream: bool) -> Any:
    if stream:
        chunk = {
            "id": "c",
            "object": "chat.completion.chunk",
            "model": "qwen3",
            "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": "stop"}],
        }
        return {"sse": [chunk, "[DONE]"]}
    return {
        "body": {
            "id": "c",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": "qwen3",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": "stop",
                }
            ],
        }
    }


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


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


def run() -> dict[str, Any]:
    from fermix_core.testing.loopback import Reply, ThreadedLoopback

    ft = _fake()
    telegram = ft.FakeBotApi()

    async def handler(request: Any) -> Any:
        if request.path.startswith(("/bot", "/file/bot")):
            return await telegram._handle(request)
        body = request.json()
        return Reply(**_completion("done.", bool(body.get("stream"))))

    with ThreadedLoopback(handler) as server, tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "h"
        home.mkdir(mode=0o700)
        (home / "config.toml").write_text(
            "[fermix_core.providers.ollama]\nprimary = true\n"
            f'base_url = "{server.url}/v1"\ndefault_model = "qwen3"\n'
            "[fermix_core.memory]\nreview_enabled = false\n"
            "[fermix_web]\nport = 0\n"
            "[fermix_channels.telegram]\nenabled = true\n"
            f'bot_token = "{ft.TOKEN}"\nowner_user_id = "{ft.OWNER_ID}"\n'
            f'api_base_url = "{server.url}"\nstreaming = "off"\npoll_timeout = 30\n'
            "[fermix_channels.acp]\nenabled = false\n"
        )
        env = dict(os.environ, FERMIX_HOME=str(home))
        env["PYTHON_KEYRING_BACKEND"] = "fermix_core.keyring_backend.MemoryKeyring"
        env.pop("FERMIX_LOAD_PLUGINS", None)
        subprocess.run([FERMIX, "start"], env=env, check=True, capture_output=True, timeout=120)
        try:
            server.call(telegram.wait_polling, 1, 60)
            samples: list[float] = []
            for n in range(UPDATES + WARMUP):
                chat = ft.GROUP_ID - n
                started = time.perf_counter()
                server.call(
                    lambda chat=chat: telegram.message(
                        f"@{ft.BOT_USERNAME} ping {chat}", chat_id=chat
                    )
                )
                server.call(telegram.until, lambda chat=chat: bool(telegram.sent(chat)), 60)
                if n >= WARMUP:
                    samples.append(time.perf_counter() - started)
            pid = int(json.loads((home / "daemon.pid").read_text())["pid"])
            before, wall = _cpu_seconds(pid), time.perf_counter()
            polls = telegram.polls
            time.sleep(IDLE_SECONDS)  # the idle window being measured
            used, wall = _cpu_seconds(pid) - before, time.perf_counter() - wall
            idle_polls = telegram.polls - polls
        finally:
            subprocess.run([FERMIX, "stop"], env=env, capture_output=True, timeout=60)
    return {
        "update_to_reply": _summary(samples),
        "idle_cpu": {
            "window_s": round(wall, 1),
            "cpu_s": round(used, 3),
            "core_percent": round(100 * used / wall, 3),
            "getUpdates_calls": idle_polls,
        },
        "notes": "shared, loaded 2-core machine: figures are pessimistic; daemon idle CPU "
        "includes everything else the daemon does while idle, not only the poller",
    }


if __name__ == "__main__":
    print(json.dumps(run(), indent=2))
