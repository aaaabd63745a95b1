"""The memory soak: 100,000 turns through the real runtime; resident memory must stay flat.

The path is the one ``bench_turns.py`` measures (gateway → queue → agent loop → commit,
real SQLite file, real store thread) with the same instant in-process model. ``WORKERS``
conversations run at once; each conversation gets ``TURNS_PER_CONVERSATION`` turns (one in
five calls a tool) and is then left idle for good while its worker starts a new one, so
the run talks to thousands of chats — the shape of a long-lived daemon, where anything kept
per conversation, per turn or per message would show up as growth.

After ``WARMUP_TURNS`` the resident set (``VmRSS`` from ``/proc/self/status``) is sampled
every ``SAMPLE_EVERY`` turns, after a full garbage collection so samples compare like with
like. Growth is the last sample against the first, in percent; the budget (runtime issue)
is ≤ 5 %. The object count from the collector is recorded too: RSS growth with a flat
object count is allocator behaviour, growth in both is something being kept.

    uv run python bench/soak.py                 # 100,000 turns, a few minutes
    uv run python bench/soak.py --turns 20000   # a shorter run while investigating
    uv run python bench/soak.py --strict        # exit 1 when the budget is missed

The run is bounded twice: by its turn count and by ``--max-seconds`` (it stops early and
says so). Results go to ``bench/results/soak.json``. Not part of the test suite.
"""

from __future__ import annotations

import argparse
import gc
import json
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))

from bench_turns import (  # noqa: E402  (bench/ is not a package)
    PROVIDER,
    BenchPlugin,
    open_bench,
    text_answer,
)
from fermix_core.testing.providers import tool_call  # noqa: E402

TURNS = 100_000
WARMUP_TURNS = 10_000
SAMPLE_EVERY = 5_000
WORKERS = 50
TURNS_PER_CONVERSATION = 20
TOOL_EVERY = 5
BUDGET_GROWTH_PCT = 5.0
MAX_SECONDS = 1800.0


def rss_kib() -> int:
    """Resident set size of this process, from the kernel's own accounting."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise SystemExit("no VmRSS in /proc/self/status; the soak needs Linux")


def soak_model(request: Any) -> Any:
    """Text answers, except a user message ending in "(tool)" gets one tool call first."""
    last = request.messages[-1]
    if last.role == "user" and last.text.endswith("(tool)"):
        return tool_call("bench_tool_2", {"n": len(request.messages)})
    return text_answer(request)


class Soak:
    def __init__(self, turns: int, warmup: int, every: int, max_seconds: float) -> None:
        self.turns = turns
        self.warmup = warmup
        self.every = every
        self.deadline = time.monotonic() + max_seconds
        self.issued = 0
        self.done = 0
        self.failed = 0
        self.conversations = 0
        self.samples: list[dict[str, Any]] = []
        self.started = time.perf_counter()
        self.stopped_early = False

    def _take(self) -> int | None:
        if self.issued >= self.turns:
            return None
        if time.monotonic() > self.deadline:
            self.stopped_early = True
            return None
        self.issued += 1
        return self.issued

    async def worker(self, fx: Any) -> None:
        while True:
            self.conversations += 1
            session = f"chat-{self.conversations}"
            for t in range(TURNS_PER_CONVERSATION):
                n = self._take()
                if n is None:
                    return
                text = f"message {t} of {session}" + (" (tool)" if n % TOOL_EVERY == 0 else "")
                outcome = await fx.ask(text, session=session)
                if outcome.status != "ok" or outcome.provider != PROVIDER:
                    self.failed += 1
                self.done += 1
                if self.done % self.every == 0:
                    self._sample(fx)

    def _sample(self, fx: Any) -> None:
        gc.collect()
        elapsed = time.perf_counter() - self.started
        load = fx.service.queue.load()
        sample = {
            "turns": self.done,
            "rss_kib": rss_kib(),
            "gc_objects": len(gc.get_objects()),
            "lanes": load.lanes,
            "seconds": round(elapsed, 1),
        }
        self.samples.append(sample)
        phase = "warm-up" if self.done < self.warmup else "measured"
        print(
            f"soak: {self.done:>7} turns  {sample['rss_kib'] / 1024:7.1f} MiB  "
            f"{sample['gc_objects']:>8} objects  {self.done / elapsed:7.0f} turns/s  ({phase})",
            file=sys.stderr,
            flush=True,
        )

    def report(self) -> dict[str, Any]:
        measured = [s for s in self.samples if s["turns"] >= self.warmup]
        result: dict[str, Any] = {
            "turns": self.done,
            "failed_turns": self.failed,
            "conversations": self.conversations,
            "workers": WORKERS,
            "turns_per_conversation": TURNS_PER_CONVERSATION,
            "warmup_turns": self.warmup,
            "sample_every": self.every,
            "completed": not self.stopped_early and self.done == self.turns,
            "seconds": round(time.perf_counter() - self.started, 1),
            "samples": self.samples,
        }
        if len(measured) >= 2:
            first, last = measured[0], measured[-1]
            peak = max(s["rss_kib"] for s in measured)
            span = (last["turns"] - first["turns"]) / 1000
            result.update(
                baseline_rss_mib=round(first["rss_kib"] / 1024, 2),
                final_rss_mib=round(last["rss_kib"] / 1024, 2),
                peak_rss_mib=round(peak / 1024, 2),
                rss_growth_pct=round(
                    (last["rss_kib"] - first["rss_kib"]) / first["rss_kib"] * 100, 2
                ),
                rss_kib_per_1k_turns=round((last["rss_kib"] - first["rss_kib"]) / span, 1),
                gc_objects_growth=last["gc_objects"] - first["gc_objects"],
            )
            result["within_budget"] = result["rss_growth_pct"] <= BUDGET_GROWTH_PCT
        else:
            result["within_budget"] = None  # too short to judge
        result["budget"] = {"rss_growth_pct_max": BUDGET_GROWTH_PCT}
        result["turns_per_s"] = round(self.done / max(result["seconds"], 1e-9), 1)
        return result


async def main(turns: int, warmup: int, every: int, max_seconds: float) -> dict[str, Any]:
    soak = Soak(turns, warmup, every, max_seconds)
    with tempfile.TemporaryDirectory(prefix="fermix-soak-") as tmp:
        async with open_bench(Path(tmp) / "home", BenchPlugin(5, soak_model)) as fx:
            async with anyio.create_task_group() as tg:
                for _ in range(WORKERS):
                    tg.start_soon(soak.worker, fx)
            await fx.service.queue.join()
            lanes_after = fx.service.queue.load().lanes
    result = soak.report()
    result["lanes_after"] = lanes_after
    result["machine"] = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": __import__("os").cpu_count(),
    }
    return result


def cli(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--turns", type=int, default=TURNS)
    parser.add_argument("--warmup", type=int, default=WARMUP_TURNS)
    parser.add_argument("--every", type=int, default=SAMPLE_EVERY)
    parser.add_argument("--max-seconds", type=float, default=MAX_SECONDS)
    parser.add_argument("--strict", action="store_true", help="exit 1 when over budget")
    parser.add_argument("--out", type=Path, default=HERE / "results" / "soak.json")
    args = parser.parse_args(argv)
    if args.warmup >= args.turns or args.every <= 0:
        parser.error("--warmup must be below --turns and --every positive")
    result = anyio.run(main, args.turns, args.warmup, args.every, args.max_seconds)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    summary = {k: v for k, v in result.items() if k != "samples"}
    print(json.dumps(summary, indent=2))
    print(f"wrote {args.out}", file=sys.stderr)
    if result["failed_turns"]:
        print(
            f"soak: {result['failed_turns']} turns did not run on the bench route", file=sys.stderr
        )
        return 1
    if args.strict and result["within_budget"] is not True:
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(cli(sys.argv[1:]))
