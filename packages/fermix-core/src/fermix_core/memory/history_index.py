"""Keeps the memory backend's history index caught up after replies, coalesced.

A reply appends messages to the conversation store; the memory backend's history index
(:meth:`MemoryBackend.catch_up_history`) covers them later, from its watermark. Catching
up after *every* reply cost each turn two worker-thread hops and one more write
transaction on ``memory.db``, which also took the file's write lock from under the
conversation store's next call. :class:`HistoryIndexer` instead notes that a reply landed
(:meth:`note_reply`, a plain attribute write) and catches up at most once per
:data:`INDEX_DELAY` seconds, so a burst of replies is indexed in one transaction.

How long a committed message waits to be searchable: the catch-up starts :data:`INDEX_DELAY`
after the reply that noted it, then indexes the backlog ahead of it in steps of
:data:`INDEX_STEP` messages, each one transaction of about 1-1.5 ms of SQLite work (~5 µs a
message plus ~0.35 ms a transaction, measured on the 2-core development machine) followed
by a pause as long as the step took, so the indexer covers tens of thousands of messages a
second while turns append a few thousand at most. Under a flood of replies it never waits
for a quiet moment: one catch-up keeps chasing the newest message until none is left (a
test drives replies that never stop). So the delay is ``INDEX_DELAY`` plus the backlog at
that rate, about a second in practice.

Recall stays correct meanwhile: a history search indexes a small backlog itself (the
SQLite backend: up to ``HISTORY_INLINE`` messages). :meth:`flush` catches up at once; the
service calls it when it closes, so a one-shot ``fermix ask`` leaves the index current.
"""

from __future__ import annotations

import logging
from typing import Any

import anyio

__all__ = ["INDEX_DELAY", "INDEX_STEP", "HistoryIndexer"]

log = logging.getLogger("fermix.memory")

#: Seconds between a reply and the catch-up that indexes it (and every reply since).
INDEX_DELAY = 1.0
#: Messages per catch-up transaction: a second of replies under load (~3,000 messages)
#: held memory.db's write lock 15-30 ms in one transaction; ~250 hold it 1-3 ms each.
INDEX_STEP = 256


class HistoryIndexer:
    """Runs ``memory.catch_up_history()`` once per burst of replies (see module doc)."""

    def __init__(self, memory: Any, *, delay: float = INDEX_DELAY) -> None:
        self.memory = memory
        self.delay = delay
        #: Completed catch-ups (tests and benchmarks read it).
        self.runs = 0
        self._pending = False
        self._wake = anyio.Event()
        self._lock = anyio.Lock()

    def note_reply(self) -> None:
        """A reply was committed: index it within :attr:`delay` seconds. Never blocks."""
        if not self._pending:
            self._pending = True
            self._wake.set()

    async def serve(self, *, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
        """Run in the service's task group until cancelled."""
        task_status.started()
        while True:
            await self._wake.wait()
            self._wake = anyio.Event()
            # Let the replies of a burst gather; they are all indexed by one catch-up.
            await anyio.sleep(self.delay)
            await self.flush()

    async def flush(self) -> None:
        """Catch up now if any reply is not indexed yet; failures are logged, not raised."""
        async with self._lock:
            if not self._pending:
                return
            self._pending = False
            try:
                await self.memory.catch_up_history(step=INDEX_STEP)
                self.runs += 1
            except Exception:
                # The next reply tries again; until then a search indexes a small backlog.
                log.exception("indexing recent history for recall failed")
            except BaseException:
                self._pending = True  # cancelled (shutdown): the closing flush finishes it
                raise
