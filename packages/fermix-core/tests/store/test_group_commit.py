"""Group commit: calls that queue up together share one transaction, and stay exact.

The store's thread is held on a gate (a call that blocks until released) while the test
queues calls behind it, so the batch is made deterministically, with no timing. The crash
test kills a real process inside such a shared transaction.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import anyio
import pytest
from anyio import wait_all_tasks_blocked
from anyio.abc import TaskGroup
from fermix_core.channel import ConversationKey
from fermix_core.messages import ImagePart, Message, Usage
from fermix_core.store import ConversationStore, TurnStateError

pytestmark = pytest.mark.anyio


def hold(store: ConversationStore, tg: TaskGroup) -> threading.Event:
    """Park the store's thread on a gate; calls queue behind it until the gate opens."""
    gate = threading.Event()
    tg.start_soon(store.worker.call, gate.wait)
    return gate


async def test_calls_queued_together_share_one_transaction(store: ConversationStore, raw) -> None:
    cids = [await store.conversation_id(ConversationKey("cli", f"c{i}")) for i in range(20)]
    handles = [
        await store.begin_turn(
            cid, Message.user("q"), speaker="owner", sender_id=None, session_id="s"
        )
        for cid in cids
    ]
    results: dict[int, list[int]] = {}

    async def commit(i: int) -> None:
        results[i] = await store.commit_turn(
            handles[i].turn_id, [Message.assistant(f"a{i}")], usage=Usage(), model="m", provider="p"
        )

    before = store.worker.batches
    async with anyio.create_task_group() as tg:
        gate = hold(store, tg)
        await wait_all_tasks_blocked()
        for i in range(20):
            tg.start_soon(commit, i)
        await wait_all_tasks_blocked()
        gate.set()
    # The gate ran alone; the twenty commits behind it went in one transaction.
    assert store.worker.batches - before == 2
    assert sorted(results) == list(range(20))
    rows = raw.execute(
        "SELECT t.id, t.status, m.text FROM turns t JOIN messages m ON m.turn_id = t.id "
        "WHERE m.role = 'assistant' ORDER BY t.id"
    ).fetchall()
    assert rows == [(h.turn_id, "committed", f"a{i}") for i, h in enumerate(handles)]
    for i, cid in enumerate(cids):
        window = await store.load_window(cid)
        assert [m.message.text for m in window] == ["q", f"a{i}"]
        assert results[i] == [window[-1].id]


async def test_a_failing_call_in_a_batch_fails_alone(store: ConversationStore, raw) -> None:
    cid = await store.conversation_id(ConversationKey("cli", "mixed"))
    done = await store.begin_turn(
        cid, Message.user("q1"), speaker="owner", sender_id=None, session_id="s"
    )
    await store.commit_turn(
        done.turn_id, [Message.assistant("a1")], usage=Usage(), model=None, provider=None
    )
    other = await store.conversation_id(ConversationKey("cli", "other"))
    live = await store.begin_turn(
        other, Message.user("q2"), speaker="owner", sender_id=None, session_id="s"
    )
    outcomes: dict[str, object] = {}

    async def run(name: str, coro) -> None:
        try:
            outcomes[name] = await coro
        except Exception as exc:
            outcomes[name] = exc

    async with anyio.create_task_group() as tg:
        gate = hold(store, tg)
        await wait_all_tasks_blocked()
        # Committing an already committed turn fails; the calls around it must not care.
        tg.start_soon(
            run,
            "again",
            store.commit_turn(
                done.turn_id, [Message.assistant("dup")], usage=Usage(), model=None, provider=None
            ),
        )
        await wait_all_tasks_blocked()
        tg.start_soon(
            run,
            "live",
            store.commit_turn(
                live.turn_id, [Message.assistant("a2")], usage=Usage(), model=None, provider=None
            ),
        )
        await wait_all_tasks_blocked()
        tg.start_soon(run, "marker", store.append_marker(cid, "stopped"))
        await wait_all_tasks_blocked()
        gate.set()
    assert isinstance(outcomes["again"], TurnStateError)
    assert isinstance(outcomes["live"], list)
    assert outcomes["marker"] is False  # the last row of `cid` is an answer: nothing to mark
    texts = [r[0] for r in raw.execute("SELECT text FROM messages ORDER BY id")]
    assert texts == ["q1", "a1", "q2", "a2"], "the failed commit left nothing behind"


async def test_a_batch_whose_transaction_is_lost_runs_each_call_alone(
    store: ConversationStore, raw
) -> None:
    cid = await store.conversation_id(ConversationKey("cli", "lost"))
    handles = [
        await store.begin_turn(
            cid, Message.user(f"q{i}"), speaker="owner", sender_id=None, session_id="s"
        )
        for i in range(3)
    ]
    sync = store._sync
    assert sync is not None
    real = sync._after_insert
    calls: list[int] = []

    def fail_once_in_a_batch(ids: list[int]) -> None:
        calls.append(len(calls))
        if len(calls) == 2:
            # What a full disk does mid-transaction: SQLite rolls the whole thing back.
            sync.conn.execute("ROLLBACK")
            raise sqlite3.OperationalError("database or disk is full")
        real(ids)

    sync._after_insert = fail_once_in_a_batch
    outcomes: list[object] = [None, None, None]

    async def commit(i: int) -> None:
        try:
            outcomes[i] = await store.commit_turn(
                handles[i].turn_id,
                [Message.assistant(f"a{i}")],
                usage=Usage(),
                model=None,
                provider=None,
            )
        except Exception as exc:
            outcomes[i] = exc

    async with anyio.create_task_group() as tg:
        gate = hold(store, tg)
        await wait_all_tasks_blocked()
        for i in range(3):
            tg.start_soon(commit, i)
            await wait_all_tasks_blocked()
        gate.set()
    # Run again one by one after the lost batch: every commit landed, none twice.
    assert all(isinstance(o, list) for o in outcomes), outcomes
    statuses = [r[0] for r in raw.execute("SELECT status FROM turns ORDER BY id")]
    assert statuses == ["committed"] * 3
    answers = [
        r[0] for r in raw.execute("SELECT text FROM messages WHERE role = 'assistant' ORDER BY id")
    ]
    assert sorted(answers) == ["a0", "a1", "a2"]


CHILD = r"""
import sys
import threading
from pathlib import Path

import anyio
from fermix_core.channel import ConversationKey
from fermix_core.messages import ImagePart, Message, Usage
from fermix_core.store import ConversationStore

BATCH = 4


async def main() -> None:
    store = await ConversationStore.open(Path(sys.argv[1]))
    cids = [await store.conversation_id(ConversationKey("cli", f"c{i}")) for i in range(BATCH + 2)]

    async def begin(cid, text):
        user = Message.user(text)
        return await store.begin_turn(cid, user, speaker="owner", sender_id=None, session_id="s")

    async def finish(handle, text):
        reply = [Message.assistant(text)]
        await store.commit_turn(handle.turn_id, reply, usage=Usage(), model=None, provider=None)

    for cid in cids[:2]:
        handle = await begin(cid, "early")
        await finish(handle, "kept")
        print(f"COMMITTED {handle.turn_id}", flush=True)
    handles = [await begin(cid, "late") for cid in cids[2:]]
    inserted = []

    def stall(ids):
        inserted.append(ids)
        if len(inserted) == BATCH - 1:
            print(f"INSIDE {len(inserted)}", flush=True)
            sys.stdin.read()  # the parent never writes: we are killed here

    store._sync._after_insert = stall
    gate = threading.Event()

    async def commit(handle):
        await finish(handle, "lost")
        print(f"ACKED {handle.turn_id}", flush=True)

    async with anyio.create_task_group() as tg:
        tg.start_soon(store.worker.call, gate.wait)
        await anyio.wait_all_tasks_blocked()
        for handle in handles:
            tg.start_soon(commit, handle)
        await anyio.wait_all_tasks_blocked()
        print("QUEUED", flush=True)
        gate.set()


anyio.run(main)
"""


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs POSIX signals")
def test_sigkill_inside_a_shared_transaction_loses_only_unanswered_calls(tmp_path: Path) -> None:
    db = tmp_path / "memory.db"
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    proc = subprocess.Popen(
        [sys.executable, str(script), str(db)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: list[str] = []
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line.strip())
            if line.startswith("INSIDE"):
                break
        else:
            pytest.fail(f"child ended early: {proc.stderr.read() if proc.stderr else ''}")
        # Two commits of the batch already ran their inserts; a reader sees none of them.
        reader = sqlite3.connect(db)
        try:
            lost = reader.execute("SELECT COUNT(*) FROM messages WHERE text = 'lost'").fetchone()[0]
        finally:
            reader.close()
        assert lost == 0
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
    assert proc.returncode == -signal.SIGKILL
    assert "QUEUED" in lines and lines[-1] == "INSIDE 3"
    assert not [line for line in lines if line.startswith("ACKED")], "no batched call answered"
    committed = [int(line.split()[1]) for line in lines if line.startswith("COMMITTED")]
    assert len(committed) == 2

    conn = sqlite3.connect(db)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        statuses = dict(conn.execute("SELECT id, status FROM turns"))
        assert [statuses[t] for t in committed] == ["committed", "committed"]
        assert sorted(s for t, s in statuses.items() if t not in committed) == ["started"] * 4
        texts = sorted(r[0] for r in conn.execute("SELECT text FROM messages"))
        assert texts == ["early", "early", "kept", "kept"] + ["late"] * 4
    finally:
        conn.close()


async def test_start_turn_is_window_session_and_begin_in_one_call(
    store: ConversationStore, raw
) -> None:
    cid = await store.conversation_id(ConversationKey("cli", "start"))
    first = await store.start_turn(cid, Message.user("q1"), speaker="owner", sender_id="me")
    assert first.window == [] and first.session_id.startswith("main-")
    await store.commit_turn(
        first.handle.turn_id, [Message.assistant("a1")], usage=Usage(), model=None, provider=None
    )
    second = await store.start_turn(
        cid, Message.user("q2"), speaker="owner", sender_id="me", sender_name="Me"
    )
    assert [m.message.text for m in second.window] == ["q1", "a1"], "before the new message"
    assert int(second.session_id.split("-")[1]) == int(first.session_id.split("-")[1]) + 1
    row = raw.execute(
        "SELECT t.status, t.session_id, m.text, m.sender_name FROM turns t "
        "JOIN messages m ON m.id = t.user_message_id WHERE t.id = ?",
        (second.handle.turn_id,),
    ).fetchone()
    assert row == ("started", second.session_id, "q2", "Me")
    guest = await store.start_turn(
        cid, Message.user("g"), speaker="guest", speakers={"guest"}, sender_id="x"
    )
    assert guest.window == [], "a guest's window holds no owner turn"
    with pytest.raises(ValueError, match="speakers"):
        await store.start_turn(
            cid, Message.user("g"), speaker="guest", speakers={"nobody"}, sender_id="x"
        )


async def test_checkpoints_run_on_their_own_thread(store: ConversationStore, db_path) -> None:
    sync = store._sync
    assert sync is not None
    assert sync.conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 0
    cid = await store.conversation_id(ConversationKey("cli", "wal"))
    runs = store.checkpointer.runs
    # Enough write transactions to reach the checkpointer's threshold once.
    for i in range(store.checkpointer.every // 2 + 1):
        start = await store.start_turn(cid, Message.user(f"q{i}"), speaker="owner", sender_id=None)
        await store.commit_turn(
            start.handle.turn_id, [Message.assistant("a")], usage=Usage(), model=None, provider=None
        )
    assert await anyio.to_thread.run_sync(store.checkpointer.wait_runs, runs + 1, 30.0)
    # Everything committed is in the database file itself now, not only in the log.
    check = sqlite3.connect(db_path)
    try:
        busy, log_frames, done = check.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        assert busy == 0 and done == log_frames
    finally:
        check.close()


async def test_an_idle_store_runs_calls_on_the_loop_without_a_hop(store: ConversationStore) -> None:
    cid = await store.conversation_id(ConversationKey("cli", "inline"))
    before = store.worker.inline
    start = await store.start_turn(cid, Message.user("q"), speaker="owner", sender_id=None)
    await store.commit_turn(
        start.handle.turn_id, [Message.assistant("a")], usage=Usage(), model=None, provider=None
    )
    assert store.worker.inline - before == 2
    # A message with an image is encoded on the store's thread, never on the loop.
    image = Message.user(ImagePart(media_type="image/png", data=b"\x89PNG" + b"0" * 64))
    before = store.worker.inline
    await store.start_turn(cid, image, speaker="owner", sender_id=None)
    assert store.worker.inline == before


async def test_a_file_locked_by_another_process_waits_on_the_thread_not_the_loop(
    store: ConversationStore, db_path
) -> None:
    cid = await store.conversation_id(ConversationKey("cli", "locked"))
    other = sqlite3.connect(db_path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # another process holds the write lock
    started: list[object] = []
    finished = anyio.Event()

    async def write() -> None:
        started.append(
            await store.start_turn(cid, Message.user("q"), speaker="owner", sender_id=None)
        )
        finished.set()

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(write)
            # The loop is free while the write waits for the lock (on the store's thread).
            await wait_all_tasks_blocked()
            assert not finished.is_set()
            other.execute("COMMIT")
            await finished.wait()
    finally:
        other.close()
    assert len(started) == 1
    window = await store.load_window(cid)
    assert [m.message.text for m in window] == ["q"]


# ---------------------------------------------------------------- concurrent turns, no gate


async def _begin_all(store: ConversationStore, count: int, prefix: str) -> list:
    cids = [
        await store.conversation_id(ConversationKey("cli", f"{prefix}{i}")) for i in range(count)
    ]
    return [
        await store.begin_turn(
            cid, Message.user("q"), speaker="owner", sender_id=None, session_id="s"
        )
        for cid in cids
    ]


async def test_calls_from_concurrent_turns_share_a_transaction_on_the_thread(
    store: ConversationStore, raw
) -> None:
    handles = await _begin_all(store, 12, "conc")
    results: dict[int, list[int]] = {}

    async def commit(i: int) -> None:
        results[i] = await store.commit_turn(
            handles[i].turn_id, [Message.assistant(f"a{i}")], usage=Usage(), model="m", provider="p"
        )

    worker = store.worker
    batches, inline, calls = worker.batches, worker.inline, worker.calls
    # Nothing holds the thread: the twelve tasks become ready together and call in one
    # iteration of the loop, so their calls are collected and committed together.
    async with anyio.create_task_group() as tg:
        for i in range(12):
            tg.start_soon(commit, i)
    assert worker.calls - calls == 12
    assert worker.batches - batches == 1, "one transaction for the twelve commits"
    assert worker.inline == inline, "collected calls run on the thread, not the loop"
    rows = raw.execute(
        "SELECT t.id, t.status, m.text FROM turns t JOIN messages m ON m.turn_id = t.id "
        "WHERE m.role = 'assistant' ORDER BY t.id"
    ).fetchall()
    assert rows == [(h.turn_id, "committed", f"a{i}") for i, h in enumerate(handles)]


async def test_a_call_collected_alone_still_runs_on_the_loop(store: ConversationStore) -> None:
    (handle,) = await _begin_all(store, 1, "lone")
    worker = store.worker
    inline, batches = worker.inline, worker.batches
    other_ran = anyio.Event()

    async def busy() -> None:  # another task ready at the same time, doing no store work
        await anyio.lowlevel.checkpoint()
        other_ran.set()

    async def commit() -> None:
        await store.commit_turn(
            handle.turn_id, [Message.assistant("a")], usage=Usage(), model=None, provider=None
        )

    async with anyio.create_task_group() as tg:
        tg.start_soon(busy)
        tg.start_soon(commit)
    assert other_ran.is_set()
    assert worker.inline - inline == 1
    assert worker.batches - batches == 1


async def test_a_failing_call_among_concurrent_ones_fails_alone(
    store: ConversationStore, raw
) -> None:
    done, live, live2 = await _begin_all(store, 3, "fail")
    await store.commit_turn(
        done.turn_id, [Message.assistant("first")], usage=Usage(), model=None, provider=None
    )
    outcomes: dict[str, object] = {}

    async def commit(name: str, turn_id: int, text: str) -> None:
        try:
            outcomes[name] = await store.commit_turn(
                turn_id, [Message.assistant(text)], usage=Usage(), model=None, provider=None
            )
        except Exception as exc:
            outcomes[name] = exc

    batches = store.worker.batches
    async with anyio.create_task_group() as tg:
        tg.start_soon(commit, "live", live.turn_id, "a-live")
        tg.start_soon(commit, "again", done.turn_id, "dup")  # already committed: fails
        tg.start_soon(commit, "live2", live2.turn_id, "a-live2")
    assert store.worker.batches - batches == 1
    assert isinstance(outcomes["again"], TurnStateError)
    assert isinstance(outcomes["live"], list) and isinstance(outcomes["live2"], list)
    texts = [r[0] for r in raw.execute("SELECT text FROM messages WHERE role = 'assistant'")]
    assert sorted(texts) == ["a-live", "a-live2", "first"], "the failed commit left nothing"


async def test_concurrent_calls_on_a_locked_file_wait_on_the_thread(
    store: ConversationStore, db_path
) -> None:
    cids = [await store.conversation_id(ConversationKey("cli", f"lk{i}")) for i in range(4)]
    other = sqlite3.connect(db_path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # another process holds the write lock
    started: list[object] = []
    all_done = anyio.Event()

    async def write(cid: int) -> None:
        started.append(
            await store.start_turn(cid, Message.user(f"q{cid}"), speaker="owner", sender_id=None)
        )
        if len(started) == len(cids):
            all_done.set()

    try:
        async with anyio.create_task_group() as tg:
            for cid in cids:
                tg.start_soon(write, cid)
            # The loop stays free while the batch waits for the lock on the store's thread.
            await wait_all_tasks_blocked()
            assert not started
            other.execute("COMMIT")
            await all_done.wait()
    finally:
        other.close()
    for cid in cids:
        window = await store.load_window(cid)
        assert [m.message.text for m in window] == [f"q{cid}"]


@pytest.mark.parametrize("together", [1, 4], ids=["alone", "batch"])
async def test_a_briefly_locked_file_is_retried_in_short_steps_not_slept_on(
    store: ConversationStore, db_path, monkeypatch: pytest.MonkeyPatch, together: int
) -> None:
    """The lock is freed during the first short pause: the next try gets it, without
    SQLite's busy handler (whose first sleep alone is a millisecond)."""
    cids = [
        await store.conversation_id(ConversationKey("cli", f"brief{together}-{i}"))
        for i in range(together)
    ]
    other = sqlite3.connect(db_path, isolation_level=None, check_same_thread=False)
    other.execute("BEGIN IMMEDIATE")  # another connection holds the write lock
    worker = store.worker
    pauses: list[int] = []
    timeouts: list[str] = []

    def pause() -> None:
        pauses.append(1)
        if other.in_transaction:
            other.execute("COMMIT")  # the holder finishes while the call waits

    real = worker.conn

    class Spy:
        """The worker's connection, recording every busy_timeout change made on it."""

        def __getattr__(self, name: str):
            return getattr(real, name)

        def execute(self, sql: str, *args):
            if "busy_timeout" in sql:
                timeouts.append(sql)
            return real.execute(sql, *args)

    async def write(cid: int) -> None:
        await store.start_turn(cid, Message.user(f"q{cid}"), speaker="owner", sender_id=None)

    monkeypatch.setattr(worker, "_pause", pause)
    monkeypatch.setattr(worker, "conn", Spy())
    retries = worker.quick_retries
    try:
        async with anyio.create_task_group() as tg:
            for cid in cids:
                tg.start_soon(write, cid)
    finally:
        monkeypatch.undo()
        other.close()
    assert worker.quick_retries - retries == len(pauses) == 1
    assert timeouts == [], "the busy handler was never needed"
    for cid in cids:
        window = await store.load_window(cid)
        assert [m.message.text for m in window] == [f"q{cid}"]
