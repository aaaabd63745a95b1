"""In-process boot assembly: discover and load every first-party plugin, collect its specs.

Measured in a fresh subprocess per sample (first-time imports are the real cost) and also
warm in-process (the repeat cost of collecting specs once modules are imported).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

RUNS = 15

_PROBE = r"""
import json, time
t0 = time.perf_counter()
from fermix_core.boot import assemble
a = assemble()
t1 = time.perf_counter()
cfg_ok = True
try:
    a.load_config()
except Exception:
    cfg_ok = False
t2 = time.perf_counter()
print(json.dumps({"assemble_ms": (t1 - t0) * 1000, "config_ms": (t2 - t1) * 1000,
                  "plugins": len(a.host.records), "specs": sum(1 for _ in a.registry),
                  "errors": len(a.registry.errors), "config_ok": cfg_ok}))
"""


def run() -> dict:
    env = dict(os.environ)
    # Installed packages run from cached bytecode (pip compiles at install; uv on first
    # import), so measure that: allow .pyc writes and let the warm-up run create them.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["FERMIX_HOME"] = tempfile.mkdtemp(prefix="fermix-bench-")
    subprocess.run(
        [sys.executable, "-c", _PROBE], env=env, capture_output=True, check=True
    )  # warm-up
    cold = []
    for _ in range(RUNS):
        out = subprocess.run(
            [sys.executable, "-c", _PROBE], env=env, capture_output=True, text=True, check=True
        )
        cold.append(json.loads(out.stdout))
    from fermix_core.boot import assemble

    os.environ["FERMIX_HOME"] = env["FERMIX_HOME"]
    assemble()
    warm = []
    for _ in range(RUNS):
        t = time.perf_counter()
        assemble()
        warm.append((time.perf_counter() - t) * 1000)
    return {
        "runs": RUNS,
        "plugins": cold[-1]["plugins"],
        "specs": cold[-1]["specs"],
        "spec_errors": cold[-1]["errors"],
        "cold_assemble_median_ms": round(statistics.median(c["assemble_ms"] for c in cold), 2),
        "cold_config_validate_median_ms": round(statistics.median(c["config_ms"] for c in cold), 2),
        "warm_assemble_median_ms": round(statistics.median(warm), 2),
    }
