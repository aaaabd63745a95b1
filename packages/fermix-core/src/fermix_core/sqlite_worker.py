"""One thread that owns one SQLite connection, called from the event loop, with group commit.

A component that keeps tables in ``memory.db`` (the conversation store) runs every SQL call
on its own thread, one call at a time, so the event loop never blocks on the file and the
connection is never used by two threads at once. This module is that thread, made cheap:

* **A lean hop.** A call is put on a :class:`queue.SimpleQueue`; the thread answers on the
  caller's asyncio loop with ``call_soon_threadsafe``. No capacity limiter, no per-call
  worker-pool bookkeeping.
* **Group commit.** Calls that arrive while the thread is busy wait in the queue; the thread
  then takes up to :data:`MAX_BATCH` of them and runs them in **one** transaction, each inside
  its own ``SAVEPOINT`` (a call that raises is rolled back alone and gets its exception), and
  answers all of them with one wake-up of the loop. Every caller hears back only after that
  ``COMMIT`` returned, so an answered call is exactly as durable as before: "a crash loses no
  committed message" holds for each call. If the shared transaction cannot be kept (SQLite
  rolled it back, or ``COMMIT`` failed), every call of the batch is run again on its own, so
  each caller gets its own outcome, as if there had been no batch.
* **No hop at all when the thread is idle.** :meth:`SqliteWorker.call_inline` runs a call
  directly on the event loop when nothing is queued or running on the thread (so the
  connection is free) and no other task is ready to run: a sequential turn pays no thread
  switch.
* **Concurrent calls batch.** When other tasks are ready (many conversations at once), a
  call waits for the end of the loop's current iteration; the calls made in it go to the
  thread as one queue item and share one transaction (one ``COMMIT``; SQLite's work, which
  releases the GIL, overlaps the loop's on a second core). A call collected alone still
  runs on the loop while the thread is idle. It runs with
  ``busy_timeout = 0``, so the loop never waits for another process's lock: a call that
  finds the file locked (``BEGIN IMMEDIATE`` refused before anything ran) goes to the thread
  and waits there. (The connection itself runs with ``busy_timeout = 0``; the thread tries
  such a call again every 0.1 ms for up to 20 ms — another connection of the daemon holds
  the lock for less than SQLite's busy handler's first 1 ms sleep — then sets the
  component's own timeout for one last, waiting retry.)
  In WAL mode with ``synchronous = NORMAL`` a commit writes a few pages to the OS cache
  and never syncs (checkpoints sync, on their own thread). Callers keep big work (large
  images to encode) off this path.
* **Checkpoints off the calling path.** :class:`Checkpointer` is a second thread with its own
  connection that copies the write-ahead log back into the database file (``PRAGMA
  wal_checkpoint(PASSIVE)``, which never blocks a writer) once :data:`CHECKPOINT_EVERY`
  write transactions have committed, at the next moment no transaction has committed for
  :data:`CHECKPOINT_QUIET` seconds (between turns: its file sync does not land beside one),
  or after :data:`CHECKPOINT_LIMIT` commits under a steady flood. No caller waits for a
  checkpoint. The owning connection runs with ``wal_autocheckpoint = 0``.

Only functions named *batchable* may share a transaction: each must be one whole unit of
work whose own transactions nest (``BEGIN`` inside a batch becomes a savepoint; see
:func:`write_transaction`). Anything else (opening, closing, schema work) runs alone.

A caller cancelled while its call waits or runs still has that call finish (it is never
abandoned half-way) and receives its result; the cancellation is delivered at its next
checkpoint, as with ``anyio.to_thread.run_sync``. A caller already cancelled never starts
its call. Both are anyio's own cancellation (its scopes, ``/stop``), checked through the
anyio backend of the running loop, looked up once per loop rather than on every call (the
lookup asks which async library runs, each time). Under an event loop other than asyncio the
same thread is used and the caller waits for it from an anyio worker thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import queue
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sized
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import anyio.to_thread
from anyio.abc import AsyncBackend

__all__ = [
    "CHECKPOINT_EVERY",
    "CHECKPOINT_LIMIT",
    "CHECKPOINT_QUIET",
    "MAX_BATCH",
    "Checkpointer",
    "SqliteWorker",
    "read_transaction",
    "write_transaction",
]

log = logging.getLogger("fermix.sqlite")

#: A call that found the file locked is tried again every QUICK_PAUSE seconds for up to
#: QUICK_WAIT seconds before SQLite's own busy handler takes over. That handler's first wait
#: is a whole millisecond (then 2, 5, 10 ms…), longer than another connection in this daemon
#: holds the lock (the history indexer's steps take well under a millisecond), so a turn
#: behind one would wait ≥ 1 ms for a lock freed after a fraction of that.
QUICK_PAUSE = 0.0001
QUICK_WAIT = 0.02
#: The most calls one transaction takes, so a long queue still commits in bounded steps.
MAX_BATCH = 64
#: Committed write transactions after which a background checkpoint is due. A turn writes
#: two transactions of a few pages each, so the log stays near SQLite's own 1,000-page
#: autocheckpoint threshold.
CHECKPOINT_EVERY = 100
#: A due checkpoint waits until no transaction has committed for this long, so it runs
#: between turns rather than beside one (its sync of the database file slows a turn that
#: writes meanwhile)...
CHECKPOINT_QUIET = 0.02
#: ...but never past this many commits since the last one: under a steady flood of turns the
#: log is still copied back in bounded steps (at a few pages per commit, about 20 MiB of log).
CHECKPOINT_LIMIT = 1000

_STOP = object()
#: What a call made after :meth:`SqliteWorker.stop` is told.
STOPPED = "the connection's thread has stopped"


class _WriteTransaction:
    """What :func:`write_transaction` returns (a plain class: a generator-based context
    manager costs about twice as much, paid twice per turn). Not reentrant, but reusable:
    a component that opens its write transactions one after another may keep one."""

    __slots__ = ("conn", "execute", "nested")

    def __init__(self, conn: sqlite3.Connection, cursor: sqlite3.Cursor | None = None) -> None:
        self.conn = conn
        #: ``BEGIN``, ``COMMIT`` and savepoints run here: the caller's cursor when it has
        #: one (``conn.execute`` makes and drops a cursor for each statement).
        self.execute = conn.execute if cursor is None else cursor.execute
        self.nested = False

    def __enter__(self) -> sqlite3.Connection:
        conn = self.conn
        if conn.in_transaction:
            self.nested = True
            self.execute("SAVEPOINT fermix_write")
        else:
            self.nested = False
            self.execute("BEGIN IMMEDIATE")
        return conn

    def __exit__(self, kind: type[BaseException] | None, exc: object, tb: object) -> None:
        conn = self.conn
        execute = self.execute
        if self.nested:
            if kind is None:
                execute("RELEASE fermix_write")
            elif conn.in_transaction:
                execute("ROLLBACK TO fermix_write")
                execute("RELEASE fermix_write")
            return
        if kind is None:
            try:
                execute("COMMIT")
            except BaseException:
                # A failed COMMIT (disk full): never leave the connection mid-transaction.
                if conn.in_transaction:
                    execute("ROLLBACK")
                raise
        elif conn.in_transaction:
            execute("ROLLBACK")


def write_transaction(
    conn: sqlite3.Connection, cursor: sqlite3.Cursor | None = None
) -> _WriteTransaction:
    """``BEGIN IMMEDIATE`` … ``COMMIT``, or a savepoint inside a batch's transaction.

    On an exception (also one raised by ``COMMIT``) the transaction or savepoint is rolled
    back and the exception goes on. With *cursor* (one of *conn*'s) the transaction's own
    statements run on it. The returned object may be entered again once it has exited.
    """
    return _WriteTransaction(conn, cursor)


@contextlib.contextmanager
def read_transaction(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """One snapshot for several SELECTs (a batch's transaction already is one)."""
    if conn.in_transaction:
        yield conn
        return
    conn.execute("BEGIN")
    try:
        yield conn
    finally:
        if conn.in_transaction:
            conn.execute("COMMIT")


class _Call:
    __slots__ = ("args", "done", "error", "fn", "future", "kwargs", "loop", "on_thread", "result")

    def __init__(self, fn: Callable[..., Any], args: tuple, kwargs: dict) -> None:
        self.fn = fn
        self.args = args
        self.kwargs = kwargs
        self.loop: asyncio.AbstractEventLoop | None = None
        self.future: asyncio.Future | None = None
        self.done: threading.Event | None = None
        self.result: Any = None
        self.error: BaseException | None = None
        #: Handed to the thread (counted in ``SqliteWorker._in_flight`` until answered).
        self.on_thread = False

    def run(self) -> None:
        try:
            self.result = self.fn(*self.args, **self.kwargs)
            self.error = None
        except BaseException as exc:
            self.result = None
            self.error = exc


def _is_locked(exc: sqlite3.OperationalError) -> bool:
    text = str(exc).lower()
    return "locked" in text or "busy" in text


def _ready_queue(loop: asyncio.AbstractEventLoop) -> Sized | None:
    """*loop*'s queue of callbacks ready to run now: not empty while other tasks are
    mid-turn. asyncio's own loop keeps one deque for its life; a loop without one (uvloop)
    gives None, so every call runs inline at once as it would alone."""
    return getattr(loop, "_ready", None)


def _settle(calls: list[_Call]) -> None:
    """On the loop: hand each finished call's outcome to its waiting caller."""
    for call in calls:
        future = call.future
        if future is None or future.done():
            continue
        if call.error is not None:
            future.set_exception(call.error)
        else:
            future.set_result(call.result)


class SqliteWorker:
    """Runs calls on *conn* from one thread, batching what arrives together (see module doc).

    *batchable* names the functions that may share a transaction; *read_only* those of them
    that never write (a batch of only those opens a plain ``BEGIN``). *on_commit* runs on the
    thread after each committed transaction that may have written; *on_rollback* after a
    batch's shared transaction was lost (drop anything cached from rows it had read).
    """

    def __init__(
        self,
        conn: sqlite3.Connection,
        *,
        name: str,
        batchable: frozenset[Callable[..., Any]],
        read_only: frozenset[Callable[..., Any]] = frozenset(),
        on_commit: Callable[[], None] | None = None,
        on_rollback: Callable[[], None] | None = None,
        max_batch: int = MAX_BATCH,
    ) -> None:
        self.conn = conn
        self.batchable = batchable
        self.read_only = read_only
        self.on_commit = on_commit
        self.on_rollback = on_rollback
        self.max_batch = max_batch
        # The connection never waits for a lock by itself (a call on the loop must not): the
        # thread waits, with the connection's own timeout, only once a call found it locked.
        self.busy_timeout_ms = int(conn.execute("PRAGMA busy_timeout").fetchone()[0])
        conn.execute("PRAGMA busy_timeout = 0")
        #: How many calls ran and in how many transactions (a benchmark reads these);
        #: ``inline`` of them ran on the caller's loop.
        self.calls = 0
        self.batches = 0
        self.inline = 0
        #: Short retries of calls that found the file locked (see QUICK_PAUSE).
        self.quick_retries = 0
        #: Calls handed to the thread and not yet answered (counted on the loop side).
        self._in_flight = 0
        #: Calls collected on the loop during this iteration, run together by _flush.
        self._pending: list[_Call] = []
        #: The asyncio loop calls last came from, and anyio's backend for it (its
        #: checkpoints and cancel scopes, without a per-call async-library lookup).
        self._loop: asyncio.AbstractEventLoop | None = None
        self._backend: type[AsyncBackend] | None = None
        #: That loop's ready queue (see _ready_queue), read by every inline call.
        self._ready: Sized | None = None
        self._stopped = False
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self._thread.start()

    # ------------------------------------------------------------------ loop side

    def _backend_of(self, loop: asyncio.AbstractEventLoop) -> type[AsyncBackend]:
        """anyio's backend for *loop* (the calls' loop rarely changes: looked up once)."""
        if loop is not self._loop:
            self._backend = anyio.lowlevel.current_token().backend_class
            self._ready = _ready_queue(loop)
            self._loop = loop
        backend = self._backend
        assert backend is not None
        return backend

    async def call(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        """Run ``fn(*args, **kwargs)`` on the thread and return (or raise) what it did."""
        call = _Call(fn, args, kwargs)
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        if loop is None:
            # A caller already cancelled never starts its call (as with anyio.to_thread).
            await anyio.lowlevel.checkpoint_if_cancelled()
            self._refuse_if_stopped()
            call.done = threading.Event()
            self._queue.put(call)
            await anyio.to_thread.run_sync(call.done.wait)
            if call.error is not None:
                raise call.error
            return call.result
        backend = self._backend_of(loop)
        await backend.checkpoint_if_cancelled()
        self._refuse_if_stopped()
        call.loop = loop
        call.future = loop.create_future()
        self._in_flight += 1
        self._queue.put(call)
        try:
            # Shielded: a cancelled caller still waits for its call to finish (it cannot be
            # abandoned half-way) and gets its result; the cancellation comes at its next await.
            with backend.create_cancel_scope(shield=True):
                return await call.future
        finally:
            self._in_flight -= 1

    async def call_inline(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        """:meth:`call`, run on the loop itself while the thread has nothing to do.

        Only for *batchable* calls (one short transaction each). Under another event loop
        than asyncio it is :meth:`call`. When other tasks are ready to run, or calls are on
        the thread, the call is collected with the others of the same loop iteration
        (:meth:`_collect`): several go to the thread as one transaction.
        """
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return await self.call(fn, *args, **kwargs)
        backend = self._backend if loop is self._loop else self._backend_of(loop)
        assert backend is not None
        # A caller already cancelled never starts its call (as with anyio.to_thread).
        await backend.checkpoint_if_cancelled()
        if self._stopped or fn not in self.batchable:
            return await self.call(fn, *args, **kwargs)
        if self._in_flight or self._pending or self._ready:
            return await self._collect(loop, backend, _Call(fn, args, kwargs))
        try:
            result = fn(*args, **kwargs)
        except sqlite3.OperationalError as exc:
            if not _is_locked(exc) or self.conn.in_transaction:
                raise
            # Another process holds the write lock and nothing ran: wait for it on the thread.
            return await self.call(fn, *args, **kwargs)
        self.calls += 1
        self.batches += 1
        self.inline += 1
        if self.on_commit is not None and fn not in self.read_only:
            self.on_commit()
        return result

    async def _collect(
        self, loop: asyncio.AbstractEventLoop, backend: type[AsyncBackend], call: _Call
    ) -> Any:
        """Wait for *call* to run with the others made in the same turn of the loop.

        Other tasks are ready (or calls are on the thread), so more calls are likely to come
        before the loop next polls: the first call schedules :meth:`_flush` for the loop's
        next iteration, and every call made until then runs in the same transaction.
        """
        call.loop = loop
        call.future = loop.create_future()
        if not self._pending:
            loop.call_soon(self._flush)
        self._pending.append(call)
        try:
            with backend.create_cancel_scope(shield=True):
                return await call.future
        finally:
            if call.on_thread:
                self._in_flight -= 1

    def _flush(self) -> None:
        """On the loop: run the calls collected since the last flush.

        Several calls go to the thread together, as one queue item, so they share its next
        transaction (one ``COMMIT`` for all, and SQLite's work overlaps the loop's on the
        other core). One call alone runs here as :meth:`call_inline` would, unless calls
        are on the thread already (it then joins them there). Every caller is answered only
        after its ``COMMIT``.
        """
        pending, self._pending = self._pending, []
        for start in range(0, len(pending), self.max_batch):
            chunk = pending[start : start + self.max_batch]
            try:
                self._refuse_if_stopped()
                if self._in_flight or len(chunk) > 1:
                    self._to_thread(chunk)
                else:
                    self._flush_one(chunk[0])
            except BaseException as exc:
                # Never leave a caller waiting: whoever was not answered gets the error.
                for call in chunk:
                    if not call.on_thread:
                        call.error = exc
                _settle([call for call in chunk if not call.on_thread])
                if not isinstance(exc, Exception):
                    raise

    def _to_thread(self, calls: list[_Call]) -> None:
        for call in calls:
            call.on_thread = True
        self._in_flight += len(calls)
        self._queue.put(calls)

    def _found_locked(self, call: _Call) -> bool:
        """Whether *call* failed because the file was locked, before anything ran."""
        error = call.error
        return (
            isinstance(error, sqlite3.OperationalError)
            and _is_locked(error)
            and not self.conn.in_transaction
        )

    def _flush_one(self, call: _Call) -> None:
        call.run()
        if self._found_locked(call):
            # Another process holds the write lock and nothing ran: wait for it on the thread.
            self._to_thread([call])
            return
        self.calls += 1
        self.batches += 1
        self.inline += 1
        if self.on_commit is not None and call.fn not in self.read_only:
            self.on_commit()
        _settle([call])

    def stop(self) -> None:
        """Let the thread finish the calls already queued, then end; returns at once.

        A call made afterwards fails at once with :class:`sqlite3.ProgrammingError`; one
        that slipped into the queue behind the stop (from another thread) gets the same
        error from the thread as it ends, so no caller waits for an answer that never comes.
        """
        self._stopped = True
        self._queue.put(_STOP)

    def _refuse_if_stopped(self) -> None:
        if self._stopped:
            raise sqlite3.ProgrammingError(STOPPED)

    def _refuse_the_rest(self) -> None:
        """On the thread, as it ends: answer whatever was queued behind the stop."""
        late: list[_Call] = []
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if item is not _STOP:
                late.extend(item if isinstance(item, list) else [item])
        if late:
            for call in late:
                call.result, call.error = None, sqlite3.ProgrammingError(STOPPED)
            self._answer(late)

    def join(self, timeout: float | None = None) -> None:
        self._thread.join(timeout)

    # ------------------------------------------------------------------ thread side

    def _serve(self) -> None:
        get, get_nowait = self._queue.get, self._queue.get_nowait
        held: Any = None
        while True:
            first = held if held is not None else get()
            held = None
            if first is _STOP:
                self._refuse_the_rest()
                return
            # A list is the calls the loop collected in one of its iterations.
            batch = list(first) if isinstance(first, list) else [first]
            if batch[0].fn in self.batchable:
                while len(batch) < self.max_batch:
                    try:
                        nxt = get_nowait()
                    except queue.Empty:
                        break
                    if isinstance(nxt, list) and len(batch) + len(nxt) <= self.max_batch:
                        batch.extend(nxt)
                        continue
                    if nxt is _STOP or isinstance(nxt, list):
                        held = nxt
                        break
                    if nxt.fn not in self.batchable:
                        held = nxt
                        break
                    batch.append(nxt)
            self.calls += len(batch)
            if len(batch) == 1:
                self._run_alone(batch[0])
            else:
                self._run_batch(batch)
            self._answer(batch)

    def _pause(self) -> None:
        """One short wait between two tries of a locked file (a method, so tests can step it)."""
        time.sleep(QUICK_PAUSE)

    def _quickly(self, attempt: Callable[[], bool]) -> bool:
        """Try *attempt* (true once past the lock) every QUICK_PAUSE for up to QUICK_WAIT s."""
        deadline = time.monotonic() + QUICK_WAIT
        while True:
            self._pause()
            self.quick_retries += 1
            if attempt():
                return True
            if time.monotonic() >= deadline:
                return False

    def _past_lock(self, call: _Call) -> bool:
        """Run *call* again; whether it got past the lock (it ran, or failed otherwise)."""
        call.run()
        return not self._found_locked(call)

    def _patiently(self, run: Callable[[], Any]) -> Any:
        """*run*; if it found the file locked, short retries, then one waiting up to the busy
        timeout."""
        conn = self.conn
        try:
            return run()
        except sqlite3.OperationalError as exc:
            if not _is_locked(exc) or conn.in_transaction:
                raise
        outcome: list[Any] = []

        def attempt() -> bool:
            try:
                outcome.append(run())
            except sqlite3.OperationalError as exc:
                if not _is_locked(exc) or conn.in_transaction:
                    raise
                return False
            return True

        if self._quickly(attempt):
            return outcome[0]
        return self._waiting(run)

    def _waiting(self, run: Callable[[], Any]) -> Any:
        """*run* once with the component's busy timeout (the last try of a locked file)."""
        conn = self.conn
        conn.execute(f"PRAGMA busy_timeout = {self.busy_timeout_ms}")
        try:
            return run()
        finally:
            conn.execute("PRAGMA busy_timeout = 0")

    def _run_alone(self, call: _Call) -> None:
        self.batches += 1
        call.run()
        if self._found_locked(call) and not self._quickly(lambda: self._past_lock(call)):
            # Still locked, and nothing ran: once more, waiting this time.
            self._waiting(call.run)
        if self.on_commit is not None and call.fn not in self.read_only:
            self.on_commit()

    def _run_batch(self, batch: list[_Call]) -> None:
        conn = self.conn
        writes = any(call.fn not in self.read_only for call in batch)
        begin = "BEGIN IMMEDIATE" if writes else "BEGIN"
        try:
            self._patiently(lambda: conn.execute(begin))
        except sqlite3.Error as exc:
            # The file is locked past busy_timeout (or unwritable): each call would have
            # waited and failed the same way on its own.
            for call in batch:
                call.error = exc
            return
        if not self._shared_transaction(batch, writes):
            # Nothing of the batch landed: run each call on its own, so each caller gets the
            # outcome it would have had without the batch.
            for call in batch:
                self._run_alone(call)

    def _shared_transaction(self, batch: list[_Call], writes: bool) -> bool:
        """After ``BEGIN``: each call in its own savepoint, then ``COMMIT``.

        Whether the transaction was kept; if not, it is rolled back (``on_rollback`` told)
        and no call of *batch* landed.
        """
        conn = self.conn
        self.batches += 1
        intact = True
        for call in batch:
            conn.execute("SAVEPOINT fermix_call")
            call.run()
            if not conn.in_transaction:
                intact = False  # SQLite rolled the whole transaction back (disk full, I/O)
                break
            if call.error is not None:
                conn.execute("ROLLBACK TO fermix_call")
            conn.execute("RELEASE fermix_call")
        if intact:
            try:
                conn.execute("COMMIT")
            except sqlite3.Error:
                intact = False
        if intact:
            if writes and self.on_commit is not None:
                self.on_commit()
            return True
        with contextlib.suppress(sqlite3.Error):
            if conn.in_transaction:
                conn.execute("ROLLBACK")
        if self.on_rollback is not None:
            self.on_rollback()
        return False

    def _answer(self, batch: list[_Call]) -> None:
        by_loop: dict[asyncio.AbstractEventLoop, list[_Call]] = {}
        for call in batch:
            if call.done is not None:
                call.done.set()
            elif call.loop is not None:
                by_loop.setdefault(call.loop, []).append(call)
        for loop, calls in by_loop.items():
            # A closed loop raises RuntimeError: nobody is waiting there any more.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(_settle, calls)


class Checkpointer:
    """Copies the write-ahead log into the database file from its own thread.

    :meth:`note_commit` (called by the writer's thread after each write transaction) wakes
    it every *every* commits. It then waits for a quiet moment — *quiet* seconds without a
    commit — or for *limit* commits in all, whichever comes first, and runs ``PRAGMA
    wal_checkpoint(PASSIVE)`` on its own connection, which never waits for, nor blocks, a
    writer. Waiting for the quiet moment keeps the checkpoint's file sync from landing
    beside a turn; it costs the writer nothing (a counter it already keeps is sampled from
    this thread). Checkpoint failures are logged once and retried at the next wake-up: the
    log only grows meanwhile.
    """

    def __init__(
        self,
        path: Path,
        *,
        every: int = CHECKPOINT_EVERY,
        name: str,
        quiet: float = CHECKPOINT_QUIET,
        limit: int = CHECKPOINT_LIMIT,
    ) -> None:
        self.path = path
        self.every = every
        self.quiet = quiet
        self.limit = max(limit, every)
        self.runs = 0
        #: Commits noted in all (read by this thread to tell a quiet moment).
        self.commits = 0
        self._pending = 0
        self._checkpointed_at = 0
        self._now = False
        self._ran = threading.Condition()
        self._wake = threading.Event()
        self._stopping = False
        self._warned = False
        self._conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self._thread.start()

    def note_commit(self) -> None:
        self.commits += 1
        self._pending += 1
        if self._pending >= self.every:
            self._pending = 0
            self._wake.set()

    def checkpoint_now(self) -> None:
        """Ask for a checkpoint at once, without waiting for a quiet moment (tests, and
        before a quiet period)."""
        self._now = True
        self._wake.set()

    def _await_quiet(self) -> None:
        """Return once no commit has been noted for :attr:`quiet` seconds, once
        :attr:`limit` commits have been noted since the last checkpoint, or on close or
        :meth:`checkpoint_now`."""
        while not (self._stopping or self._now):
            seen = self.commits
            if seen - self._checkpointed_at >= self.limit:
                return
            # Woken early by close(), checkpoint_now() or the next due commit: each is
            # looked at again above.
            self._wake.wait(self.quiet)
            self._wake.clear()
            if self.commits == seen:
                return

    def wait_runs(self, count: int, timeout: float) -> bool:
        """Block until *count* checkpoints have run (or *timeout* passed); whether they did."""
        with self._ran:
            return self._ran.wait_for(lambda: self.runs >= count, timeout)

    def close(self, timeout: float | None = 10.0) -> None:
        self._stopping = True
        self._wake.set()
        self._thread.join(timeout)
        with contextlib.suppress(sqlite3.Error):
            self._conn.close()

    def _serve(self) -> None:
        while True:
            self._wake.wait()
            self._wake.clear()
            self._await_quiet()
            self._now = False
            if self._stopping:
                return
            self._checkpointed_at = self.commits
            try:
                self._conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
                with self._ran:
                    self.runs += 1
                    self._ran.notify_all()
            except sqlite3.Error as exc:
                if not self._warned:
                    self._warned = True
                    log.warning(
                        "background checkpoint of %s failed (%s); the write-ahead log keeps "
                        "growing until one succeeds, check free disk space",
                        self.path,
                        exc,
                    )
