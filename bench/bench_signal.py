"""The Signal channel end to end: message → reply through signal-cli's JSON-RPC, and idle CPU.

A real ``fermix run`` daemon with Signal enabled runs the stub signal-cli of the adapter
tests (``packages/fermix-channels/tests/signal/stub_signal_cli.py``, a Python process
speaking signal-cli's JSON-RPC on stdin/stdout) as its ``cli_path``; the model is a loopback
Chat Completions server that answers at once (the "instant provider").

* ``message_to_reply`` — from the moment the stub is told to print a ``receive``
  notification to the moment the reply's ``send`` request reached it: the adapter's line
  reader, the pending-file write, parse, delivery, gateway, turn, rendering, the JSON-RPC
  send. Streaming is off so the reply is one ``send``.
* ``idle_cpu`` — CPU seconds the daemon process used over an idle window with signal-cli
  subscribed (one ``version`` health probe a minute), as a share of one core.

The real signal-cli is a JVM and is not in these figures. The machine running this is
shared, so the figures are pessimistic.

    uv run python bench/run.py signal
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_telegram import _completion, _cpu_seconds, _summary

MESSAGES = 60
WARMUP = 5
IDLE_SECONDS = 20.0
ROOT = Path(__file__).parents[1]
STUB = ROOT / "packages/fermix-channels/tests/signal/signal_stub.py"
FERMIX = shutil.which("fermix", path=os.path.dirname(sys.executable)) or "fermix"


def run() -> dict[str, Any]:
    from _fakes import load_fake
    from fermix_core.testing.loopback import Reply, ThreadedLoopback

    ss = load_fake("fermix_channels_bench_signal_stub", STUB)

    async def handler(request: Any) -> Any:
        body = request.json()
        return Reply(**_completion("done.", bool(body.get("stream"))))

    with (
        ThreadedLoopback(handler) as server,
        ss.StubSignalCli(style="subscription") as stub,
        tempfile.TemporaryDirectory() as tmp,
    ):
        home = Path(tmp) / "h"
        home.mkdir(mode=0o700)
        (home / "config.toml").write_text(
            "[fermix_core.providers.ollama]\nprimary = true\n"
            f'base_url = "{server.url}/v1"\ndefault_model = "qwen3"\n'
            "[fermix_core.memory]\nreview_enabled = false\n"
            "[fermix_web]\nport = 0\n"
            "[fermix_channels.telegram]\nenabled = false\n"
            "[fermix_channels.acp]\nenabled = false\n"
            "[fermix_channels.signal]\nenabled = true\n"
            f'account = "{ss.ACCOUNT}"\nowner_user_id = "{ss.OWNER}"\n'
            f'cli_path = "{stub.path}"\nstreaming = "off"\n'
        )
        env = dict(os.environ, FERMIX_HOME=str(home))
        env["PYTHON_KEYRING_BACKEND"] = "fermix_core.keyring_backend.MemoryKeyring"
        env.pop("FERMIX_LOAD_PLUGINS", None)
        subprocess.run([FERMIX, "start"], env=env, check=True, capture_output=True, timeout=120)
        try:
            stub.wait_subscribed(1, timeout=60)
            samples: list[float] = []
            for n in range(MESSAGES + WARMUP):
                started = time.perf_counter()
                stub.message(f"ping {n}")
                stub.wait(lambda s, n=n: len(s.texts_to(ss.OWNER)) > n, timeout=60)
                if n >= WARMUP:
                    samples.append(time.perf_counter() - started)
            pid = int(json.loads((home / "daemon.pid").read_text())["pid"])
            before, wall = _cpu_seconds(pid), time.perf_counter()
            requests = len(stub.requests())
            time.sleep(IDLE_SECONDS)  # the idle window being measured
            used, wall = _cpu_seconds(pid) - before, time.perf_counter() - wall
            idle_requests = len(stub.requests()) - requests
        finally:
            subprocess.run([FERMIX, "stop"], env=env, capture_output=True, timeout=60)
    return {
        "message_to_reply": _summary(samples),
        "idle_cpu": {
            "window_s": round(wall, 1),
            "cpu_s": round(used, 3),
            "core_percent": round(100 * used / wall, 3),
            "json_rpc_requests": idle_requests,
        },
        "notes": "shared, loaded 2-core machine: figures are pessimistic; the stub signal-cli "
        "answers at once (a real signal-cli adds its own Signal round trip); daemon idle CPU "
        "includes everything else the daemon does while idle",
    }


if __name__ == "__main__":
    print(json.dumps(run(), indent=2))
