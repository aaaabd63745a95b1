"""A worker that was stopped answers every later call with an error instead of never.

Calls queued before the stop still run; a call made after it fails at once; and a call that
reached the queue behind the stop (another thread stopping the worker meanwhile) is answered
with the same error by the thread as it ends. ``fail_after`` only bounds a regression (a
caller left waiting forever); nothing here depends on timing.
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


def values(path: Path) -> list[str]:
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
    worker = SqliteWorker(conn, name="test-stopped", batchable=frozenset({write}))
    try:
        yield path, conn, worker
    finally:
        worker.stop()
        worker.join(10)
        conn.close()


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
    assert values(path) == ["before"]


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
    assert values(path) == [], "the late call never ran"
