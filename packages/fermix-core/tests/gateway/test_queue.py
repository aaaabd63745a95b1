"""ConversationQueue: FIFO per key, concurrency across keys, /stop, shutdown, no growth."""

from __future__ import annotations

import asyncio
import contextvars

import anyio
import anyio.lowlevel
import pytest
from fermix_core.channel import InboundMessage, OutboundMessage, SentMessage
from fermix_core.gateway.queue import MAX_IDLE_WORKERS, ConversationQueue, QueueClosedError
from fermix_core.gateway.types import ChannelFeatures, StopReport, TurnJob
from fermix_core.tool import Trust

pytestmark = pytest.mark.anyio


class ListPort:
    features = ChannelFeatures()

    def __init__(self) -> None:
        self.sent: list[OutboundMessage] = []

    async def send(self, message: OutboundMessage) -> SentMessage:
        self.sent.append(message)
        return SentMessage(message_id=str(len(self.sent)))


def job(
    text: str, chat: str = "c1", port: ListPort | None = None, *, background: bool = False
) -> TurnJob:
    message = InboundMessage(channel="t", chat_id=chat, sender_id="owner", text=text)
    return TurnJob(
        message=message, trust=Trust.OPERATOR, reply=port or ListPort(), background=background
    )


async def test_one_conversation_runs_strictly_in_order(executor) -> None:
    port = ListPort()
    first = executor.gate("a")
    async with ConversationQueue(executor) as queue:
        jobs = [job(t, port=port) for t in ("a", "b", "c", "d")]
        for j in jobs:
            await queue.submit(j)
        await executor.wait_started("a")
        # The first turn holds the lane: nothing behind it has started.
        assert executor.started_texts() == ["a"]
        assert queue.pending(jobs[0].key) == 3
        assert queue.active() == {jobs[0].key: jobs[0]}
        first.set()
        await jobs[-1].done.wait()
    assert executor.started_texts() == ["a", "b", "c", "d"]
    assert executor.finished_texts() == ["a", "b", "c", "d"]
    assert [m.text for m in port.sent] == ["re: a", "re: b", "re: c", "re: d"]
    assert all(j.started and not j.stopped and j.error is None for j in jobs)


async def test_submissions_racing_from_many_tasks_keep_per_key_order(executor) -> None:
    release = executor.gate("x0")
    jobs = [job(f"x{i}") for i in range(50)]
    async with ConversationQueue(executor) as queue:
        async with anyio.create_task_group() as tg:
            for j in jobs:  # start_soon runs them in order; each submits without waiting
                tg.start_soon(queue.submit, j)
        await executor.wait_started("x0")
        release.set()
        await queue.join()
    assert executor.started_texts() == [f"x{i}" for i in range(50)]


async def test_different_conversations_run_at_the_same_time(executor) -> None:
    # Each turn waits until the *other* conversation's turn has started. Run one at a
    # time, this deadlocks; run concurrently, both finish.
    async def wait_for_b() -> None:
        await executor.wait_started("b")

    async def wait_for_a() -> None:
        await executor.wait_started("a")

    executor.during = {"a": wait_for_b, "b": wait_for_a}
    async with ConversationQueue(executor) as queue:
        ja, jb = job("a", chat="one"), job("b", chat="two")
        await queue.submit(ja)
        await queue.submit(jb)
        await ja.done.wait()
        await jb.done.wait()
    assert sorted(executor.finished_texts()) == ["a", "b"]


async def test_stop_cancels_the_active_turn_and_clears_the_queue(executor) -> None:
    port = ListPort()
    executor.gate("active")  # never released: only /stop ends it
    async with ConversationQueue(executor) as queue:
        active, q1, q2 = job("active", port=port), job("q1", port=port), job("q2", port=port)
        other = job("other", chat="elsewhere")
        executor.gate("other")
        for j in (active, q1, q2, other):
            await queue.submit(j)
        await executor.wait_started("active")
        await executor.wait_started("other")

        report = await queue.stop(active.key)

        assert report == StopReport(cancelled=True, cleared=2, background=0)
        # Returned only after the cancelled run unwound and was reported.
        assert active.done.is_set() and active.stopped
        assert executor.cancelled == [active]
        assert q1.done.is_set() and q2.done.is_set()
        assert q1.stopped and not q1.started and q2.stopped and not q2.started
        # on_stopped once per stopped job; the cancelled turn first, after it unwound, so
        # nothing reported for the queued jobs can race its cleanup.
        assert [j.message.text for j in executor.stopped] == ["active", "q1", "q2"]
        assert executor.stopped[0].started and not executor.stopped[1].started
        # The stopped turn delivered nothing; the queued ones never ran.
        assert port.sent == []
        assert executor.started_texts() == ["active", "other"]
        # Another conversation is untouched.
        assert not other.done.is_set()
        assert queue.active() == {other.key: other}
        assert queue.pending(active.key) == 0

        # The conversation works again after /stop.
        again = job("again", port=port)
        await queue.submit(again)
        await again.done.wait()
        assert [m.text for m in port.sent] == ["re: again"]
        executor.gate("other").set()
        await other.done.wait()


async def test_stop_with_nothing_running_reports_nothing(executor) -> None:
    async with ConversationQueue(executor) as queue:
        report = await queue.stop(job("x").key)
    assert report == StopReport(cancelled=False, cleared=0)
    assert not report.anything
    assert executor.stopped == []


async def test_a_stop_requested_as_the_turn_finishes_still_reports_it_once(executor) -> None:
    # The turn ignores cancellation long enough to finish; the stop is still reported once.
    class Stubborn:
        def __init__(self) -> None:
            self.stopped: list[TurnJob] = []
            self.entered = anyio.Event()

        async def run_turn(self, j: TurnJob) -> None:
            self.entered.set()
            with anyio.CancelScope(shield=True):
                await anyio.lowlevel.checkpoint()
            j.result = "done anyway"

        async def on_stopped(self, j: TurnJob) -> None:
            self.stopped.append(j)

    stubborn = Stubborn()
    async with ConversationQueue(stubborn) as queue:
        j = job("s")
        await queue.submit(j)
        await stubborn.entered.wait()
        report = await queue.stop(j.key)
    assert report.cancelled
    assert stubborn.stopped == [j]
    assert j.done.is_set()


async def test_a_failing_turn_does_not_take_the_lane_or_queue_down(executor) -> None:
    executor.fail_on.add("boom")
    async with ConversationQueue(executor) as queue:
        bad, good = job("boom"), job("fine")
        await queue.submit(bad)
        await queue.submit(good)
        await good.done.wait()
    assert isinstance(bad.error, RuntimeError)
    assert bad.done.is_set() and not bad.stopped
    assert executor.finished_texts() == ["fine"]


async def test_a_failing_on_stopped_is_contained(executor) -> None:
    async def broken(j: TurnJob) -> None:
        raise RuntimeError("store is gone")

    executor.on_stopped = broken  # type: ignore[method-assign]
    executor.gate("a")
    async with ConversationQueue(executor) as queue:
        a = job("a")
        await queue.submit(a)
        await executor.wait_started("a")
        report = await queue.stop(a.key)
        assert report.cancelled and a.done.is_set()


async def test_background_jobs_skip_the_lane_and_stop_with_the_conversation(executor) -> None:
    executor.gate("fg")
    executor.gate("bg")
    async with ConversationQueue(executor) as queue:
        fg, bg = job("fg"), job("bg", background=True)
        await queue.submit(fg)
        await queue.submit(bg)
        # Both run at once although they share a conversation key.
        await executor.wait_started("fg")
        await executor.wait_started("bg")
        assert queue.pending(fg.key) == 0
        assert queue.background(fg.key) == [bg]
        assert queue.load().background == 1

        report = await queue.stop(fg.key)
    assert report == StopReport(cancelled=True, cleared=0, background=1)
    assert bg.stopped and bg.done.is_set()
    assert set(executor.stopped) == {fg, bg}
    assert queue.load().background == 0


async def test_leaving_the_queue_cancels_work_and_releases_every_waiter(executor) -> None:
    executor.gate("running")
    async with ConversationQueue(executor) as queue:
        running, waiting = job("running"), job("waiting")
        await queue.submit(running)
        await queue.submit(waiting)
        await executor.wait_started("running")
    assert running.done.is_set() and running.stopped
    assert waiting.done.is_set() and waiting.stopped and not waiting.started
    # Shutdown is not a /stop: no markers are written for it.
    assert executor.stopped == []
    assert queue.load().lanes == 0
    with pytest.raises(QueueClosedError, match="not running"):
        await queue.submit(job("late"))


def test_a_queue_can_be_built_outside_the_event_loop(executor) -> None:
    queue = ConversationQueue(executor)
    assert not queue.running
    assert "new" in repr(queue)


async def test_join_waits_for_work_and_returns_at_once_when_idle(executor) -> None:
    release = executor.gate("slow")
    async with ConversationQueue(executor) as queue:
        await queue.join()  # nothing to wait for
        slow = job("slow")
        await queue.submit(slow)
        joined = anyio.Event()

        async def joiner() -> None:
            await queue.join()
            joined.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(joiner)
            tg.start_soon(joiner)
            await executor.wait_started("slow")
            assert not joined.is_set()
            release.set()
        assert joined.is_set() and slow.done.is_set()


async def test_submit_needs_a_running_queue(executor) -> None:
    queue = ConversationQueue(executor)
    with pytest.raises(QueueClosedError, match="try again"):
        await queue.submit(job("early"))
    async with queue:
        pass
    with pytest.raises(QueueClosedError):
        async with queue:
            pass


@pytest.mark.slow
async def test_ten_thousand_conversations_leave_nothing_behind(executor) -> None:
    port = ListPort()
    async with ConversationQueue(executor) as queue:
        for i in range(10_000):
            await queue.submit(job(f"m{i}", chat=f"chat-{i}", port=port))
        assert queue.load().lanes > 0
        await queue.join()
        load = queue.load()
        # Idle conversations hold no lane, no worker and no job references.
        assert (load.lanes, load.active, load.queued, load.background) == (0, 0, 0, 0)
        assert queue._lanes == {}
        assert queue._background == {}
        assert queue.active() == {}
        # Idle workers wait for the next new lane, a bounded number of them.
        assert 0 < len(queue._idle_workers) <= MAX_IDLE_WORKERS
        # A second wave over the same keys reuses nothing and leaves nothing either.
        for i in range(10_000):
            await queue.submit(job(f"n{i}", chat=f"chat-{i}", port=port))
        await queue.join()
        assert queue._lanes == {}
    assert len(port.sent) == 20_000
    assert len(executor.finished) == 20_000


async def test_a_jobs_done_flag_waits_yields_and_is_cancellable() -> None:
    from fermix_core.gateway.types import TurnDone

    done = job("x").done
    assert isinstance(done, TurnDone) and not done.is_set()
    # Waiting on an unset flag is cancelled by an anyio cancel scope (what /stop and
    # shutdown use), and leaves the flag unset.
    with anyio.move_on_after(0) as scope:
        await done.wait()
    assert scope.cancelled_caught and not done.is_set()
    woke: list[str] = []

    async def waiter() -> None:
        await done.wait()
        woke.append("waiter")

    async with anyio.create_task_group() as tg:
        tg.start_soon(waiter)
        await anyio.lowlevel.checkpoint()
        assert woke == []
        done.set()
    assert woke == ["waiter"] and done.is_set()
    # Already set: wait still yields to the loop once, as anyio.Event's does.
    order: list[str] = []

    async def other() -> None:
        order.append("other")

    async with anyio.create_task_group() as tg:
        tg.start_soon(other)
        await done.wait()
        order.append("after wait")
    assert order == ["other", "after wait"]


class TaskRecorder:
    """A TurnExecutor recording which task ran each turn and what a context variable held."""

    def __init__(self, var: contextvars.ContextVar[str]) -> None:
        self.var = var
        self.runs: list[tuple[str, object, str]] = []

    async def run_turn(self, job: TurnJob) -> None:
        await anyio.lowlevel.checkpoint()  # as a real turn's first store call
        self.runs.append((job.message.text, asyncio.current_task(), self.var.get()))

    async def on_stopped(self, job: TurnJob) -> None:
        pass


async def test_a_worker_whose_lane_ran_dry_serves_the_next_new_lane() -> None:
    recorder = TaskRecorder(contextvars.ContextVar("unused", default="-"))
    async with ConversationQueue(recorder) as queue:
        for i in range(5):
            done = job(f"m{i}", chat=f"chat-{i}")
            await queue.submit(done)
            await done.done.wait()
            assert queue.load().lanes == 0
    tasks = {task for _text, task, _value in recorder.runs}
    assert [text for text, _task, _value in recorder.runs] == [f"m{i}" for i in range(5)]
    assert len(tasks) == 1, "one worker task served every lane"


async def test_a_submitter_with_its_own_context_variables_gets_a_fresh_worker() -> None:
    var: contextvars.ContextVar[str] = contextvars.ContextVar("fermix_test_var", default="base")
    recorder = TaskRecorder(var)
    async with ConversationQueue(recorder) as queue:
        first = job("first", chat="a")
        await queue.submit(first)
        await first.done.wait()

        async def submit_with_own_value() -> None:
            var.set("own")
            marked = job("marked", chat="b")
            await queue.submit(marked)
            await marked.done.wait()

        async with anyio.create_task_group() as tg:
            tg.start_soon(submit_with_own_value)
        last = job("last", chat="c")
        await queue.submit(last)
        await last.done.wait()
    (_, base_task, base_value), (_, own_task, own_value), (_, last_task, last_value) = recorder.runs
    # The marked turn saw its submitter's value, in a task of its own; that worker did
    # not park (its context is not the queue's), so the next turn sees the default again.
    assert (base_value, own_value, last_value) == ("base", "own", "base")
    assert own_task is not base_task and last_task is base_task


async def test_a_lane_handed_to_a_parked_worker_at_shutdown_ends_stopped() -> None:
    """As a lane task spawned at shutdown: cancelled at its first checkpoint, released."""
    recorder = TaskRecorder(contextvars.ContextVar("unused", default="-"))
    async with ConversationQueue(recorder) as queue:
        first = job("first", chat="a")
        await queue.submit(first)
        await first.done.wait()
        assert len(queue._idle_workers) == 1
        late = job("late", chat="b")
        await queue.submit(late)  # handed to the parked worker, which has not run yet
    assert late.done.is_set() and late.stopped and late.result is None
    assert [text for text, _task, _value in recorder.runs] == ["first"]
    assert queue.load().lanes == 0
