"""Sub-agent fan-out: our overhead per worker and memory per worker.

Eight workers (one ``subagents`` call at concurrency 8) against an instant in-process
provider, so every microsecond measured is Fermix's own: the worker surface, the loop, the
prompt, the context, the trace lines (real JSONL files in a temporary FERMIX_HOME) and the
structured answer. Budget from the sub-agents issue: <= 2 ms and <= 2 MiB per worker.

``per_worker_ms`` is the wall time of one 8-worker fan-out divided by 8;
``per_worker_overhead_ms`` subtracts the cost of the same eight tasks run as bare agent
loops one after another (what the work would cost without delegation). Memory is the
tracemalloc peak of one fan-out divided by 8 (Python heap, what a worker adds), with the
process's peak RSS alongside.
"""

from __future__ import annotations

import resource
import statistics
import tempfile
import time
import tracemalloc
from pathlib import Path

import anyio

WORKERS = 8
ROUNDS = 200


async def _measure(base: Path) -> dict:
    from fermix_core.agent import AgentLoop, CapabilityRegistry, SingleProviderCaller
    from fermix_core.agent.delegation import Delegator, worker_surface
    from fermix_core.home import FermixHome
    from fermix_core.messages import Message
    from fermix_core.testing import FunctionProvider
    from fermix_core.testing.providers import reply
    from fermix_core.tool import ToolContext, Trust
    from fermix_core.traces import Tracer
    from fermix_tools.meta.plugin import MODEL_ROUTING_CONFIG, REACT, SEND_ATTACHMENT, TOOL_HELP
    from fermix_tools.skills.plugin import SKILL_TOOLS

    home = FermixHome(base)
    base.mkdir(parents=True, exist_ok=True)
    provider = FunctionProvider(lambda request: reply("done"))
    caller = SingleProviderCaller(provider)
    capabilities = CapabilityRegistry(
        [*SKILL_TOOLS, TOOL_HELP, SEND_ATTACHMENT, REACT, MODEL_ROUTING_CONFIG], deferral=False
    )

    async def callers(model):
        return caller

    delegator = Delegator(capabilities, callers, tracer=Tracer(home))
    snapshot = capabilities.snapshot(Trust.OPERATOR)
    ctx = ToolContext(
        trust=Trust.OPERATOR,
        cwd=base,
        home=home,
        session_id="main-1",
        capabilities=snapshot.specs,
        services={"delegation": delegator},
    )
    tasks = [f"task {i}" for i in range(WORKERS)]

    async def fan_out() -> None:
        surface = worker_surface(capabilities, ctx.capabilities, ctx.trust, 1)
        outcomes = await delegator.run(
            tasks, ctx, surface=surface, concurrency=WORKERS, iterations=100
        )
        assert all(o.status == "ok" for o in outcomes)

    surface = worker_surface(capabilities, snapshot.specs, Trust.OPERATOR, 1)

    async def bare() -> None:
        for task in tasks:
            loop = AgentLoop(caller, surface)
            await loop.run([Message.system("x"), Message.user(task)], ctx)

    for _ in range(20):  # warm imports, caches, schema generation
        await fan_out()
        await bare()
    fan, plain = [], []
    for _ in range(ROUNDS):
        started = time.perf_counter()
        await fan_out()
        fan.append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        await bare()
        plain.append((time.perf_counter() - started) * 1000)
    tracemalloc.start()
    await fan_out()
    _current, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    median_fan = statistics.median(fan)
    median_bare = statistics.median(plain)
    return {
        "workers": WORKERS,
        "rounds": ROUNDS,
        "fan_out_median_ms": round(median_fan, 4),
        "fan_out_p90_ms": round(sorted(fan)[int(0.9 * (len(fan) - 1))], 4),
        "per_worker_ms": round(median_fan / WORKERS, 4),
        "bare_loops_median_ms": round(median_bare, 4),
        "per_worker_overhead_ms": round((median_fan - median_bare) / WORKERS, 4),
        "heap_peak_per_worker_kib": round(peak / WORKERS / 1024, 1),
        "process_peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "budget": {"per_worker_ms": 2.0, "per_worker_mib": 2.0},
    }


def run() -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        return anyio.run(_measure, Path(tmp) / "home")


if __name__ == "__main__":
    import json

    print(json.dumps(run(), indent=2))
