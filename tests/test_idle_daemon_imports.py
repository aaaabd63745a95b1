"""What an idle ``fermix run`` daemon keeps imported (issue 18's idle RSS budget).

The daemon runs in a fresh interpreter through the console entry point's ``run`` path;
its ready callback records ``sys.modules`` and stops the daemon with SIGTERM, so the check
sees exactly what the daemon loaded on the way to ready: every first-party plugin, the
on-by-default ACP channel and the web surface, but none of the libraries only needed by
the CLI framework, an ACP client connection or a schema migration.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

PROBE = """
import json, os, signal, sys
from fermix_core.cli import run_core
from fermix_core.cli.entry import main

def ready(line):
    print(json.dumps({"ready": line, "modules": sorted(sys.modules)}), flush=True)
    os.kill(os.getpid(), signal.SIGTERM)

run_core._print_ready = ready
sys.exit(main(["run"]))
"""

#: Never resident in an idle daemon (the first use imports them; tests cover those paths).
ABSENT = (
    "typer",
    "acp",
    "sqlalchemy",
    "sqlmodel",
    "markdown_it",
    "websockets",
    "starlette",
    "uvicorn",
    "httptools",
)


def _idle_modules(home) -> tuple[str, list[str]]:
    env = {k: v for k, v in os.environ.items() if k != "FERMIX_LOAD_PLUGINS"}
    env.update(
        FERMIX_HOME=str(home), PYTHON_KEYRING_BACKEND="fermix_core.keyring_backend.MemoryKeyring"
    )
    done = subprocess.run(
        [sys.executable, "-c", PROBE],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    return report["ready"], report["modules"]


@pytest.fixture
def home(tmp_path):
    home = tmp_path / "h"
    home.mkdir(mode=0o700)
    (home / "config.toml").write_text(
        "[fermix_core.providers.ollama]\nprimary = true\n"
        'base_url = "http://127.0.0.1:9/v1"\ndefault_model = "qwen3"\n'
        "[fermix_core.memory]\nreview_enabled = false\n"
        "[fermix_web]\nport = 0\n"
    )
    return home


def test_an_idle_daemon_loads_no_cli_framework_acp_sdk_or_orm(home) -> None:
    for start in ("fresh home", "existing home"):
        ready, modules = _idle_modules(home)
        assert "channels: acp" in ready, (start, ready)
        held = [m for m in modules if any(m == a or m.startswith(a + ".") for a in ABSENT)]
        assert held == [], start
        # The plugins really were loaded (this is not an empty daemon).
        for plugin in ("fermix_providers", "fermix_channels", "fermix_tools"):
            assert plugin in modules, (start, plugin)
