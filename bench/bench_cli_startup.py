"""Cold ``fermix --help`` / ``fermix --version`` against a bare interpreter, in the same run.

Each sample is a fresh process. Peak RSS comes from GNU time (``/usr/bin/time -f %M``): a
child's own ru_maxrss would include the memory of this Python parent it was forked from,
so the measured command is exec'd by the small ``time`` binary instead.

Budget from the foundation issue: --help <= 5x the bare interpreter's median time and
<= 35 MiB peak RSS.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

RUNS = 21


GNU_TIME = "/usr/bin/time"


def _sample(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    with tempfile.NamedTemporaryFile("r") as report:
        started = time.perf_counter()
        subprocess.run(
            [GNU_TIME, "-o", report.name, "-f", "%M", *argv],
            env=env,
            stdout=subprocess.DEVNULL,
            check=True,
        )
        elapsed = time.perf_counter() - started
        rss_kib = float(report.read().strip().splitlines()[-1])
    return elapsed, rss_kib / 1024.0


def _measure(argv: list[str], env: dict[str, str]) -> dict:
    _sample(argv, env)  # warm the page cache once; every measured run is still a new process
    times, rss = [], []
    for _ in range(RUNS):
        t, m = _sample(argv, env)
        times.append(t * 1000)
        rss.append(m)
    return {
        "runs": RUNS,
        "median_ms": round(statistics.median(times), 2),
        "p90_ms": round(sorted(times)[int(0.9 * (RUNS - 1))], 2),
        "min_ms": round(min(times), 2),
        "max_rss_mib": round(max(rss), 2),
        "median_rss_mib": round(statistics.median(rss), 2),
    }


def run() -> dict:
    if not os.path.exists(GNU_TIME):
        raise SystemExit("GNU time is needed for RSS (apt-get install time)")
    fermix = shutil.which("fermix", path=os.path.dirname(sys.executable))
    if fermix is None:
        raise SystemExit("fermix is not installed in this environment (uv sync first)")
    env = dict(os.environ)
    # Installed packages run from cached bytecode (pip compiles at install; uv on first
    # import), so measure that: allow .pyc writes and let the warm-up run create them.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["FERMIX_HOME"] = tempfile.mkdtemp(prefix="fermix-bench-")
    bare = _measure([sys.executable, "-c", "pass"], env)
    help_ = _measure([fermix, "--help"], env)
    version = _measure([fermix, "--version"], env)
    ratio = help_["median_ms"] / bare["median_ms"]
    return {
        "python_c_pass": bare,
        "fermix_help": help_,
        "fermix_version": version,
        "help_vs_bare_ratio": round(ratio, 2),
        # First-run issue: `fermix --help` stays within 1.5x a bare interpreter start.
        "budget": {"help_ratio_max": 1.5, "help_rss_mib_max": 35.0},
        "within_budget": ratio <= 1.5 and help_["max_rss_mib"] <= 35.0,
    }
