"""Conversation store overhead per turn.

``turn_path`` is what the turn runner does on every turn: ``start_turn`` + ``commit_turn``
(two calls, run on the event loop while the store's thread is idle), 10 turns per
conversation so windows stay short and cached: CPU per turn (the loop's thread, and the
process), wall time, SQL statements and write-ahead-log frames (pages) per turn. CPU decides
on the shared machine; wall time moves with its load.

The older scenario times ``load_window`` + ``begin_turn`` + ``commit_turn`` separately (the
budget of the runtime issue: well under a millisecond for the three on a small
conversation). Also measured: the bare thread hop, a window load of a long conversation,
and what opening costs in a fresh process (a new database imports SQLAlchemy to create the
tables; an existing one does not).
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
PATH_TURNS = 3000
PATH_WARMUP = 200
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


async def _turn_path(path: Path) -> dict:
    import os

    from fermix_core.channel import ConversationKey
    from fermix_core.messages import Message, Usage
    from fermix_core.store import ConversationStore

    store = await ConversationStore.open(path)
    store.checkpointer.every = 10**9  # the log only grows while measured: frames are countable
    user = Message.user("hello there")
    answer = Message.assistant("Hello! How can I help you today?")
    usage = Usage(input_tokens=100, output_tokens=10)
    ids: dict[int, int] = {}
    statements: list[str] = []

    async def turn(n: int) -> None:
        cid = ids.get(n // 10)
        if cid is None:
            cid = ids[n // 10] = await store.conversation_id(ConversationKey("bench", str(n)))
        start = await store.start_turn(cid, user, speaker="owner", sender_id="u")
        await store.commit_turn(
            start.handle.turn_id, [answer], usage=usage, model="m", provider="p"
        )

    for n in range(PATH_WARMUP):
        await turn(10**6 + n)
    # Count the statements of 10 turns of a conversation that exists (BEGIN and COMMIT
    # included; the session counter's write comes once per block).
    ids[2 * 10**5] = await store.conversation_id(ConversationKey("bench", "counted"))
    store.worker.conn.set_trace_callback(statements.append)
    for n in range(10):
        await turn(2 * 10**6 + n)
    store.worker.conn.set_trace_callback(None)
    wal = Path(f"{path}-wal")
    store.worker.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    wal_before = wal.stat().st_size
    walls = []
    cpu0, loop0 = time.process_time(), time.thread_time()
    for n in range(PATH_TURNS):
        started = time.perf_counter()
        await turn(n)
        walls.append(time.perf_counter() - started)
    cpu, loop = time.process_time() - cpu0, time.thread_time() - loop0
    frames = (wal.stat().st_size - wal_before) / (4096 + 24)
    inline, calls = store.worker.inline, store.worker.calls
    await store.close()
    return {
        "turns": PATH_TURNS,
        "cpu_per_turn_us": round(cpu / PATH_TURNS * 1e6, 1),
        "loop_cpu_per_turn_us": round(loop / PATH_TURNS * 1e6, 1),
        "wall": _stats(walls),
        "statements_per_turn": len(statements) / 10,
        "wal_frames_per_turn": round(frames / PATH_TURNS, 2),
        "inline_share": round(inline / calls, 3),
        "load_average": [round(x, 2) for x in os.getloadavg()],
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
        result = {"turn_path": anyio.run(_turn_path, directory / "path.db")}
        result.update(anyio.run(_per_turn, directory / "memory.db"))
        result["open"] = _open_costs(directory)
    median_total = result["turn_total"]["median_us"]
    result["budget"] = {"turn_total_median_us_max": 1000.0}
    result["within_budget"] = median_total < 1000.0
    return result


if __name__ == "__main__":
    import json

    print(json.dumps(run(), indent=2))
