"""Whether a memory review is due, answered without the reviewer.

Every service runs the review check after each reply, and a review is due about once a
day: the reviewer itself (its prompt, its operation validator, the owner profiles and the
directive checks behind it) is made only when the check says a review should run now.
:class:`ReviewOnDemand` is the post-reply hook the service installs; it reads the review
state (``memory/<agent>/.review.json``) as :class:`fermix_core.memory.review.MemoryReviewer`
does and hands over to that reviewer, made once, when the gate is open.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from fermix_core.fsutil import atomic_write

log = logging.getLogger("fermix.memory.review")

Clock = Callable[[], float]


def review_state_path(home: Any, agent_id: str = "main") -> Path:
    """Where the review state of *agent_id* lives under FERMIX_HOME."""
    return Path(getattr(home, "path", home)) / "memory" / agent_id / ".review.json"


@dataclass
class ReviewState:
    """What the reviewer remembers between runs (``memory/<agent>/.review.json``)."""

    last_run: float | None = None
    last_success: float | None = None
    #: Id of the newest owner message already reviewed.
    watermark: int = 0
    failures: int = 0
    backoff_until: float | None = None
    last_error: str | None = None

    @classmethod
    def load(cls, path: Path) -> ReviewState:
        try:
            data = json.loads(path.read_text("utf-8"))
            fields = {k: data[k] for k in cls.__dataclass_fields__ if k in data}
            state = cls(**fields)
            state.watermark = int(state.watermark)
            state.failures = int(state.failures)
            return state
        except FileNotFoundError:
            return cls()
        except (OSError, ValueError, TypeError) as exc:
            # A damaged state file costs at most one early review, never a crash.
            log.warning("ignoring unreadable review state %s (%s)", path, type(exc).__name__)
            return cls()

    def save(self, path: Path) -> None:
        atomic_write(path, json.dumps(asdict(self), indent=2) + "\n")


def next_due(state: ReviewState, interval: float, now: float) -> float | None:
    """When the gate next opens (epoch seconds) for reviews *interval* seconds apart;
    ``None`` means now."""
    times = []
    if state.last_success is not None:
        times.append(state.last_success + interval)
    if state.backoff_until is not None:
        times.append(state.backoff_until)
    due = max(times) if times else None
    return due if due is not None and due > now else None


class ReviewGate:
    """When the next review may run, read from the review state only while it may be open.

    The state can only move the gate later between two reads (a review another process ran,
    a failure's backoff), so a gate found closed until some time is not read again before
    then. Both the reviewer and the service's post-reply hook ask one of these."""

    def __init__(
        self, read_state: Callable[[], ReviewState], interval: float, clock: Clock = time.time
    ) -> None:
        self.read_state = read_state
        self.interval = interval
        self.clock = clock
        #: The gate was last found closed until then (epoch seconds).
        self.closed_until: float | None = None

    def may_be_due(self) -> bool:
        """``False`` only while the gate is known closed; reads nothing."""
        closed = self.closed_until
        return closed is None or self.clock() >= closed

    def next_opening(self) -> float | None:
        """When the gate opens (epoch seconds), reading the state unless it is known
        closed; ``None``: a review is due now."""
        closed = self.closed_until
        if closed is not None and self.clock() < closed:
            return closed
        self.closed_until = next_due(self.read_state(), self.interval, self.clock())
        return self.closed_until

    def forget(self) -> None:
        """A review is writing a new state: read it next time."""
        self.closed_until = None


class ReviewOnDemand:
    """The service's post-reply review hook: checks the gate, makes the reviewer (with
    *make*) the first time the gate is open, and from then on is that reviewer."""

    def __init__(
        self, make: Callable[[], Any], state_path: Path, interval: float, clock: Clock = time.time
    ) -> None:
        self._make = make
        self.state_path = state_path
        self.gate = ReviewGate(lambda: ReviewState.load(state_path), interval, clock)
        self.reviewer: Any = None

    def may_be_due(self) -> bool:
        """Whether a review may be due now, without reading anything (the turn runner asks
        at each reply, so no post-reply task starts for nothing)."""
        if self.reviewer is not None:
            return bool(self.reviewer.may_be_due())
        return self.gate.may_be_due()

    async def review_after_reply(self, conversation_id: int | None = None) -> Any:
        """Review when due (through the reviewer); never raises. ``None`` when the gate was
        closed and no reviewer was needed."""
        if self.reviewer is None:
            try:
                if self.gate.next_opening() is not None:
                    return None
                self.reviewer = self._make()
            except Exception:  # the delivered reply must never see this
                log.exception("memory review hook failed")
                return None
        return await self.reviewer.review_after_reply(conversation_id)
