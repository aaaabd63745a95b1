"""anyio cancellation through the store's worker: what a cancelled caller may and may not run.

The worker checks cancellation through the running loop's anyio backend, looked up once
per loop; these tests pin the semantics that lookup must keep: a caller already cancelled
never starts its call (inline or on the thread), a shielded caller inside a cancelled scope
still runs it, a call on the thread is finished and answered even when its caller is
cancelled meanwhile, and a worker used from a second event loop works there too.
"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import anyio
import pytest
from fermix_core.sqlite_worker import SqliteWorker

pytestmark = pytest.mark.anyio


def write(conn: sqlite3.Connection, value: str) -> str:
    conn.execute("INSERT INTO log (value) VALUES (?)", (value,))
    return value


def rows(path: Path) -> list[str]:
    conn = sqlite3.connect(path)
    try:
        return [row[0] for row in conn.execute("SELECT value FROM log ORDER BY id")]
    finally:
        conn.close()


@pytest.fixture
def db(tmp_path: Path):
    path = tmp_path / "worker.db"
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute("CREATE TABLE log (id INTEGER PRIMARY KEY, value TEXT NOT NULL)")
    worker = SqliteWorker(conn, name="test-worker", batchable=frozenset({write}))
    try:
        yield path, conn, worker
    finally:
        worker.stop()
        worker.join(10)
        conn.close()


async def test_a_cancelled_caller_never_starts_an_inline_call(db) -> None:
    path, conn, worker = db
    with anyio.CancelScope() as scope:
        scope.cancel()
        await worker.call_inline(write, conn, "never")
        pytest.fail("the cancelled caller went on past its call")
    assert scope.cancelled_caught
    assert rows(path) == []
    assert worker.calls == 0


async def test_a_cancelled_caller_never_queues_a_thread_call(db) -> None:
    path, conn, worker = db
    with anyio.CancelScope() as scope:
        scope.cancel()
        await worker.call(write, conn, "never")
    assert scope.cancelled_caught
    assert rows(path) == []


async def test_a_cancel_from_an_outer_scope_is_seen_through_inner_ones(db) -> None:
    path, conn, worker = db
    with anyio.CancelScope() as outer:
        with anyio.CancelScope():  # not shielded: the outer cancellation reaches through
            outer.cancel()
            await worker.call_inline(write, conn, "never")
    assert outer.cancelled_caught
    assert rows(path) == []


async def test_a_shielded_caller_in_a_cancelled_scope_still_runs_its_call(db) -> None:
    path, conn, worker = db
    with anyio.CancelScope() as scope:
        scope.cancel()
        with anyio.CancelScope(shield=True):
            assert await worker.call_inline(write, conn, "inline") == "inline"
            assert await worker.call(write, conn, "thread") == "thread"
    assert rows(path) == ["inline", "thread"]


async def test_a_caller_cancelled_while_its_call_runs_gets_it_finished(db) -> None:
    path, conn, worker = db
    started, release = threading.Event(), threading.Event()

    def slow(conn: sqlite3.Connection) -> str:
        started.set()
        release.wait()
        return write(conn, "finished")

    outcome: list[str] = []

    async def caller() -> None:
        outcome.append(await worker.call(slow, conn))
        await anyio.lowlevel.checkpoint()  # the cancellation lands here, after the result
        outcome.append("went on")

    async with anyio.create_task_group() as tg:
        tg.start_soon(caller)
        await anyio.to_thread.run_sync(started.wait)
        tg.cancel_scope.cancel()
        release.set()
    assert outcome == ["finished"]
    assert rows(path) == ["finished"]


def test_one_worker_serves_callers_on_two_event_loops_in_turn(db) -> None:
    path, conn, worker = db

    async def use(value: str) -> None:
        assert await worker.call_inline(write, conn, value) == value
        with anyio.CancelScope() as scope:
            scope.cancel()
            await worker.call_inline(write, conn, "never")
        assert scope.cancelled_caught

    anyio.run(use, "first")
    anyio.run(use, "second")
    assert rows(path) == ["first", "second"]
