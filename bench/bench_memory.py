"""Long-term memory at scale: ``memory_recall`` latency and FTS5 index size.

One ``memory.db`` in a temporary directory grows through three sizes — 10k, 100k and 1M
stored facts, with as many conversation messages — and at each size the benchmark runs
the real ``memory_recall`` tool (scope ``owner``, source ``all``: the fact search, the
history search and the fencing) on a fixed set of queries, plus the bare fact search.

Rows are generated once and bulk-inserted with plain SQL, one transaction per size step
(the facts with the FTS index filled in one statement after the rows, the messages into the
conversation store's tables), because a million one-row transactions would measure fsync,
not search. History is then indexed by the backend's own catch-up, whose time is reported.

Text comes from a synthetic vocabulary with a Zipf-like word distribution, so common words
match a large share of rows the way "the project" would in real memory; queries mix common
and rare words. Index size is read from ``dbstat`` and reported per 100k rows.
"""

from __future__ import annotations

import os
import random
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import anyio

SIZES = (10_000, 100_000, 1_000_000)
QUERIES = 100
WARMUP = 10
VOCABULARY = 20_000
FACT_WORDS = (6, 16)
MESSAGE_WORDS = (8, 30)
CHUNK = 50_000
SEED = 20250301

_SYLLABLES = [
    c + v
    for c in ("b", "c", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z")
    for v in ("a", "e", "i", "o", "u", "ai", "ou")
]


def _vocabulary(rng: random.Random) -> tuple[list[str], list[float]]:
    words: set[str] = set()
    while len(words) < VOCABULARY:
        words.add("".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 4))))
    ordered = sorted(words)
    rng.shuffle(ordered)
    weights = [1.0 / (rank + 1) ** 1.05 for rank in range(len(ordered))]
    return ordered, weights


#: Words drawn once from the vocabulary's distribution; every stored sentence is a window
#: of this stream. Drawing each word of 2M sentences separately cost ~35 s of the setup;
#: windows keep each word's frequency and cost one slice per sentence.
STREAM_WORDS = 1 << 22
#: Resolution of the table the stream is drawn from (each word appears in proportion to its
#: weight, at least once), so a draw is an index, not a bisection of the weights.
DRAW_TABLE = 1 << 21


class Text:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.words, weights = _vocabulary(rng)
        total = sum(weights)
        acc, self.cumulative = 0.0, []
        for w in weights:
            acc += w / total
            self.cumulative.append(acc)
        self._stream: list[str] | None = None

    def stream(self) -> list[str]:
        if self._stream is None:
            table: list[str] = []
            for word, weight in zip(self.words, self.probabilities(), strict=True):
                table.extend([word] * max(1, round(weight * DRAW_TABLE)))
            self._stream = self.rng.choices(table, k=STREAM_WORDS)
        return self._stream

    def probabilities(self) -> list[float]:
        return [b - a for a, b in zip([0.0, *self.cumulative[:-1]], self.cumulative, strict=True)]

    def sentences(self, count: int, bounds: tuple[int, int]) -> list[str]:
        """*count* sentences of *bounds* words, each a window of the pre-drawn stream."""
        stream = self.stream()
        lo, hi = bounds
        last = len(stream) - hi
        rand = self.rng.random
        out = []
        for _ in range(count):
            start = int(rand() * last)
            out.append(" ".join(stream[start : start + lo + int(rand() * (hi - lo + 1))]))
        return out

    def query(self) -> str:
        # One word from the head of the distribution, one or two from anywhere.
        head = self.rng.choice(self.words[:200])
        tail = self.rng.choices(self.words, cum_weights=self.cumulative, k=self.rng.randint(1, 2))
        return " ".join([head, *tail])


def _percentiles(samples: list[float]) -> dict[str, float]:
    ms = sorted(s * 1000 for s in samples)
    return {
        "n": len(ms),
        "p50_ms": round(statistics.median(ms), 3),
        "p95_ms": round(ms[int(0.95 * (len(ms) - 1))], 3),
        "max_ms": round(ms[-1], 3),
    }


def _insert_facts(conn: sqlite3.Connection, text: Text, start: int, count: int) -> None:
    """Append *count* facts in the caller's transaction; the FTS index is filled after."""
    from fermix_core.memory.sqlite_schema import rebuild_term_counts

    speakers = ["owner"] * 16 + ["system"] * 2 + ["guest", "job"]
    categories = ["identity", "preference", "interest", "goal", "context", "directive"]
    now = time.time()
    # The insert trigger would index row by row; fill the index in one statement after.
    (trigger,) = conn.execute(
        "SELECT sql FROM sqlite_master WHERE type = 'trigger' AND name = 'memory_facts_ai'"
    ).fetchone()
    conn.execute("DROP TRIGGER memory_facts_ai")
    for offset in range(0, count, CHUNK):
        first = start + offset
        n = min(CHUNK, count - offset)
        contents = text.sentences(n, FACT_WORDS)
        picked = text.rng.choices(speakers, k=n)
        cats = text.rng.choices(categories, k=n)
        stamps = [now - (count - i) for i in range(first, first + n)]
        rows = zip(
            cats,
            contents,
            [content.casefold() for content in contents],
            picked,
            ['["telegram","g",null]' if speaker == "guest" else None for speaker in picked],
            ["nightly" if speaker == "job" else None for speaker in picked],
            stamps,
            stamps,
            range(first + 1, first + n + 1),
            strict=True,
        )
        conn.executemany(
            "INSERT INTO memory_facts (category, key, content, folded, speaker, conversation_key, "
            "job_id, archived, created_at, updated_at, seq) VALUES (?, NULL, ?, ?, ?, ?, ?, 0, ?, "
            "?, ?)",
            rows,
        )
    conn.execute(
        "INSERT INTO memory_facts_fts (rowid, content, key) "
        "SELECT id, content, key FROM memory_facts WHERE id > ?",
        (start,),
    )
    # The trigger also keeps the per-word counts; recount them from the index in one pass.
    rebuild_term_counts(conn, "memory_fact_terms")
    conn.execute(trigger)


def _insert_messages(conn: sqlite3.Connection, text: Text, start: int, count: int) -> None:
    """Append *count* messages in the caller's transaction (indexed by the catch-up)."""
    conversations = 200
    conn.executemany(
        "INSERT OR IGNORE INTO conversations (id, key, channel, chat_id, thread_id, "
        "window_start_seq, summary_message_id, created_at, updated_at) "
        "VALUES (?, ?, 'bench', ?, NULL, 0, NULL, 0, 0)",
        [(c + 1, f'["bench","{c}",null]', str(c)) for c in range(conversations)],
    )
    for offset in range(0, count, CHUNK):
        first = start + offset
        n = min(CHUNK, count - offset)
        bodies = text.sentences(n, MESSAGE_WORDS)
        conn.executemany(
            "INSERT INTO messages (conversation_id, turn_id, seq, anchor_seq, kind, role, "
            "speaker, sender_id, body, text, created_at) "
            "VALUES (?, NULL, ?, ?, 'message', ?, ?, NULL, '{}', ?, 0)",
            [
                (
                    i % conversations + 1,
                    i + 1,
                    i + 1,
                    "user" if i % 2 == 0 else "assistant",
                    "guest" if i % 10 == 9 else "owner",
                    bodies[i - first],
                )
                for i in range(first, first + n)
            ],
        )


@contextmanager
def _indexes_built_after(conn: sqlite3.Connection, tables: tuple[str, ...]) -> Iterator[None]:
    """Drop *tables*' secondary indexes for a bulk load and create them again after it.

    Building an index once from sorted rows is much cheaper than updating it row by row
    (the ``folded`` index, for one, receives its rows in random order).
    """
    marks = ", ".join("?" * len(tables))
    indexes = conn.execute(
        f"SELECT name, sql FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL "  # noqa: S608
        f"AND tbl_name IN ({marks})",
        tables,
    ).fetchall()
    for name, _ in indexes:
        conn.execute(f'DROP INDEX "{name}"')
    yield
    for _, sql in indexes:
        conn.execute(sql)


def _index_bytes(conn: sqlite3.Connection, table: str) -> int:
    row = conn.execute(
        "SELECT COALESCE(SUM(pgsize), 0) FROM dbstat WHERE name LIKE ?", (f"{table}%",)
    ).fetchone()
    return int(row[0])


async def _measure(path: Path, home: Path, queries: list[str]) -> dict:
    from fermix_core.memory.scope import JOB_ID_STATE_KEY  # noqa: F401 - documents the scope key
    from fermix_core.memory.sqlite import SqliteMemoryBackend
    from fermix_core.tool import ToolContext, Trust, build_tool
    from fermix_tools.memory.plugin import MEMORY_RECALL

    class Home:
        def __init__(self, root: Path) -> None:
            self.path = root

    backend = await SqliteMemoryBackend.open(path)
    try:
        started = time.perf_counter()
        indexed = await backend.catch_up_history()
        catch_up_s = time.perf_counter() - started
        tool = build_tool(MEMORY_RECALL)
        ctx = ToolContext(
            trust=Trust.OPERATOR,
            cwd=home,
            home=Home(home),
            conversation_key=("bench", "0", None),
            session_id="bench",
            services={"memory": backend},
        )
        for q in queries[:WARMUP]:
            await tool.invoke({"query": q}, ctx)
        recall, facts_only, hits = [], [], []
        recall_cpu, facts_cpu = [], []
        cpu = time.process_time  # this process's CPU, all threads: the worker's SQL too
        for q in queries:
            t0, c0 = time.perf_counter(), cpu()
            out = await tool.invoke({"query": q, "scope": "owner", "source": "all"}, ctx)
            t1, c1 = time.perf_counter(), cpu()
            await backend.search(q, limit=10)
            t2, c2 = time.perf_counter(), cpu()
            recall.append(t1 - t0)
            facts_only.append(t2 - t1)
            recall_cpu.append(c1 - c0)
            facts_cpu.append(c2 - c1)
            hits.append(len(out.data["facts"]) + len(out.data["history"]))
        return {
            "history_catch_up": {"rows": indexed, "seconds": round(catch_up_s, 3)},
            "memory_recall": _percentiles(recall),
            "fact_search": _percentiles(facts_only),
            # CPU time of the same calls: what the work costs, apart from waiting for a core
            # on a shared machine (wall time above includes that wait).
            "memory_recall_cpu": _percentiles(recall_cpu),
            "fact_search_cpu": _percentiles(facts_cpu),
            "mean_results": round(statistics.mean(hits), 1),
            "load_average": round(os.getloadavg()[0], 2),
        }
    finally:
        await backend.aclose()


async def _main() -> dict:
    from fermix_core.memory.sqlite import SqliteMemoryBackend
    from fermix_core.store import ConversationStore

    rng = random.Random(SEED)
    text = Text(rng)
    queries = [text.query() for _ in range(QUERIES)]
    results: dict = {"sizes": {}, "queries": QUERIES, "query_examples": queries[:3]}
    with tempfile.TemporaryDirectory(prefix="fermix-bench-memory-") as tmp:
        home = Path(tmp)
        path = home / "memory.db"
        store = await ConversationStore.open(path)
        await store.close()
        backend = await SqliteMemoryBackend.open(path)
        await backend.aclose()
        conn = sqlite3.connect(path, isolation_level=None)
        conn.execute("PRAGMA synchronous = NORMAL")
        # The generated rows satisfy the tables' CHECK constraints by construction. Their
        # `IN (...)` lists cost about 6 us per row and statement run (two thirds of the
        # messages' insert time), so the load skips them.
        conn.execute("PRAGMA ignore_check_constraints = ON")
        # Keep a size step's pages in memory until its commit: with the default 2 MiB cache,
        # one large transaction spills and rewrites index pages for most of its time.
        conn.execute("PRAGMA cache_size = -1048576")
        have = 0
        for size in SIZES:
            t0, cpu0 = time.perf_counter(), time.process_time()
            # No journal for the load (a throwaway file, nothing else has it open): in WAL
            # every page would be written twice, to the log and again by the checkpoint.
            # The backend opened next switches the file back to WAL.
            conn.execute("PRAGMA journal_mode = OFF")
            conn.execute("BEGIN IMMEDIATE")
            with _indexes_built_after(conn, ("memory_facts", "messages")):
                _insert_facts(conn, text, have, size - have)
                _insert_messages(conn, text, have, size - have)
            conn.execute("COMMIT")
            have = size
            load_s, load_cpu_s = time.perf_counter() - t0, time.process_time() - cpu0
            measured = await _measure(path, home, queries)
            facts_fts = _index_bytes(conn, "memory_facts_fts")
            history_fts = _index_bytes(conn, "memory_history_fts")
            measured["load_seconds"] = round(load_s, 2)
            # CPU of this process: on a shared machine it moves much less than wall time.
            measured["load_cpu_seconds"] = round(load_cpu_s, 2)
            measured["fts_index_bytes"] = {"facts": facts_fts, "history": history_fts}
            measured["fts_index_bytes_per_100k_rows"] = {
                "facts": round(facts_fts * 100_000 / size),
                "history": round(history_fts * 100_000 / size),
            }
            measured["database_bytes"] = path.stat().st_size
            results["sizes"][f"{size}"] = measured
        conn.close()
    return results


def run() -> dict:
    """Grow one memory.db to 10k, 100k and 1M facts (+ as many messages) and measure."""
    return anyio.run(_main)


if __name__ == "__main__":
    import json

    print(json.dumps(run(), indent=2))
