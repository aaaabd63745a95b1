"""Conversation store overhead per turn: load_window + begin_turn + commit_turn.

The turn runner makes these three calls on every turn, each one hop to the store's worker
thread. The budget (runtime issue): well under a millisecond for the three together on a
small conversation. Also measured: the bare thread hop they each pay, a window load of a
long conversation, and what opening costs in a fresh process (a new database imports
SQLAlchemy to create the tables; an existing one does not).
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
import anyio.to_thread

TURNS = 400
CONVERSATIONS = 20
LONG_MESSAGES = 200
OPEN_RUNS = 5


def _stats(samples_s: list[float]) -> dict:
    us = sorted(s * 1e6 for s in samples_s)
    return {
        "n": len(us),
        "median_us": round(statistics.median(us), 1),
        "p90_us": round(us[int(0.9 * (len(us) - 1))], 1),
        "min_us": round(us[0], 1),
    }


async def _per_turn(path: Path) -> dict:
    from fermix_core.channel import ConversationKey
    from fermix_core.messages import Message, Usage
    from fermix_core.store import ConversationStore

    limiter = anyio.CapacityLimiter(1)
    hops = []
    for _ in range(TURNS):
        started = time.perf_counter()
        await anyio.to_thread.run_sync(lambda: None, limiter=limiter)
        hops.append(time.perf_counter() - started)

    store = await ConversationStore.open(path)
    ids = [
        await store.conversation_id(ConversationKey("bench", str(i))) for i in range(CONVERSATIONS)
    ]
    load, begin, commit, total = [], [], [], []
    answer = Message.assistant("An answer of ordinary length, a sentence or two. " * 3)
    for n in range(TURNS):
        cid = ids[n % CONVERSATIONS]
        t0 = time.perf_counter()
        await store.load_window(cid)
        t1 = time.perf_counter()
        handle = await store.begin_turn(
            cid, Message.user(f"question {n}"), speaker="owner", sender_id="u", session_id="main-1"
        )
        t2 = time.perf_counter()
        await store.commit_turn(
            handle.turn_id, [answer], usage=Usage(input_tokens=10), model="m", provider="p"
        )
        t3 = time.perf_counter()
        load.append(t1 - t0)
        begin.append(t2 - t1)
        commit.append(t3 - t2)
        total.append(t3 - t0)

    long_id = await store.conversation_id(ConversationKey("bench", "long"))
    for n in range(LONG_MESSAGES // 2):
        handle = await store.begin_turn(
            long_id, Message.user(f"q{n}"), speaker="owner", sender_id="u", session_id="main-1"
        )
        await store.commit_turn(handle.turn_id, [answer], usage=Usage(), model="m", provider="p")
    long_loads = []
    for _ in range(50):
        started = time.perf_counter()
        await store.load_window(long_id)
        long_loads.append(time.perf_counter() - started)
    await store.close()
    window = TURNS // CONVERSATIONS * 2
    return {
        "thread_hop": _stats(hops),
        "load_window": _stats(load),
        "begin_turn": _stats(begin),
        "commit_turn": _stats(commit),
        "turn_total": _stats(total),
        "turn_total_note": f"windows grow to {window} messages over the run",
        f"load_window_{LONG_MESSAGES}_messages": _stats(long_loads),
    }


_OPEN = """
import sys, time
import anyio
from pathlib import Path
t0 = time.perf_counter()
from fermix_core.store import ConversationStore
t1 = time.perf_counter()
async def main():
    started = time.perf_counter()
    s = await ConversationStore.open(Path(sys.argv[1]))
    opened = time.perf_counter() - started
    await s.close()
    return opened
print(t1 - t0, anyio.run(main), "sqlalchemy" in sys.modules)
"""


def _open_costs(directory: Path) -> dict:
    fresh, existing, imports = [], [], []
    sqlalchemy_on_reopen = False
    for i in range(OPEN_RUNS):
        db = directory / f"open-{i}.db"
        for bucket in (fresh, existing):
            out = subprocess.run(
                [sys.executable, "-c", _OPEN, str(db)], capture_output=True, text=True, check=True
            ).stdout.split()
            imports.append(float(out[0]))
            bucket.append(float(out[1]))
            if bucket is existing:
                sqlalchemy_on_reopen |= out[2] == "True"
    ms = lambda xs: round(statistics.median(xs) * 1000, 2)  # noqa: E731
    return {
        "import_fermix_core_store_ms": ms(imports),
        "open_new_database_ms": ms(fresh),
        "open_existing_database_ms": ms(existing),
        "sqlalchemy_imported_on_reopen": sqlalchemy_on_reopen,
    }


def run() -> dict:
    with tempfile.TemporaryDirectory(prefix="fermix-bench-store-") as tmp:
        directory = Path(tmp)
        result = anyio.run(_per_turn, directory / "memory.db")
        result["open"] = _open_costs(directory)
    median_total = result["turn_total"]["median_us"]
    result["budget"] = {"turn_total_median_us_max": 1000.0}
    result["within_budget"] = median_total < 1000.0
    return result


if __name__ == "__main__":
    import json

    print(json.dumps(run(), indent=2))
