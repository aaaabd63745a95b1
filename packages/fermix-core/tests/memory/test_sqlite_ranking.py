"""Search rankings on a fixed corpus equal an independent reference of the documented rules.

The rules (``fermix_core.memory.sqlite``): the query's rarest words lead — ordered by how
many indexed rows hold them, the rarest always kept, the next ones while the rows they match
together stay within ``TERM_BUDGET``, a word over it on its own matched exactly instead of as
a prefix — then bm25 (content twice a key for facts), ties broken by recency, over the newest
``RANK_WINDOW`` visible matches of those words. The reference below counts words straight
from the FTS index (``fts5vocab``, not the maintained counts) and applies the rules in Python
to every match's bm25 score, so any rewrite of the search SQL (for speed) must return exactly
the same rows in exactly the same order.
"""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path

import pytest
from fermix_core.memory import MemoryFilter, sqlite_engine
from fermix_core.memory.sqlite import SqliteMemoryBackend
from fermix_core.memory.sqlite_schema import match_terms
from fermix_core.store import ConversationStore

pytestmark = pytest.mark.anyio

SEED = 18
FACTS = 3_000
MESSAGES = 3_000
WINDOW = 400  # smaller than the common words' match counts, so the window matters
BUDGET = 300  # so that common words are dropped, and some matched exactly
SPEAKERS = ["owner"] * 6 + ["system", "guest", "job"]
GUEST_KEY = '["telegram","g",null]'


def _corpus(rng: random.Random) -> tuple[list[str], list[str]]:
    syllables = [c + v for c in "bdfklmnprstvz" for v in ("a", "e", "i", "o", "u", "ou")]
    words = sorted({"".join(rng.choices(syllables, k=rng.randint(1, 3))) for _ in range(400)})
    weights = [1.0 / (rank + 1) for rank in range(len(words))]
    return words, rng.choices(words, weights=weights, k=40_000)


def _sentence(rng: random.Random, stream: list[str], lo: int, hi: int) -> str:
    start = rng.randrange(len(stream) - hi)
    return " ".join(stream[start : start + rng.randint(lo, hi)])


async def _build(path: Path, rng: random.Random) -> list[str]:
    store = await ConversationStore.open(path)
    await store.close()
    backend = await SqliteMemoryBackend.open(path)
    await backend.aclose()
    words, stream = _corpus(rng)
    with sqlite3.connect(path, isolation_level=None) as conn:
        conn.execute("BEGIN")
        facts = []
        for i in range(FACTS):
            speaker = rng.choice(SPEAKERS)
            content = _sentence(rng, stream, 3, 12)
            facts.append(
                (
                    rng.choice(["identity", "preference", "context"]),
                    f"k{i}" if i % 7 == 0 else None,  # some keyed facts: the key is indexed too
                    content,
                    content.casefold(),
                    speaker,
                    GUEST_KEY if speaker == "guest" else None,
                    "nightly" if speaker == "job" else None,
                    1 if i % 11 == 0 else 0,
                    1_000.0 + i // 3,  # ties in updated_at, broken by seq
                    i + 1,
                )
            )
        conn.executemany(
            "INSERT INTO memory_facts (category, key, content, folded, speaker, conversation_key, "
            "job_id, archived, created_at, updated_at, seq) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, 0, ?, ?)",
            facts,
        )
        conn.executemany(
            "INSERT INTO conversations (id, key, channel, chat_id, thread_id, window_start_seq, "
            "summary_message_id, created_at, updated_at) VALUES (?, ?, 'bench', ?, NULL, 0, NULL, "
            "0, 0)",
            [(c, f'["bench","{c}",null]', str(c)) for c in (1, 2, 3)],
        )
        conn.executemany(
            "INSERT INTO messages (conversation_id, turn_id, seq, anchor_seq, kind, role, speaker, "
            "sender_id, body, text, created_at) VALUES (?, NULL, ?, ?, ?, ?, ?, NULL, '{}', ?, 0)",
            [
                (
                    i % 3 + 1,
                    i,
                    i,
                    "summary" if i % 50 == 0 else "message",
                    ["user", "assistant", "tool"][i % 3],
                    "guest" if i % 5 == 4 else "owner",
                    _sentence(rng, stream, 4, 15),
                )
                for i in range(1, MESSAGES + 1)
            ],
        )
        conn.execute("COMMIT")
    return words


def _vocabulary(conn: sqlite3.Connection, index: str) -> dict[str, int]:
    conn.execute(f"CREATE VIRTUAL TABLE temp.v_{index} USING fts5vocab(main, {index}, row)")
    try:
        return dict(conn.execute(f"SELECT term, doc FROM temp.v_{index}").fetchall())  # noqa: S608
    finally:
        conn.execute(f"DROP TABLE temp.v_{index}")


def _reference_expression(query: str, docs: dict[str, int]) -> tuple[str, int, int]:
    """The MATCH text of *query*'s leading words; also how many words were dropped / exact."""
    weighed = []
    exact = 0
    for i, term in enumerate(match_terms(query)):
        word = term.strip('"*')
        rows = docs.get(word, 0)
        if term.endswith("*"):
            family = sum(n for t, n in docs.items() if t.startswith(word))
            if family > BUDGET and rows:
                term, exact = term[:-1], exact + 1
            else:
                rows = family
        weighed.append((rows, i, term))
    weighed.sort()
    kept, total = [weighed[0]], weighed[0][0]
    for item in weighed[1:]:
        if total + item[0] > BUDGET:
            break
        kept.append(item)
        total += item[0]
    kept.sort(key=lambda k: k[1])
    return " OR ".join(t for *_, t in kept), len(weighed) - len(kept), exact


def _reference_facts(
    conn: sqlite3.Connection, expression: str, speakers: set[str] | None, archived: bool
) -> list[str]:
    scores = dict(
        conn.execute(
            "SELECT rowid, bm25(memory_facts_fts, 2.0, 1.0) FROM memory_facts_fts "
            "WHERE memory_facts_fts MATCH ?",
            (expression,),
        ).fetchall()
    )
    rows = conn.execute(
        "SELECT id, speaker, archived, updated_at, seq FROM memory_facts ORDER BY id DESC"
    ).fetchall()
    visible = [
        (scores[fid], -updated, -seq, fid)
        for fid, speaker, is_archived, updated, seq in rows
        if fid in scores
        and (archived or not is_archived)
        and (speakers is None or speaker in speakers)
    ][:WINDOW]
    return [str(fid) for *_, fid in sorted(visible)]


def _reference_history(
    conn: sqlite3.Connection, expression: str, speakers: set[str] | None
) -> list[int]:
    scores = dict(
        conn.execute(
            "SELECT rowid, bm25(memory_history_fts) FROM memory_history_fts "
            "WHERE memory_history_fts MATCH ?",
            (expression,),
        ).fetchall()
    )
    rows = conn.execute("SELECT id, speaker FROM messages ORDER BY id DESC").fetchall()
    visible = [
        (scores[mid], -mid)
        for mid, speaker in rows
        if mid in scores and (speakers is None or speaker in speakers)
    ][:WINDOW]
    return [-neg for _, neg in sorted(visible)]


async def test_rankings_equal_the_reference_on_a_fixed_corpus(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(sqlite_engine, "RANK_WINDOW", WINDOW)
    monkeypatch.setattr(sqlite_engine, "TERM_BUDGET", BUDGET)
    rng = random.Random(SEED)
    path = tmp_path / "memory.db"
    words = await _build(path, rng)
    queries = [
        " ".join([rng.choice(words[:20]), *rng.choices(words, k=rng.randint(0, 2))])
        for _ in range(15)
    ] + [
        "k1",
        "the " + words[0],
        words[-1],
        words[0],
        " ".join(words[:4]),
        f"{words[1]} {words[-2]}",
        f"{words[2]} {words[30]} {words[3]}",
    ]
    owner = MemoryFilter(speakers=frozenset({"owner", "system"}))
    backend = await SqliteMemoryBackend.open(path)
    try:
        await backend.catch_up_history()
        with sqlite3.connect(path) as conn:
            fact_docs = _vocabulary(conn, "memory_facts_fts")
            history_docs = _vocabulary(conn, "memory_history_fts")
            windowed = dropped = exact = 0
            for query in queries:
                facts_expr, fewer, exacts = _reference_expression(query, fact_docs)
                history_expr, _, _ = _reference_expression(query, history_docs)
                dropped += fewer > 0
                exact += exacts > 0
                everyone = _reference_facts(conn, facts_expr, None, False)
                owners = _reference_facts(conn, facts_expr, {"owner", "system"}, False)
                with_archived = _reference_facts(conn, facts_expr, None, True)
                history = _reference_history(conn, history_expr, None)
                owner_history = _reference_history(conn, history_expr, {"owner", "system"})
                for limit in (1, 10, 50):
                    got = [f.id for f in await backend.search(query, limit=limit)]
                    assert got == everyone[:limit], query
                    got = [f.id for f in await backend.search(query, limit=limit, where=owner)]
                    assert got == owners[:limit], query
                    facts = await backend.search(query, limit=limit, include_archived=True)
                    assert [f.id for f in facts] == with_archived[:limit], query
                    got = [m.id for m in await backend.search_history(query, limit=limit)]
                    assert got == history[:limit], query
                    messages = await backend.search_history(query, limit=limit, where=owner)
                    assert [m.id for m in messages] == owner_history[:limit], query
                    facts, messages = await backend.search_both(
                        query, limit=limit, facts_where=owner, history_where=owner
                    )
                    assert [f.id for f in facts] == owners[:limit], query
                    assert [m.id for m in messages] == owner_history[:limit], query
                matches = conn.execute(
                    "SELECT COUNT(*) FROM memory_facts_fts WHERE memory_facts_fts MATCH ?",
                    (facts_expr,),
                ).fetchone()[0]
                windowed += matches > WINDOW
            assert windowed >= 5, "the corpus must exercise the rank window"
            assert dropped >= 5, "the corpus must exercise dropping common words"
            assert exact >= 5, "the corpus must exercise matching a common word exactly"
    finally:
        await backend.aclose()
