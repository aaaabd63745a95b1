"""The history indexer: replies are indexed for recall in bursts, off the turn path.

Unit tests drive :class:`HistoryIndexer` against a recording backend; the runtime test runs
real turns on a real ``memory.db`` and reads the index back with SQL.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import anyio
import pytest
from fermix_core.api import Fermix
from fermix_core.hookspecs import hookimpl
from fermix_core.memory.history_index import INDEX_STEP, HistoryIndexer
from fermix_core.messages import Turn
from fermix_core.specs import ModelInfo, ProviderSpec
from fermix_core.testing import FunctionProvider

pytestmark = pytest.mark.anyio


class RecordingMemory:
    """Counts catch-ups; can fail or signal each one."""

    def __init__(self) -> None:
        self.catch_ups = 0
        self.steps: list[int | None] = []
        self.fail = False
        self.ran = anyio.Event()

    async def catch_up_history(self, *, step: int | None = None) -> int:
        self.catch_ups += 1
        self.steps.append(step)
        self.ran.set()
        if self.fail:
            raise RuntimeError("disk full")
        return 2


async def test_a_burst_of_replies_is_one_catch_up() -> None:
    memory = RecordingMemory()
    indexer = HistoryIndexer(memory)
    for _ in range(50):
        indexer.note_reply()
    await indexer.flush()
    await indexer.flush()  # nothing new since: no second catch-up
    assert memory.catch_ups == 1
    assert memory.steps == [INDEX_STEP], "small transactions, so turns are not held up"
    assert indexer.runs == 1


async def test_nothing_to_index_makes_no_call() -> None:
    memory = RecordingMemory()
    await HistoryIndexer(memory).flush()
    assert memory.catch_ups == 0


async def test_a_failed_catch_up_is_logged_and_the_next_reply_retries(caplog) -> None:
    memory = RecordingMemory()
    memory.fail = True
    indexer = HistoryIndexer(memory)
    indexer.note_reply()
    await indexer.flush()  # does not raise
    assert "indexing recent history for recall failed" in caplog.text
    memory.fail = False
    indexer.note_reply()
    await indexer.flush()
    assert memory.catch_ups == 2
    assert indexer.runs == 1


async def test_serve_catches_up_after_a_reply() -> None:
    memory = RecordingMemory()
    indexer = HistoryIndexer(memory, delay=0)
    async with anyio.create_task_group() as tg:
        await tg.start(indexer.serve)
        indexer.note_reply()
        await memory.ran.wait()
        tg.cancel_scope.cancel()
    assert memory.catch_ups == 1


async def test_a_catch_up_cancelled_at_shutdown_is_left_for_the_closing_flush() -> None:
    started, release = anyio.Event(), anyio.Event()

    class SlowMemory(RecordingMemory):
        async def catch_up_history(self, *, step: int | None = None) -> int:
            started.set()
            await release.wait()
            return await super().catch_up_history(step=step)

    memory = SlowMemory()
    indexer = HistoryIndexer(memory, delay=0)
    async with anyio.create_task_group() as tg:
        await tg.start(indexer.serve)
        indexer.note_reply()
        await started.wait()
        tg.cancel_scope.cancel()
    release.set()
    await indexer.flush()
    assert memory.catch_ups == 1


# --------------------------------------------------------------------------- the runtime


class Echo:
    def __init__(self) -> None:
        self.provider = FunctionProvider(
            lambda request: Turn(content=f"echo {request.messages[-1].text}", model="m1"),
            name="echo",
        )

    @hookimpl
    def fermix_providers(self):
        yield ProviderSpec(
            name="echo",
            label="Echo",
            factory=lambda spec, settings: self.provider,
            keyless=True,
            default_model="m1",
            models=(ModelInfo(id="m1", context_window=100_000),),
        )


CONFIG = {
    "fermix_core": {
        "providers": {"echo": {"primary": True, "base_url": "http://127.0.0.1:9/unused"}},
        "memory": {"review_enabled": False},
    }
}


def indexed(path: Path) -> tuple[int, int, int]:
    """(watermark, newest message id, FTS rows matching 'zebra') read straight from the file."""
    conn = sqlite3.connect(path)
    try:
        row = conn.execute(
            "SELECT value FROM memory_state WHERE name = 'history_indexed_id'"
        ).fetchone()
        top = conn.execute("SELECT MAX(id) FROM messages").fetchone()[0]
        hits = conn.execute(
            "SELECT COUNT(*) FROM memory_history_fts WHERE memory_history_fts MATCH 'zebra'"
        ).fetchone()[0]
        return (int(row[0]) if row else 0), int(top), int(hits)
    finally:
        conn.close()


async def test_turns_are_indexed_together_and_closing_leaves_the_index_current(
    fermix_home,
) -> None:
    async with Fermix.open(fermix_home, config=CONFIG, plugins=[("providers.echo", Echo())]) as fx:
        indexer = fx.service.history_index
        indexer.delay = 3600  # its own catch-up never comes during the test: flush decides
        for i in range(5):
            outcome = await fx.ask(f"zebra {i}", session="zx")
            assert outcome.text == f"echo zebra {i}"
        # Recall before any catch-up ran: the search indexes the small backlog itself.
        memory = fx.service.runner.services["memory"]
        found = await memory.search_history("zebra", limit=20)
        assert len(found) == 10
        await indexer.flush()
        assert indexer.runs == 1, "five replies, one catch-up"
        assert indexed(fermix_home.memory_db)[0] == indexed(fermix_home.memory_db)[1]
        await fx.ask("zebra again", session="zx")
        mark, top, _ = indexed(fermix_home.memory_db)
        assert mark < top, "the reply is not indexed on the turn path"
    mark, top, hits = indexed(fermix_home.memory_db)
    assert mark == top, "closing caught the index up"
    assert hits == 12


async def test_a_failing_reply_listener_never_reaches_the_reply(fermix_home, caplog) -> None:
    async with Fermix.open(fermix_home, config=CONFIG, plugins=[("providers.echo", Echo())]) as fx:
        runner = fx.service.runner

        def broken() -> None:
            raise RuntimeError("listener bug")

        runner.on_reply.insert(0, broken)
        outcome = await fx.ask("zebra", session="zl")
        assert outcome.status == "ok" and outcome.text == "echo zebra"
        assert "reply listener" in caplog.text
        assert runner.post_reply_pending == 0, "no post-reply work: no task was started"
    mark, top, _ = indexed(fermix_home.memory_db)
    assert mark == top, "the indexer, after the broken listener, still noted the reply"


async def test_a_reply_while_the_review_gate_is_known_closed_starts_no_post_reply_task(
    fermix_home,
) -> None:
    import time

    from fermix_core.memory.review import ReviewState

    config = {"fermix_core": {**CONFIG["fermix_core"], "memory": {"review_enabled": True}}}
    async with Fermix.open(fermix_home, config=config, plugins=[("providers.echo", Echo())]) as fx:
        runner = fx.service.runner
        (hook,) = runner.post_reply_hooks
        reviewer = hook.__self__
        reviewer.state_path.parent.mkdir(parents=True, exist_ok=True)
        ReviewState(last_run=time.time(), last_success=time.time()).save(reviewer.state_path)
        ran: list[int] = []

        async def counted(conversation_id: int):
            ran.append(conversation_id)
            return await hook(conversation_id)

        runner.post_reply_hooks[0] = counted
        runner.post_reply_wanted[counted] = runner.post_reply_wanted.pop(hook)
        await fx.ask("one", session="zr")
        await runner.post_reply_drained()
        assert len(ran) == 1, "the first reply reads the state file and finds the gate closed"
        assert not reviewer.may_be_due()
        for text in ("two", "three"):
            outcome = await fx.ask(text, session="zr")
            assert outcome.status == "ok"
            assert runner.post_reply_pending == 0, "gate known closed: no task was started"
        assert len(ran) == 1
        # Once it may open again the hook runs (and reads the file) as before.
        reviewer.gate.closed_until = time.time() - 1
        assert reviewer.may_be_due()
