"""Time, injected: the scheduler and the runner read and wait on a :class:`Clock`.

:class:`SystemClock` is the daemon's. :class:`FakeClock` is for tests: time moves only when
the test calls :meth:`FakeClock.advance`, and :meth:`FakeClock.wait_for_sleepers` lets a
test wait until the code under test is parked, so no test sleeps or times anything.
"""

from __future__ import annotations

import time
from typing import Protocol

import anyio
import anyio.lowlevel

__all__ = ["MAX_SYSTEM_SLEEP_S", "Clock", "FakeClock", "SystemClock"]

#: The longest single system sleep. Wall-clock time can jump (host suspend, NTP step)
#: while a monotonic sleep does not notice, so a long wait re-reads the clock this often.
MAX_SYSTEM_SLEEP_S = 300.0


class Clock(Protocol):
    def now(self) -> float:
        """Unix time in seconds."""

    async def sleep(self, seconds: float) -> None:
        """Wait *seconds* of this clock's time (returns at once for zero or less)."""


class SystemClock:
    def now(self) -> float:
        return time.time()

    async def sleep(self, seconds: float) -> None:
        await anyio.sleep(max(0.0, min(seconds, MAX_SYSTEM_SLEEP_S)))


class FakeClock:
    """A clock that only moves when told to."""

    def __init__(self, start: float = 1_800_000_000.0) -> None:
        self._now = float(start)
        self._sleepers: list[tuple[float, anyio.Event]] = []
        self._changed = anyio.Event()

    def now(self) -> float:
        return self._now

    @property
    def deadlines(self) -> list[float]:
        """When each parked sleeper will wake, earliest first."""
        return sorted(deadline for deadline, _ in self._sleepers)

    async def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            await anyio.lowlevel.checkpoint()
            return
        entry = (self._now + seconds, anyio.Event())
        self._sleepers.append(entry)
        self._notify()
        try:
            await entry[1].wait()
        finally:
            if entry in self._sleepers:
                self._sleepers.remove(entry)
                self._notify()

    def advance(self, seconds: float) -> None:
        """Move time forward and wake every sleeper whose deadline has come."""
        self._now += seconds
        for entry in list(self._sleepers):
            if entry[0] <= self._now:
                self._sleepers.remove(entry)
                entry[1].set()
        self._notify()

    def set(self, stamp: float) -> None:
        self.advance(stamp - self._now)

    def _notify(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()

    async def wait_for_sleepers(self, count: int = 1, *, deadline: float | None = None) -> None:
        """Return once *count* sleepers are parked (with *deadline*, one parked until then)."""
        while True:
            parked = self.deadlines
            if deadline is None and len(parked) >= count:
                return
            if deadline is not None and deadline in parked:
                return
            await self._changed.wait()
