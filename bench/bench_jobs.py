"""Scheduled jobs: scheduler tick cost and memory over 10,000 jobs, claim latency, and
next-due computation for 10,000 cron expressions.

Everything runs on a real SQLite ``memory.db`` in a temporary directory and a fake clock, so
the numbers are the store and scheduler work alone (no model calls). Budget from the jobs
issue: one scheduler pass over 10,000 idle jobs <= 5 ms.
"""

from __future__ import annotations

import random
import resource
import statistics
import tempfile
import time
import tracemalloc
from pathlib import Path

import anyio

JOBS = 10_000
TICKS = 300
CLAIMS = 500
CRONS = 10_000
T0 = 1_800_000_000.0


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * (len(ordered) - 1)))]


def _summary(values: list[float]) -> dict:
    return {
        "n": len(values),
        "median_ms": round(statistics.median(values), 4),
        "p90_ms": round(_pct(values, 0.9), 4),
        "p99_ms": round(_pct(values, 0.99), 4),
        "max_ms": round(max(values), 4),
    }


def _cron_expressions(count: int, seed: int = 13) -> list[str]:
    rng = random.Random(seed)

    def field(low: int, high: int) -> str:
        kind = rng.randrange(5)
        if kind == 0:
            return "*"
        if kind == 1:
            return str(rng.randint(low, high))
        a, b = sorted(rng.sample(range(low, high + 1), 2))
        if kind == 2:
            return f"{a}-{b}"
        if kind == 3:
            return f"*/{rng.randint(1, max(1, (high - low) // 2))}"
        return ",".join(str(v) for v in sorted(rng.sample(range(low, high + 1), 3)))

    out = []
    for _ in range(count):
        dom, dow = (field(1, 28), "*") if rng.random() < 0.5 else ("*", field(0, 7))
        out.append(f"{field(0, 59)} {field(0, 23)} {dom} {field(1, 12)} {dow}")
    return out


async def _store_benchmarks(path: Path) -> dict:
    from fermix_core.jobs.clock import FakeClock
    from fermix_core.jobs.scheduler import Scheduler
    from fermix_core.jobs.store import SqliteJobStore
    from fermix_core.testing.jobs import make_job

    store = await SqliteJobStore.open(path)
    rng = random.Random(7)
    sync = store._sync
    assert sync is not None
    started = time.perf_counter()
    for n in range(JOBS):
        # Idle: every job is due somewhere in the next 30 days; a tenth of them expire.
        sync.create_job(
            make_job(
                f"j{n:05}",
                next_run_at=T0 + 60 + rng.random() * 30 * 86400,
                expires_at=T0 + 40 * 86400 if n % 10 == 0 else None,
            )
        )
    insert_s = time.perf_counter() - started

    async def execute(job, run, release):  # never called: nothing is due
        raise AssertionError("idle jobs must not run")

    clock = FakeClock(T0)
    scheduler = Scheduler(store, execute, clock=clock)
    for _ in range(20):  # warm caches and the worker thread
        await scheduler._delay(await scheduler.tick())
    ticks = []
    tracemalloc.start()
    for _ in range(TICKS):
        t = time.perf_counter()
        report = await scheduler.tick()
        await scheduler._delay(report)  # the pass's sleep computation (no store read if idle)
        ticks.append((time.perf_counter() - t) * 1000)
        assert not report.claimed
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()

    # Claim latency: take and settle due jobs one by one (each claim is one transaction).
    claims, settles = [], []
    for n in range(CLAIMS):
        job = sync.get_job(f"j{n:05}")
        t = time.perf_counter()
        run = await store.claim(
            job.id,
            now=T0,
            trigger="schedule",
            session_id="cron_bench",
            config={"task_prompt": job.task_prompt},
            due_at=job.next_run_at,
            next_run_at=job.next_run_at + 600,
        )
        claims.append((time.perf_counter() - t) * 1000)
        assert run is not None
        t = time.perf_counter()
        await store.settle(run.id, status="succeeded", now=T0 + 1)
        settles.append((time.perf_counter() - t) * 1000)
    await store.aclose()
    return {
        "jobs": JOBS,
        "insert_seconds": round(insert_s, 3),
        "tick_idle": {**_summary(ticks), "budget_ms": 5.0},
        "tick_python_alloc_peak_kib": round(peak / 1024, 1),
        # The scheduler keeps no per-job state in memory: jobs live in SQLite only.
        "process_max_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "claim": _summary(claims),
        "settle": _summary(settles),
        "db_bytes": path.stat().st_size
        + (Path(f"{path}-wal").stat().st_size if Path(f"{path}-wal").exists() else 0),
    }


def _cron_benchmark() -> dict:
    from fermix_core.jobs.schedules import parse_schedule

    expressions = _cron_expressions(CRONS)
    parsed = []
    t = time.perf_counter()
    for expression in expressions:
        parsed.append(parse_schedule(expression, "Europe/Berlin"))
    parse_s = time.perf_counter() - t
    per = []
    t_all = time.perf_counter()
    for schedule in parsed:
        t = time.perf_counter()
        schedule.next_after(T0)
        per.append((time.perf_counter() - t) * 1000)
    total_s = time.perf_counter() - t_all
    return {
        "expressions": CRONS,
        "parse_total_ms": round(parse_s * 1000, 1),
        "next_due_total_ms": round(total_s * 1000, 1),
        "next_due_per_expression": _summary(per),
        "zone": "Europe/Berlin",
    }


def run() -> dict:
    with tempfile.TemporaryDirectory(prefix="fermix-bench-jobs-") as tmp:
        stores = anyio.run(_store_benchmarks, Path(tmp) / "memory.db")
    return {
        **stores,
        "cron": _cron_benchmark(),
        "note": "shared 2-core machine under load from parallel work; numbers are pessimistic",
    }


if __name__ == "__main__":
    import json

    print(json.dumps(run(), indent=2))
