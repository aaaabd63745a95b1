"""One FIFO lane per conversation, many conversations at once.

A conversation's turns must run one at a time and in order — the second message of a
burst is answered with the first one's reply already in history — while different
conversations must not wait for each other. Each conversation key that has work gets a
*lane* (a deque and one worker task in the queue's task group); when the lane runs dry the
lane is deleted, so a daemon that has talked to ten thousand chats holds nothing for the
ones that are idle. That is the property the soak test checks. The worker does not exit
with its lane: up to :data:`MAX_IDLE_WORKERS` of them wait, idle, to serve the next new
lane, which saves spawning a task for every turn (a conversation's lane usually runs dry
after each reply). A worker serves lanes only for submitters whose context variables are
the queue's own, so each turn still sees what a fresh task would have copied.

``/stop`` cancels the active turn through the cancel scope its worker runs it in, drops the
queued jobs, and reports each stopped job to the executor exactly once, after the cancelled
turn has unwound, so history markers cannot race the turn's own cleanup.

Leaving ``async with`` shuts the queue down: running turns are cancelled, queued ones never
start, and every job's ``done`` is set so nobody waits forever. Use :meth:`join` first to
drain instead.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections import deque
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

import anyio
import anyio.lowlevel
from anyio.abc import TaskGroup

from fermix_core.channel import ConversationKey
from fermix_core.gateway.types import StopReport, TurnExecutor, TurnJob

__all__ = ["ConversationQueue", "QueueClosedError", "QueueLoad"]

log = logging.getLogger("fermix.gateway.queue")

#: Workers kept waiting for the next new lane once theirs ran dry (each a parked task).
MAX_IDLE_WORKERS = 128


class QueueClosedError(RuntimeError):
    """Work was submitted to a queue that is not running (not entered, or shut down)."""


@dataclass
class _Lane:
    """One conversation's queue: the jobs waiting and the one running."""

    jobs: deque[TurnJob] = field(default_factory=deque)
    active: TurnJob | None = None
    scope: anyio.CancelScope | None = None


@dataclass(frozen=True)
class QueueLoad:
    """Counts of what the queue holds right now (for status output and soak tests)."""

    lanes: int
    active: int
    queued: int
    background: int


class ConversationQueue:
    """Serializes turns per :class:`ConversationKey`; runs different keys concurrently."""

    def __init__(
        self,
        executor: TurnExecutor,
        *,
        task_group_factory: Callable[[], TaskGroup] = anyio.create_task_group,
    ) -> None:
        self._executor = executor
        self._factory = task_group_factory
        self._tg: TaskGroup | None = None
        self._closed = False
        self._lanes: dict[ConversationKey, _Lane] = {}
        self._background: dict[TurnJob, anyio.CancelScope] = {}
        # Created on demand: building a queue must not need a running event loop.
        self._idle: anyio.Event | None = None
        #: Parked workers, each waiting on its future for a (key, lane) to serve.
        self._idle_workers: list[asyncio.Future[tuple[ConversationKey, _Lane]]] = []
        #: The context variables of whoever entered the queue; see the module docstring.
        self._context: contextvars.Context | None = None
        #: Makes the cancel scope each job runs in: ``anyio.CancelScope`` until the queue is
        #: entered, then the running backend's own (``anyio.CancelScope()`` asks which async
        #: library runs every time it is called; the queue's loop never changes).
        self._new_scope: Callable[[], anyio.CancelScope] = anyio.CancelScope

    # ------------------------------------------------------------------ lifecycle

    async def __aenter__(self) -> ConversationQueue:
        if self._tg is not None or self._closed:
            raise QueueClosedError("a ConversationQueue can be entered only once")
        tg = self._factory()
        await tg.__aenter__()
        self._tg = tg
        self._context = contextvars.copy_context()
        self._new_scope = anyio.lowlevel.current_token().backend_class.create_cancel_scope
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        self._closed = True
        tg, self._tg = self._tg, None
        if tg is None:
            return None
        tg.cancel_scope.cancel()
        return await tg.__aexit__(exc_type, exc, tb)

    @property
    def running(self) -> bool:
        return self._tg is not None and not self._closed

    async def join(self) -> None:
        """Wait until every lane has drained and every background job has finished."""
        while self._lanes or self._background:
            if self._idle is None:
                self._idle = anyio.Event()
            await self._idle.wait()

    # ------------------------------------------------------------------ submitting

    async def submit(self, job: TurnJob) -> None:
        """Queue *job* behind its conversation's earlier jobs; returns at once.

        A background job skips the lane: it runs immediately, beside the conversation's
        foreground turns, and only ``/stop`` (or shutdown) ends it early.
        """
        if not self.running:
            raise QueueClosedError(
                "the conversation queue is not running (the daemon is starting or shutting "
                "down); try again in a moment"
            )
        assert self._tg is not None
        if job.background:
            scope = self._new_scope()
            self._background[job] = scope
            self._tg.start_soon(self._execute, job, scope, None)
            return
        key = job.key
        lane = self._lanes.get(key)
        if lane is None:
            lane = self._lanes[key] = _Lane()
            lane.jobs.append(job)
            if not self._hand_over(key, lane):
                self._tg.start_soon(self._worker, key, lane)
        else:
            lane.jobs.append(job)

    # ------------------------------------------------------------------ stopping

    async def stop(self, key: ConversationKey) -> StopReport:
        """Cancel *key*'s active turn and background jobs, drop its queued jobs.

        Returns once every stopped job has been reported to ``executor.on_stopped`` and the
        cancelled runs have unwound, so the caller can answer "stopped" truthfully.
        """
        lane = self._lanes.get(key)
        cleared: list[TurnJob] = []
        active: TurnJob | None = None
        if lane is not None:
            cleared = list(lane.jobs)
            lane.jobs.clear()
            if lane.active is not None and lane.scope is not None:
                active = lane.active
                lane.scope.cancel()
        background = [job for job in self._background if job.key == key]
        for job in background:
            self._background[job].cancel()

        for job in cleared:
            job.stopped = True
        try:
            # The cancelled runs unwind (and are reported by their workers) first, so
            # nothing reported below can race a cancelled turn's own cleanup.
            if active is not None:
                await active.done.wait()
            for job in background:
                await job.done.wait()
            for job in cleared:
                await self._notify_stopped(job)
                job.done.set()
        finally:
            # Even if this stop is itself cancelled, nobody may wait on a dropped job forever.
            for job in cleared:
                job.done.set()
        return StopReport(
            cancelled=active is not None, cleared=len(cleared), background=len(background)
        )

    async def cancel(self, job: TurnJob) -> None:
        """Stop one job the way ``/stop`` stops it, leaving the conversation's others alone.

        Running, it is cancelled (the turn's stop rule decides what history keeps); queued,
        it is dropped and reported stopped. Returns once it has unwound.
        """
        lane = self._lanes.get(job.key)
        if job in self._background:
            self._background[job].cancel()
        elif lane is not None and lane.active is job and lane.scope is not None:
            lane.scope.cancel()
        elif lane is not None and job in lane.jobs:
            lane.jobs.remove(job)
            job.stopped = True
            try:
                await self._notify_stopped(job)
            finally:
                job.done.set()
        await job.done.wait()

    # ------------------------------------------------------------------ reading

    def active(self) -> dict[ConversationKey, TurnJob]:
        """The job each busy conversation is running now."""
        return {key: lane.active for key, lane in self._lanes.items() if lane.active is not None}

    def pending(self, key: ConversationKey) -> int:
        """Jobs waiting behind *key*'s active turn (the active one not counted)."""
        lane = self._lanes.get(key)
        return len(lane.jobs) if lane is not None else 0

    def background(self, key: ConversationKey | None = None) -> list[TurnJob]:
        """Running background jobs, of one conversation or of all."""
        return [job for job in self._background if key is None or job.key == key]

    def load(self) -> QueueLoad:
        return QueueLoad(
            lanes=len(self._lanes),
            active=sum(1 for lane in self._lanes.values() if lane.active is not None),
            queued=sum(len(lane.jobs) for lane in self._lanes.values()),
            background=len(self._background),
        )

    # ------------------------------------------------------------------ workers

    def _hand_over(self, key: ConversationKey, lane: _Lane) -> bool:
        """Give a new *lane* to a parked worker; False when none may take it."""
        idle = self._idle_workers
        if not idle or contextvars.copy_context() != self._context:
            return False
        while idle:
            waiter = idle.pop()
            if not waiter.done():  # a parked worker being cancelled has a cancelled future
                waiter.set_result((key, lane))
                return True
        return False

    async def _worker(self, key: ConversationKey, lane: _Lane) -> None:
        """Serve *lane*, then park for the next new lane (see the module docstring)."""
        while True:
            try:
                while lane.jobs:
                    await self._run(lane.jobs.popleft(), lane)
            finally:
                self._retire(key, lane)
            del key, lane  # a parked worker holds no lane (and so no job)
            if (
                self._closed
                or len(self._idle_workers) >= MAX_IDLE_WORKERS
                or contextvars.copy_context() != self._context
            ):
                return
            waiter: asyncio.Future[tuple[ConversationKey, _Lane]]
            waiter = asyncio.get_running_loop().create_future()
            self._idle_workers.append(waiter)
            try:
                key, lane = await waiter
            except BaseException:
                if waiter.done() and not waiter.cancelled():
                    # Handed a lane just as the queue shut down: its jobs never run.
                    self._retire(*waiter.result())
                elif waiter in self._idle_workers:
                    self._idle_workers.remove(waiter)
                raise

    def _retire(self, key: ConversationKey, lane: _Lane) -> None:
        """*lane* ran dry (or the queue shut down): drop it, ending any job left in it."""
        # Jobs are left only on shutdown: they will never run.
        for job in lane.jobs:
            job.stopped = True
            job.done.set()
        lane.jobs.clear()
        if self._lanes.get(key) is lane:
            del self._lanes[key]
        self._check_idle()

    def _run(self, job: TurnJob, lane: _Lane) -> Coroutine[Any, Any, None]:
        """Make *job* its lane's active one, in a new cancel scope; the run to await (a plain
        function returning :meth:`_execute`'s coroutine: one coroutine per turn, not two)."""
        scope = self._new_scope()
        lane.active, lane.scope = job, scope
        return self._execute(job, scope, lane)

    async def _execute(self, job: TurnJob, scope: anyio.CancelScope, lane: _Lane | None) -> None:
        """Run *job* in *scope*; then report it stopped if the scope was cancelled, and set
        its ``done`` whatever happened. *lane* is the job's lane (None: a background job)."""
        finished = False
        try:
            job.started = True
            with scope:
                try:
                    await self._executor.run_turn(job)
                except Exception as exc:
                    # One broken turn must not take the queue (and every other chat) down.
                    job.error = exc
                    log.exception(
                        "turn on %s chat %s failed", job.message.channel, job.message.chat_id
                    )
            if lane is not None:
                lane.active = lane.scope = None
            if scope.cancel_called:
                job.stopped = True
                await self._notify_stopped(job)
            finished = True
        finally:
            if lane is not None:
                lane.active = lane.scope = None
            else:
                self._background.pop(job, None)
            if not finished:
                job.stopped = True
            job.done.set()
            if lane is None:
                self._check_idle()

    async def _notify_stopped(self, job: TurnJob) -> None:
        try:
            await self._executor.on_stopped(job)
        except Exception:
            log.exception(
                "on_stopped failed for %s chat %s", job.message.channel, job.message.chat_id
            )

    def _check_idle(self) -> None:
        if not self._lanes and not self._background and self._idle is not None:
            self._idle.set()
            self._idle = None

    def __repr__(self) -> str:
        load = self.load()
        state: Any = "running" if self.running else "closed" if self._closed else "new"
        return (
            f"<ConversationQueue {state} lanes={load.lanes} queued={load.queued} "
            f"background={load.background}>"
        )
