"""When the background checkpointer copies the write-ahead log back: at a quiet moment.

A checkpoint is due after ``every`` commits; it then waits until no commit has been noted
for ``quiet`` seconds (so its file sync lands between turns, not beside one), but never
past ``limit`` commits since the last one, and ``checkpoint_now`` or ``close`` cut the wait
short. The unit tests drive the quiet wait through an event whose timed waits report what
a writer did meanwhile, so no test depends on how fast this machine is; the last test
floods a real database file from a real thread.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from fermix_core.sqlite_worker import Checkpointer


class ScriptedWaits(threading.Event):
    """An event whose timed waits (the quiet periods) run *during* first: what a writer
    did while the checkpointer waited. Untimed waits behave as usual."""

    def __init__(self, during: Callable[[int], None]) -> None:
        super().__init__()
        self.during = during
        self.quiet_waits = 0

    def wait(self, timeout: float | None = None) -> bool:
        if timeout is None:
            return super().wait()
        self.quiet_waits += 1
        self.during(self.quiet_waits)
        return self.is_set()


def wal_db(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA wal_autocheckpoint = 0")
    conn.execute("CREATE TABLE IF NOT EXISTS log (id INTEGER PRIMARY KEY, value TEXT)")
    return conn


@pytest.fixture
def checkpointer(tmp_path: Path) -> Iterator[Checkpointer]:
    conn = wal_db(tmp_path / "ckpt.db")
    conn.close()
    made = Checkpointer(tmp_path / "ckpt.db", every=5, name="test-checkpoint", quiet=0.01)
    serving = made._wake  # the serving thread blocks on this one; the tests swap in their own
    yield made
    made._stopping = True
    serving.set()
    made.close(timeout=10)


def scripted(checkpointer: Checkpointer, during: Callable[[int], None]) -> ScriptedWaits:
    waits = ScriptedWaits(during)
    checkpointer._wake = waits
    return waits


def test_a_due_checkpoint_waits_out_every_period_with_a_commit(checkpointer: Checkpointer) -> None:
    def writer(wait: int) -> None:
        if wait <= 3:
            checkpointer.note_commit()

    waits = scripted(checkpointer, writer)
    checkpointer._await_quiet()
    assert waits.quiet_waits == 4, "three busy periods, then the first quiet one"


def test_a_flood_of_commits_still_checkpoints_at_the_limit(checkpointer: Checkpointer) -> None:
    checkpointer.limit = 10

    def flood(wait: int) -> None:
        for _ in range(4):
            checkpointer.note_commit()

    waits = scripted(checkpointer, flood)
    checkpointer._await_quiet()
    assert (waits.quiet_waits, checkpointer.commits) == (3, 12), "0 → 4 → 8 → 12 ≥ 10"


def test_checkpoint_now_and_close_cut_the_wait_short(checkpointer: Checkpointer) -> None:
    def asked(wait: int) -> None:
        checkpointer.note_commit()
        if wait == 2:
            checkpointer._now = True

    waits = scripted(checkpointer, asked)
    checkpointer._await_quiet()
    assert waits.quiet_waits == 2
    checkpointer._now = False

    def closing(wait: int) -> None:
        checkpointer.note_commit()
        checkpointer._stopping = wait == 1

    waits = scripted(checkpointer, closing)
    checkpointer._await_quiet()
    assert waits.quiet_waits == 1


def test_a_real_flood_is_checkpointed_by_its_limit(tmp_path: Path) -> None:
    """A writer that never pauses: only the limit can start the checkpoint (the quiet
    period is far longer than the test may take), and the log's frames reach the file."""
    path = tmp_path / "flood.db"
    writer = wal_db(path)
    made = Checkpointer(path, every=5, name="test-flood", quiet=600.0, limit=40)
    stop = threading.Event()

    def write() -> None:
        n = 0
        while not stop.is_set():
            writer.execute("INSERT INTO log (value) VALUES (?)", (f"v{n}",))
            made.note_commit()
            n += 1

    thread = threading.Thread(target=write)
    thread.start()
    try:
        assert made.wait_runs(1, 60.0), "no checkpoint under a flood"
        assert made.commits >= 40
    finally:
        stop.set()
        thread.join()
        made.close(timeout=10)
    check = sqlite3.connect(path)
    try:
        written = check.execute("SELECT COUNT(*) FROM log").fetchone()[0]
        assert written >= 40
    finally:
        check.close()
        writer.close()
