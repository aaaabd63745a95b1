"""anyio cancellation through the store's worker: what a cancelled caller may and may not run.

The worker checks cancellation through the running loop's anyio backend, looked up once
per loop; these tests pin the semantics that lookup must keep: a caller already cancelled
never starts its call (inline or on the thread), a shielded caller inside a cancelled scope
still runs it, a call on the thread is finished and answered even when its caller is
cancelled meanwhile, and a worker used from a second event loop works there too.

A stopped worker answers every later call with an error instead of never: a call made after
the stop fails at once, and one that reached the queue behind the stop (another thread
stopping the worker meanwhile) is answered with that error by the thread as it ends.
``fail_after`` there only bounds a regression (a caller left waiting forever).
"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import anyio
import pytest
from fermix_core import sqlite_worker
from fermix_core.sqlite_worker import STOPPED, SqliteWorker

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


async def test_a_call_after_stop_fails_at_once(db) -> None:
    path, conn, worker = db
    assert await worker.call(write, conn, "before") == "before"
    worker.stop()
    worker.join(10)
    with anyio.fail_after(30):
        with pytest.raises(sqlite3.ProgrammingError, match=STOPPED):
            await worker.call(write, conn, "after")
        with pytest.raises(sqlite3.ProgrammingError, match=STOPPED):
            await worker.call_inline(write, conn, "after, inline")
    assert rows(path) == ["before"]


async def test_a_call_queued_behind_the_stop_is_answered_with_the_error(db) -> None:
    path, conn, worker = db
    busy, release = threading.Event(), threading.Event()

    def hold(conn: sqlite3.Connection) -> str:
        busy.set()
        release.wait(30)
        return "held"

    outcome: dict[str, object] = {}

    async def holder() -> None:
        outcome["held"] = await worker.call(hold, conn)

    async def late() -> None:
        try:
            await worker.call(write, conn, "late")
        except sqlite3.ProgrammingError as exc:
            outcome["late"] = exc

    with anyio.fail_after(30):  # a regression leaves "late" waiting forever
        async with anyio.create_task_group() as tg:
            tg.start_soon(holder)
            assert await anyio.to_thread.run_sync(busy.wait, 30)
            # Another thread stops the worker between this caller's check and its put: the
            # stop is in the queue first, the call lands behind it.
            worker._queue.put(sqlite_worker._STOP)
            tg.start_soon(late)
            await anyio.wait_all_tasks_blocked()
            release.set()
    await anyio.to_thread.run_sync(worker.join, 30)
    assert outcome["held"] == "held", "the call queued before the stop still ran"
    assert isinstance(outcome["late"], sqlite3.ProgrammingError)
    assert rows(path) == [], "the late call never ran"
