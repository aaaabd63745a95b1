"""Our own overhead per turn on the real gateway → queue → loop → commit path.

Every scenario runs the same runtime a daemon runs (:class:`fermix_core.api.Fermix`: the
gateway, the per-conversation queue, the turn runner, the agent loop, the tracer and the
conversation store on a real SQLite file with its worker thread). Only the model is fake:
an in-process plugin registers a keyless ``bench`` provider whose adapter answers at once,
and 5 or 30 trivial tools, exactly as an installed plugin would.

"Overhead" is the wall time of ``fx.ask`` minus the time spent inside the provider's
``chat``: what a turn costs on top of the model, which is the part Fermix controls. The
scenarios and budgets are the runtime issue's:

- ``text_minimal`` — 5 tools, a plain text answer; overhead p50 ≤ 0.5 ms, p99 ≤ 1.5 ms.
- ``text_set_up_home`` — ``text_minimal`` on a home whose prompt files exist (seeded as
  ``fermix setup`` seeds them: IDENTITY/SOUL/FERMIX.md, USER.md, MEMORY.md), as on every
  installed daemon; the other scenarios run on a bare home (shipped templates in memory).
- ``text_with_tools`` — 30 tools, one tool call, then text; overhead p50 ≤ 0.7 ms.
- ``long_history`` — a conversation already holding 100 messages.
- ``max_iterations`` — a model that calls a tool every time, until the 100-step bound.
- ``cold_start`` — a fresh runtime (``Fermix.open``) per sample, and its first turn.
- ``fifo_contention`` — many concurrent asks on one conversation, 10 ms model latency.
- ``multi_conversation_throughput`` — 100 conversations at once; ≥ 2,000 turns/s.
- ``idle_daemon_rss`` — a real ``fermix run`` daemon with every first-party plugin loaded,
  idle after its ready line: VmRSS on a fresh home and on a home that already has its
  database; ≤ 60 MiB.

Every run records the load average: on the shared 2-core machine the wall-clock figures
move with other work, the CPU-per-turn figures much less. The sequential scenarios and
every round of ``multi_conversation_throughput`` also record what ran beside their turns
(``alongside`` / ``rounds``: history-index transactions and message ids indexed, the
store's background checkpoints, store calls retried on a ``memory.db`` locked by the
indexer, collector runs), and ``bench/run.py`` a speed probe before and after, so a slow
machine can be told from a slow turn.

Plugin tools are third-party, so by default their schemas are deferred behind
``tool_search``; the scenarios switch deferral off so all 5 or 30 schemas travel on every
request (the heavier case). Conversations are kept short (a few turns each) unless the
scenario is about history, so one scenario's samples do not measure a growing window.

``soak.py`` reuses :class:`BenchPlugin` and :func:`open_bench` from here.
"""

from __future__ import annotations

import gc
import math
import os
import statistics
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
from fermix_core.hookspecs import hookimpl
from fermix_core.messages import Message, Turn, Usage
from fermix_core.provider import ChatRequest
from fermix_core.runtime import settle_after_boot
from fermix_core.specs import ModelInfo, PolicyClass, ProviderSpec, ToolSpec
from fermix_core.testing.providers import FunctionProvider, tool_call
from fermix_core.tool import Tool, ToolContext
from pydantic import BaseModel

MODEL = "bench-model"
PROVIDER = "bench"
#: Never contacted: a keyless provider counts as configured only once a base_url is written.
UNUSED_URL = "http://127.0.0.1:9/v1"
BUDGET_P50_MS = 0.5
BUDGET_P99_MS = 1.5
BUDGET_TOOLS_P50_MS = 0.7
BUDGET_TURNS_PER_S = 2000.0
BUDGET_RSS_MIB = 60.0

TEXT_SAMPLES = 2000
TOOL_SAMPLES = 1000
TURNS_PER_CONVERSATION = 10
LONG_HISTORY_MESSAGES = 100
LONG_HISTORY_SAMPLES = 200
MAX_ITERATION_SAMPLES = 20
COLD_SAMPLES = 20
FIFO_ROUNDS = 5
FIFO_CONCURRENT = 20
FIFO_DELAY_S = 0.010
MULTI_CONVERSATIONS = 100
MULTI_ROUNDS = 5
MULTI_TURNS_PER_ROUND = 10
MULTI_GROWING_ROUNDS = 8
WARMUP_TURNS = 50


# --------------------------------------------------------------------------- the fake model


@dataclass
class ProviderClock:
    """Time spent inside the provider: a running total and each call's (start, end)."""

    spent: float = 0.0
    calls: list[tuple[float, float]] = field(default_factory=list)
    keep_calls: bool = False
    #: Tool schemas on the last request: proof of what the scenario actually sent.
    tools_on_wire: int = 0

    def reset(self) -> None:
        self.spent = 0.0
        self.calls.clear()


class TimedProvider(FunctionProvider):
    """A :class:`FunctionProvider` that clocks itself and keeps no request log.

    The fake's own bookkeeping is inside the timed span, so it is subtracted with the model
    time. It keeps no request log (``keep_requests``), so a long run's memory and the
    throughput scenarios' CPU measure Fermix, not the fake.
    """

    keep_requests = False

    def __init__(self, fn: Callable[[ChatRequest], Any], clock: ProviderClock) -> None:
        super().__init__(fn, name=PROVIDER, model=MODEL)
        self.clock = clock

    async def chat(self, request: ChatRequest) -> Turn:
        started = time.perf_counter()
        self.clock.tools_on_wire = len(request.tools)
        try:
            return await super().chat(request)
        finally:
            ended = time.perf_counter()
            self.clock.spent += ended - started
            if self.clock.keep_calls:
                self.clock.calls.append((started, ended))


class BenchArgs(BaseModel):
    n: int = 0


class BenchTool(Tool[BenchArgs]):
    """A tool that does nothing, so the dispatch path is all that is measured."""

    async def run(self, args: BenchArgs, ctx: ToolContext) -> str:
        return f"done {args.n}"


class BenchPlugin:
    """Registers the ``bench`` provider and *tools* trivial tools, like any plugin would.

    ``model`` answers each request; each scenario builds its plugin with its own script.
    """

    def __init__(self, tools: int, model: Callable[[ChatRequest], Any]) -> None:
        self.tools = tools
        self.model = model
        self.clock = ProviderClock()

    @hookimpl
    def fermix_providers(self):
        yield ProviderSpec(
            name=PROVIDER,
            label="Benchmark model",
            factory=self.build,
            keyless=True,
            auth_modes=("none",),
            default_model=MODEL,
            models=(ModelInfo(id=MODEL, context_window=200_000),),
        )

    @hookimpl
    def fermix_tools(self):
        for i in range(self.tools):
            yield ToolSpec(
                name=f"bench_tool_{i}",
                description=f"Benchmark tool number {i}: returns a short fixed text.",
                factory=BenchTool,
                args_model=BenchArgs,
                policy=PolicyClass.READ_ONLY,
            )

    def build(self, spec: ProviderSpec, settings: Any) -> TimedProvider:
        return TimedProvider(lambda request: self.model(request), self.clock)


def bench_config(*, deferral: bool = False) -> dict[str, Any]:
    return {
        "fermix_core": {
            "providers": {
                PROVIDER: {"primary": True, "base_url": UNUSED_URL, "default_model": MODEL}
            },
            "tools": {"tool_search": {"enabled": deferral}},
            # The background memory review calls the primary model on its own schedule (the
            # first one soon after a fresh home boots). Its calls would be counted as turns
            # and make the scenarios depend on timing, so the benchmark turns it off.
            "memory": {"review_enabled": False},
        }
    }


@asynccontextmanager
async def open_bench(
    home: Path, plugin: BenchPlugin, *, deferral: bool = False
) -> AsyncIterator[Any]:
    """A running embedded Fermix whose primary route is *plugin*'s instant model."""
    from fermix_core.api import Fermix

    async with Fermix.open(
        home,
        config=bench_config(deferral=deferral),
        environ={},
        plugins=[("providers.bench", plugin)],
        entry_points=False,
    ) as fx:
        primary = fx.status()["primary_provider"]
        if primary != PROVIDER:
            raise SystemExit(
                f"the bench provider is not the primary route (got {primary!r}); "
                "check bench_config() against the routing rules"
            )
        # What the daemon does once it is ready: boot objects leave the collector's sight.
        settle_after_boot()
        yield fx


# --------------------------------------------------------------------------- model scripts

_TEXT = Turn(content="All done: a short answer of ordinary length.", model=MODEL)


def text_answer(request: ChatRequest) -> Turn:
    return _TEXT


def one_tool_then_text(request: ChatRequest) -> Turn:
    if request.messages[-1].role == "tool":
        return _TEXT
    return tool_call("bench_tool_7", {"n": 1}, model=MODEL)


def always_tool(request: ChatRequest) -> Turn:
    # Arguments differ every step, so the repeated-call detector never ends the loop early.
    return tool_call("bench_tool_1", {"n": len(request.messages)}, model=MODEL)


def last_user_text(request: ChatRequest) -> str:
    for message in reversed(request.messages):
        if message.role == "user":
            return message.text
    return ""


# --------------------------------------------------------------------------- statistics


class GcTimer:
    """Total time the cyclic garbage collector paused the process, and how often."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.collections = [0, 0, 0]
        self._started = 0.0

    def _callback(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.seconds += time.perf_counter() - self._started
            self.collections[info["generation"]] += 1

    def __enter__(self) -> GcTimer:
        gc.callbacks.append(self._callback)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self._callback)

    def report(self, wall: float) -> dict[str, Any]:
        return {
            "gc_ms": round(self.seconds * 1000, 1),
            "gc_share_of_wall": round(self.seconds / wall, 3) if wall else None,
            "collections_by_generation": self.collections,
        }


def background(fx: Any, collector: GcTimer | None = None) -> dict[str, int]:
    """Counters of the work that runs beside the turns (read, not changed, by the benchmark).

    The history indexer's catch-up transactions and the message ids they covered, the
    store's background checkpoints, the store calls' short retries of a ``memory.db`` held
    locked by another connection (the indexer), and the collector's runs. Differences of two
    snapshots say what else ran during a measurement, so a slow minute of the machine can be
    told from a measurement that paid for indexing or collections.
    """
    service = fx.service
    memory = getattr(service.history_index, "memory", None)
    store = service.store
    counters = {
        "history_transactions": getattr(memory, "history_transactions", 0),
        "history_ids_indexed": getattr(memory, "history_indexed", 0),
        "store_checkpoints": store.checkpointer.runs,
        "store_locked_retries": store.worker.quick_retries,
    }
    if collector is not None:
        for generation, count in enumerate(collector.collections):
            counters[f"gc_gen{generation}"] = count
        counters["gc_us"] = round(collector.seconds * 1e6)
    return counters


def since(before: dict[str, int], after: dict[str, int]) -> dict[str, Any]:
    out: dict[str, Any] = {k: after[k] - before[k] for k in after}
    if "gc_us" in out:
        out["gc_ms"] = round(out.pop("gc_us") / 1000, 1)
    return out


def percentile(sorted_values: list[float], q: float) -> float:
    """Nearest-rank percentile of an already sorted list."""
    if not sorted_values:
        return math.nan
    rank = max(1, math.ceil(q * len(sorted_values)))
    return sorted_values[min(rank, len(sorted_values)) - 1]


def distribution(samples_s: list[float]) -> dict[str, float]:
    """p50/p95/p99 (and friends) in milliseconds."""
    ms = sorted(s * 1000 for s in samples_s)
    return {
        "n": len(ms),
        "p50_ms": round(percentile(ms, 0.50), 3),
        "p95_ms": round(percentile(ms, 0.95), 3),
        "p99_ms": round(percentile(ms, 0.99), 3),
        "mean_ms": round(statistics.fmean(ms), 3),
        "min_ms": round(ms[0], 3),
        "max_ms": round(ms[-1], 3),
    }


def check(outcome: Any, what: str) -> None:
    if outcome.status != "ok" or outcome.provider != PROVIDER:
        raise SystemExit(
            f"{what}: the turn did not run on the bench route "
            f"(status={outcome.status!r}, provider={outcome.provider!r}): {outcome.text!r}"
        )


async def timed_ask(
    fx: Any, clock: ProviderClock, text: str, session: str
) -> tuple[float, float, Any]:
    """One sequential ask: (wall seconds, provider seconds, outcome)."""
    clock.spent = 0.0
    started = time.perf_counter()
    outcome = await fx.ask(text, session=session)
    wall = time.perf_counter() - started
    return wall, clock.spent, outcome


# --------------------------------------------------------------------------- scenarios


async def sequential(
    home: Path,
    *,
    tools: int,
    model: Callable[[ChatRequest], Any],
    samples: int,
    what: str,
    set_up: bool = False,
) -> dict[str, Any]:
    """*samples* asks one after another, ``TURNS_PER_CONVERSATION`` per conversation.

    *set_up* seeds the prompt files first, as ``fermix setup`` does.
    """
    if set_up:
        from fermix_core.prompt import seed_bootstrap

        seed_bootstrap(home, agent_name="Fermix")
    plugin = BenchPlugin(tools, model)
    async with open_bench(home, plugin) as fx:
        for i in range(WARMUP_TURNS):
            check(await fx.ask("warm up", session=f"warm-{i % 5}"), what)
        overhead, walls, provider = [], [], []
        before = background(fx)
        started, cpu = time.perf_counter(), time.process_time()
        with GcTimer() as collector:
            for i in range(samples):
                session = f"s{i // TURNS_PER_CONVERSATION}"
                wall, spent, outcome = await timed_ask(fx, plugin.clock, f"question {i}", session)
                check(outcome, what)
                walls.append(wall)
                provider.append(spent)
                overhead.append(wall - spent)
        elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
        alongside = since(before, background(fx))
    return {
        "tools": tools,
        "tools_on_wire": plugin.clock.tools_on_wire,
        "overhead": distribution(overhead),
        "wall": distribution(walls),
        "provider_mean_ms": round(statistics.fmean(provider) * 1000, 3),
        "turns_per_s": round(samples / elapsed, 1),
        "cpu_ms_per_turn": round(cpu / samples * 1000, 3),
        "tool_calls_per_turn": len(outcome.tool_calls),
        "gc": collector.report(elapsed),
        "alongside": alongside,
    }


async def seed_history(fx: Any, session: str, messages: int) -> int:
    """Write *messages* (user/assistant pairs) into *session* straight through the store."""
    from fermix_core.channel import ConversationKey
    from fermix_core.service import CLI_CHANNEL

    store = fx.service.store
    cid = await store.conversation_id(ConversationKey(CLI_CHANNEL, session, None))
    for i in range(messages // 2):
        handle = await store.begin_turn(
            cid,
            Message.user(f"an earlier question, number {i}, of ordinary length for a chat"),
            speaker="owner",
            sender_id="local",
            session_id=f"seed-{i}",
        )
        await store.commit_turn(
            handle.turn_id,
            [Message.assistant(f"an earlier answer, number {i}, a sentence or two long. " * 2)],
            usage=Usage(),
            model=MODEL,
            provider=PROVIDER,
        )
    return cid


async def long_history(home: Path) -> dict[str, Any]:
    """Turns on conversations already holding 100 messages.

    ``overhead`` is the steady state of a live conversation: the previous turn loaded (and
    the store parsed) the window, so only rows new since then are parsed. ``cold_window`` is
    the first turn on such a conversation after a restart, when every row is parsed.
    """
    seen: list[int] = []

    def model(request: ChatRequest) -> Turn:
        seen.append(len(request.messages))
        return _TEXT

    plugin = BenchPlugin(5, model)
    async with open_bench(home, plugin) as fx:
        for i in range(WARMUP_TURNS):
            check(await fx.ask("warm up", session=f"warm-{i % 5}"), "long_history")
        for i in range(LONG_HISTORY_SAMPLES):
            cid = await seed_history(fx, f"long-{i}", LONG_HISTORY_MESSAGES)
            await fx.service.store.load_window(cid)  # what the previous turn would have done
            await seed_history(fx, f"cold-{i}", LONG_HISTORY_MESSAGES)
        seen.clear()
        results: dict[str, Any] = {"history_messages": LONG_HISTORY_MESSAGES}
        for label, prefix in (("overhead", "long"), ("cold_window", "cold")):
            overhead, started = [], time.perf_counter()
            for i in range(LONG_HISTORY_SAMPLES):
                wall, spent, outcome = await timed_ask(
                    fx, plugin.clock, "and now?", f"{prefix}-{i}"
                )
                check(outcome, "long_history")
                overhead.append(wall - spent)
            elapsed = time.perf_counter() - started
            results[label] = distribution(overhead)
            results[f"{label}_turns_per_s"] = round(LONG_HISTORY_SAMPLES / elapsed, 1)
    # system + the seeded history + the new user message
    expected = LONG_HISTORY_MESSAGES + 2
    if set(seen) != {expected}:
        raise SystemExit(
            f"long_history: the model saw {sorted(set(seen))} messages, not {expected}"
        )
    return results


async def max_iterations(home: Path) -> dict[str, Any]:
    plugin = BenchPlugin(5, always_tool)
    async with open_bench(home, plugin) as fx:
        check(await fx.ask("loop forever", session="warm"), "max_iterations")
        overhead = []
        for i in range(MAX_ITERATION_SAMPLES):
            wall, spent, outcome = await timed_ask(fx, plugin.clock, "loop forever", f"loop-{i}")
            check(outcome, "max_iterations")
            overhead.append(wall - spent)
        if len(outcome.tool_calls) != 100 or "100 steps" not in outcome.text:
            raise SystemExit(
                f"max_iterations: expected the 100-step bound, got {len(outcome.tool_calls)} "
                f"tool calls and {outcome.text!r}"
            )
    per_iteration = [o / 100 for o in overhead]
    return {
        "iterations": 100,
        "overhead_per_turn": distribution(overhead),
        "overhead_per_iteration": distribution(per_iteration),
    }


async def cold_start(root: Path) -> dict[str, Any]:
    """A new runtime per sample: boot, open the store, start, first turn, close."""

    async def one(home: Path, session: str) -> tuple[float, float, float, float]:
        plugin = BenchPlugin(5, text_answer)
        t0 = time.perf_counter()
        async with open_bench(home, plugin) as fx:
            t1 = time.perf_counter()
            wall, spent, outcome = await timed_ask(fx, plugin.clock, "hi", session)
            check(outcome, "cold_start")
            t2 = time.perf_counter()
        t3 = time.perf_counter()
        return t1 - t0, wall - spent, t3 - t2, t3 - t0 - spent

    reused = root / "reused"
    await one(reused, "warm")
    await one(root / "warm-fresh", "warm")
    opens, firsts, closes, totals = [], [], [], []
    fresh_totals = []
    for i in range(COLD_SAMPLES):
        o, f, c, t = await one(reused, f"cold-{i}")
        opens.append(o)
        firsts.append(f)
        closes.append(c)
        totals.append(t)
        *_, t_fresh = await one(root / f"fresh-{i}", "cold")
        fresh_totals.append(t_fresh)
    return {
        "open": distribution(opens),
        "first_turn_overhead": distribution(firsts),
        "close": distribution(closes),
        "total_overhead": distribution(totals),
        "fresh_home_total_overhead": distribution(fresh_totals),
    }


async def fifo_contention(home: Path) -> dict[str, Any]:
    """Concurrent asks on one conversation: they must run one at a time, in order."""
    order: list[str] = []
    lengths: list[int] = []

    async def model(request: ChatRequest) -> Turn:
        await anyio.sleep(FIFO_DELAY_S)  # the simulated model latency
        text = last_user_text(request)
        order.append(text)
        lengths.append(len(request.messages))
        return Turn(content=f"echo {text}", model=MODEL)

    plugin = BenchPlugin(5, model)
    plugin.clock.keep_calls = True
    gaps: list[float] = []
    latencies: list[float] = []
    problems: list[str] = []
    total_turns = 0
    total_wall = 0.0
    provider_total = 0.0
    async with open_bench(home, plugin) as fx:

        async def ask(text: str, session: str, submitted: float, into: dict[str, Any]) -> None:
            into[text] = await fx.ask(text, session=session)
            latencies.append(time.perf_counter() - submitted)

        check(await fx.ask("warm", session="warm"), "fifo_contention")
        for r in range(FIFO_ROUNDS):
            texts = [f"r{r} m{i}" for i in range(FIFO_CONCURRENT)]
            order.clear()
            lengths.clear()
            plugin.clock.reset()
            outcomes: dict[str, Any] = {}
            started = time.perf_counter()
            async with anyio.create_task_group() as tg:
                for text in texts:  # started in this order, so submitted in this order
                    tg.start_soon(ask, text, f"fifo-{r}", started, outcomes)
            total_wall += time.perf_counter() - started
            total_turns += FIFO_CONCURRENT
            provider_total += plugin.clock.spent
            calls = plugin.clock.calls
            gaps += [calls[k][0] - calls[k - 1][1] for k in range(1, len(calls))]
            for text, outcome in outcomes.items():
                check(outcome, "fifo_contention")
                if outcome.text != f"echo {text}":
                    problems.append(f"round {r}: {text!r} was answered {outcome.text!r}")
            if order != texts:
                problems.append(f"round {r}: the model saw {order} instead of {texts}")
            if lengths != [2 + 2 * i for i in range(FIFO_CONCURRENT)]:
                problems.append(f"round {r}: turns did not each see the earlier replies: {lengths}")
    if problems:
        raise SystemExit("fifo_contention: " + "; ".join(problems[:5]))
    return {
        "concurrent_asks": FIFO_CONCURRENT,
        "rounds": FIFO_ROUNDS,
        "model_delay_ms": FIFO_DELAY_S * 1000,
        "fifo_order_ok": True,
        "overhead_between_turns": distribution(gaps),
        "mean_overhead_per_turn_ms": round((total_wall - provider_total) / total_turns * 1000, 3),
        "ask_latency": distribution(latencies),
        "turns_per_s": round(total_turns / total_wall, 1),
        "ideal_turns_per_s": round(1 / FIFO_DELAY_S, 1),
    }


async def multi_conversation(home: Path) -> dict[str, Any]:
    """100 conversations at once, each sending its next message as soon as it is answered.

    The budgeted figure keeps windows short: every round moves each of the 100 senders to a
    new conversation, so windows hold 0–18 messages as in ``text_minimal``. ``growing``
    keeps the same 100 conversations for every round, so each round runs on windows 20
    messages longer than the one before — how throughput falls as conversations age.
    """
    plugin = BenchPlugin(5, text_answer)
    latencies: list[float] = []
    per_round = MULTI_CONVERSATIONS * MULTI_TURNS_PER_ROUND
    async with open_bench(home, plugin) as fx:

        async def conversation(session: str, record: bool) -> None:
            for t in range(MULTI_TURNS_PER_ROUND):
                started = time.perf_counter()
                outcome = await fx.ask(f"message {t}", session=session)
                if record:
                    latencies.append(time.perf_counter() - started)
                check(outcome, "multi_conversation_throughput")

        async def round_(sessions: list[str], record: bool) -> float:
            started = time.perf_counter()
            async with anyio.create_task_group() as tg:
                for session in sessions:
                    tg.start_soon(conversation, session, record)
            return MULTI_CONVERSATIONS * MULTI_TURNS_PER_ROUND / (time.perf_counter() - started)

        conversations = range(MULTI_CONVERSATIONS)
        await round_([f"warm-{c}" for c in conversations], False)
        worker = fx.service.store.worker
        calls, transactions = worker.calls, worker.batches
        short: list[float] = []
        rounds: list[dict[str, Any]] = []
        started, cpu = time.perf_counter(), time.process_time()
        with GcTimer() as collector:
            for r in range(MULTI_ROUNDS):
                # What else ran in each round (indexing, checkpoints, collections) and the
                # round's CPU per turn, beside its turns per second.
                before, round_cpu = background(fx, collector), time.process_time()
                short.append(await round_([f"r{r}-c{c}" for c in conversations], True))
                round_cpu = time.process_time() - round_cpu
                rounds.append(
                    {
                        "turns_per_s": round(short[-1], 1),
                        "cpu_ms_per_turn": round(round_cpu / per_round * 1000, 3),
                        **since(before, background(fx, collector)),
                    }
                )
        elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
        calls, transactions = worker.calls - calls, worker.batches - transactions
        growing = [
            await round_([f"g-c{c}" for c in conversations], False)
            for _ in range(MULTI_GROWING_ROUNDS)
        ]
        load = fx.service.queue.load()
    window_step = 2 * MULTI_TURNS_PER_ROUND
    return {
        "conversations": MULTI_CONVERSATIONS,
        "turns": per_round * MULTI_ROUNDS,
        "turns_per_s": round(statistics.harmonic_mean(short), 1),
        "turns_per_s_by_round": [round(r, 1) for r in short],
        "min_round_turns_per_s": round(min(short), 1),
        # CPU of both threads per turn: less sensitive than turns/s to other load on the box.
        "cpu_ms_per_turn": round(cpu / (per_round * MULTI_ROUNDS) * 1000, 3),
        "ask_latency": distribution(latencies),
        "gc": collector.report(elapsed),
        "rounds": rounds,
        # Group commit: store calls per SQLite transaction on the store's thread.
        "store_calls": calls,
        "store_transactions": transactions,
        "store_calls_per_transaction": round(calls / transactions, 2) if transactions else None,
        "growing": {
            "window_messages_at_round_start": [
                r * window_step for r in range(MULTI_GROWING_ROUNDS)
            ],
            "turns_per_s_by_round": [round(r, 1) for r in growing],
        },
        "lanes_left_after": load.lanes,
    }


def _daemon_rss_mib(home: Path) -> float:
    """VmRSS of a ``fermix run`` daemon on *home*, read right after its ready line."""
    import shutil
    import subprocess
    import sys

    fermix = shutil.which("fermix", path=os.path.dirname(sys.executable)) or "fermix"
    env = {k: v for k, v in os.environ.items() if k != "FERMIX_LOAD_PLUGINS"}
    env.update(
        FERMIX_HOME=str(home), PYTHON_KEYRING_BACKEND="fermix_core.keyring_backend.MemoryKeyring"
    )
    proc = subprocess.Popen(
        [fermix, "run"], env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    try:
        assert proc.stdout is not None
        ready = proc.stdout.readline()
        if "ready" not in ready:
            raise SystemExit(f"idle_daemon_rss: the daemon did not start: {ready!r}")
        status = Path(f"/proc/{proc.pid}/status").read_text()
        return int(status.split("VmRSS:")[1].split()[0]) / 1024
    finally:
        proc.terminate()
        proc.wait(timeout=60)


async def idle_daemon_rss(root: Path) -> dict[str, Any]:
    """Every first-party plugin loaded (the default set: Telegram and ACP channels on), a
    keyless primary provider, no model call: the daemon's resident memory once ready."""

    def measure() -> dict[str, Any]:
        home = root / "home"
        home.mkdir(parents=True, mode=0o700)
        (home / "config.toml").write_text(
            "[fermix_core.providers.ollama]\nprimary = true\n"
            f'base_url = "{UNUSED_URL}"\ndefault_model = "qwen3"\n'
            "[fermix_core.memory]\nreview_enabled = false\n"
            "[fermix_web]\nport = 0\n"
        )
        fresh = _daemon_rss_mib(home)  # creates memory.db (SQLAlchemy builds the schema)
        existing = [_daemon_rss_mib(home) for _ in range(3)]
        return {
            "fresh_home_mib": round(fresh, 1),
            "existing_home_mib": round(statistics.median(existing), 1),
            "existing_home_runs_mib": [round(v, 1) for v in existing],
        }

    return await anyio.to_thread.run_sync(measure)


SCENARIOS: dict[str, Callable[[Path], Any]] = {
    "text_minimal": lambda home: sequential(
        home, tools=5, model=text_answer, samples=TEXT_SAMPLES, what="text_minimal"
    ),
    "text_set_up_home": lambda home: sequential(
        home,
        tools=5,
        model=text_answer,
        samples=TEXT_SAMPLES,
        what="text_set_up_home",
        set_up=True,
    ),
    "text_with_tools": lambda home: sequential(
        home, tools=30, model=one_tool_then_text, samples=TOOL_SAMPLES, what="text_with_tools"
    ),
    "long_history": long_history,
    "max_iterations": max_iterations,
    "cold_start": cold_start,
    "fifo_contention": fifo_contention,
    "multi_conversation_throughput": multi_conversation,
    "idle_daemon_rss": idle_daemon_rss,
}


async def _scenarios(root: Path, names: list[str]) -> dict[str, Any]:
    from run import speed_probe_ms  # bench/ is on sys.path: run.py's probe, not a copy

    results: dict[str, Any] = {}
    for name in names:
        # The VM's speed drifts minute to minute: a probe right before each scenario (not
        # inside what it times) says how fast the machine was for that scenario.
        probe = speed_probe_ms()
        results[name] = await SCENARIOS[name](root / name)
        results[name]["speed_probe_ms_before"] = probe
    return results


def run(names: list[str] | None = None) -> dict:
    names = names or list(SCENARIOS)
    unknown = [n for n in names if n not in SCENARIOS]
    if unknown:
        raise SystemExit(f"unknown scenario(s) {unknown}; choose from {list(SCENARIOS)}")
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="fermix-bench-turns-") as tmp:
        results = anyio.run(_scenarios, Path(tmp), names)
    # Other work on the machine shows up as noise in every figure above; say how busy it was.
    results["loadavg_1min"] = {"before": load_before, "after": os.getloadavg()[0]}
    verdicts: dict[str, bool] = {}
    if "text_minimal" in results:
        overhead = results["text_minimal"]["overhead"]
        verdicts["text_minimal_p50"] = overhead["p50_ms"] <= BUDGET_P50_MS
        verdicts["text_minimal_p99"] = overhead["p99_ms"] <= BUDGET_P99_MS
    if "text_with_tools" in results:
        p50 = results["text_with_tools"]["overhead"]["p50_ms"]
        verdicts["text_with_tools_p50"] = p50 <= BUDGET_TOOLS_P50_MS
    if "multi_conversation_throughput" in results:
        multi = results["multi_conversation_throughput"]
        verdicts["multi_conversation_throughput"] = multi["turns_per_s"] >= BUDGET_TURNS_PER_S
        verdicts["multi_conversation_every_round"] = (
            multi["min_round_turns_per_s"] >= BUDGET_TURNS_PER_S
        )
    if "idle_daemon_rss" in results:
        rss = results["idle_daemon_rss"]
        verdicts["idle_daemon_rss"] = rss["existing_home_mib"] <= BUDGET_RSS_MIB
    results["budget"] = {
        "text_minimal_p50_overhead_ms_max": BUDGET_P50_MS,
        "text_minimal_p99_overhead_ms_max": BUDGET_P99_MS,
        "text_with_tools_p50_overhead_ms_max": BUDGET_TOOLS_P50_MS,
        "multi_conversation_turns_per_s_min": BUDGET_TURNS_PER_S,
        "idle_daemon_rss_mib_max": BUDGET_RSS_MIB,
    }
    results["within_budget"] = verdicts
    return results


if __name__ == "__main__":
    # One scenario at a time while investigating: python bench/bench_turns.py long_history
    import json
    import sys

    print(json.dumps(run(sys.argv[1:]), indent=2))
