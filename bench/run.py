"""Run the benchmarks and write JSON results to bench/results/.

    uv run python bench/run.py                 # every benchmark
    uv run python bench/run.py cli_startup     # one of them

These are measurements, not tests: nothing here fails on a number. The issue notes quote
the results files.
"""

from __future__ import annotations

import importlib
import json
import platform
import sys
import time
from pathlib import Path

HERE = Path(__file__).parent
RESULTS = HERE / "results"
BENCHMARKS = [
    "cli_startup",
    "boot_assembly",
    "store",
    "wires",
    "turns",
    "cold_ask",
    "memory",
    "sandbox",
    "streaming",
    "slack",
    "confine",
    "traces",
    "presentation",
    "jobs",
    "channels",
    "telegram",
    "discord",
    "signal",
    "subagents",
    "acp",
    "mcp",
    "transcription",
    "images",
]


def speed_probe_ms() -> float:
    """CPU milliseconds of a fixed pure-Python loop (best of three).

    The shared VM's speed drifts by a third from one minute to the next (the same loop took
    470-650 ms within ten minutes, at the same load average), and CPU time per turn follows
    it. Recorded before and after every benchmark, it tells a slow machine from slow code.
    """
    best = float("inf")
    for _ in range(3):
        started = time.process_time()
        total = 0
        for i in range(1_000_000):
            total += i * i
        best = min(best, time.process_time() - started)
    return round(best * 1000, 1)


def main(argv: list[str]) -> int:
    names = argv or BENCHMARKS
    RESULTS.mkdir(exist_ok=True)
    sys.path.insert(0, str(HERE))
    for name in names:
        module = importlib.import_module(f"bench_{name}")
        probe_before = speed_probe_ms()
        started = time.perf_counter()
        result = module.run()
        elapsed = time.perf_counter() - started
        probe_after = speed_probe_ms()
        result["benchmark"] = name
        result["machine"] = {
            "python": platform.python_version(),
            "platform": platform.platform(),
            "cpus": __import__("os").cpu_count(),
            "speed_probe_ms": {"before": probe_before, "after": probe_after},
        }
        result["wall_seconds"] = round(elapsed, 3)
        out = RESULTS / f"{name}.json"
        out.write_text(json.dumps(result, indent=2) + "\n")
        print(json.dumps(result, indent=2))
        print(f"wrote {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
