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


def main(argv: list[str]) -> int:
    names = argv or BENCHMARKS
    RESULTS.mkdir(exist_ok=True)
    sys.path.insert(0, str(HERE))
    for name in names:
        module = importlib.import_module(f"bench_{name}")
        started = time.perf_counter()
        result = module.run()
        result["benchmark"] = name
        result["machine"] = {
            "python": platform.python_version(),
            "platform": platform.platform(),
            "cpus": __import__("os").cpu_count(),
        }
        result["wall_seconds"] = round(time.perf_counter() - started, 3)
        out = RESULTS / f"{name}.json"
        out.write_text(json.dumps(result, indent=2) + "\n")
        print(json.dumps(result, indent=2))
        print(f"wrote {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
