"""The async conversation store the turn runner, gateway and CLI use.

Calls run strictly one at a time on the store's single SQLite connection
(:class:`fermix_core.sqlite_worker.SqliteWorker`): on the store's own thread, or — while
that thread has nothing queued — directly on the event loop, with no thread hop and with
``busy_timeout = 0`` (a file locked by another process sends the call to the thread, which
waits there), so the loop never waits for a lock and the connection is never used by two
threads at once. Calls carrying images always go to the thread (their encoding is heavy).
Calls that arrive together (many conversations at once) share one transaction —
group commit, each call in its own savepoint, every caller answered only after the
``COMMIT`` — and the write-ahead log is checkpointed by a second thread, never inside a
caller's commit. A call cancelled while its SQL runs still finishes that SQL and the
transaction either committed or rolled back as a whole; cancellation can delay a caller by
one statement but can never leave half a turn behind.

A turn makes two calls: :meth:`ConversationStore.start_turn` (window, session number and
the persisted user message, one transaction) and :meth:`ConversationStore.commit_turn`.

Content-less messages are refused here, before any SQL: a turn that produced nothing must
be abandoned as ``"empty"``, not committed.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import anyio
import anyio.to_thread

from fermix_core.channel import ConversationKey
from fermix_core.messages import Message, Usage
from fermix_core.sqlite_worker import Checkpointer, SqliteWorker
from fermix_core.store.engine import SyncStore
from fermix_core.store.records import (
    SPEAKERS,
    TURN_END_STATES,
    EmptyMessageError,
    StoreClosedError,
    StoredMessage,
    StoreError,
    TurnEndState,
    TurnHandle,
    TurnStart,
)

__all__ = ["ConversationStore"]

T = TypeVar("T")

#: The store's calls that may share one group-commit transaction: each is one whole unit
#: of work whose own transactions nest.
_BATCHABLE = frozenset(
    {
        SyncStore.conversation_id,
        SyncStore.load_window,
        SyncStore.clear_window,
        SyncStore.replace_with_summary,
        SyncStore.begin_turn,
        SyncStore.start_turn,
        SyncStore.commit_turn,
        SyncStore.abandon_turn,
        SyncStore.turn_status,
        SyncStore.append_marker,
        SyncStore.next_session_number,
    }
)
_READ_ONLY = frozenset({SyncStore.load_window, SyncStore.turn_status})

#: Conversation ids are cached once resolved: rows are never deleted, and the cache spares
#: every turn a thread hop. The cap only guards against a pathological number of chats.
_KEY_CACHE_MAX = 4096
_SPEAKER_SET = frozenset(SPEAKERS)


def _failed(path: Path, exc: sqlite3.Error) -> StoreError:
    return StoreError(
        f"the conversation store at {path} failed ({type(exc).__name__}: {exc}); "
        "check free disk space and that the file is writable, then retry"
    )


def _refuse_empty(message: Message, what: str) -> Message:
    if message.is_empty:
        raise EmptyMessageError(
            f"refusing to store {what}: a {message.role} message with no text, image, tool call "
            "or tool result; abandon the turn as 'empty' instead of committing it"
        )
    return message


class ConversationStore:
    """Conversation history in ``memory.db``: windows, turns, markers and summaries.

    Build one with ``await ConversationStore.open(path)`` and ``await store.close()`` it
    (or use ``async with``). One instance per process and file; other processes may open
    the same file — SQLite's locking and ``BEGIN IMMEDIATE`` keep their writes apart.
    """

    def __init__(self, sync: SyncStore) -> None:
        self._sync: SyncStore | None = sync
        self._ids: dict[ConversationKey, int] = {}
        self.path = sync.path
        self.checkpointer = Checkpointer(sync.path, name="fermix-store-checkpoint")
        self.worker = SqliteWorker(
            sync.conn,
            name="fermix-store",
            batchable=_BATCHABLE,
            read_only=_READ_ONLY,
            on_commit=self.checkpointer.note_commit,
            on_rollback=sync.forget_parsed,
        )

    # ------------------------------------------------------------------ lifecycle

    @classmethod
    async def open(cls, path: Path) -> ConversationStore:
        """Open (creating or migrating as needed) the store at *path*.

        Raises :class:`~fermix_core.store.StoreSchemaError` for a database written by a
        newer Fermix, :class:`~fermix_core.store.StoreCorruptError` for a file that is not
        a readable database.
        """
        sync = await anyio.to_thread.run_sync(SyncStore.open, Path(path))
        return cls(sync)

    async def close(self) -> None:
        """Close the connection; safe to call twice. Later calls raise StoreClosedError."""
        sync, self._sync = self._sync, None
        if sync is not None:
            # Queued behind every call already waiting; calls after it find the store closed.
            await self.worker.call(sync.close)
            self.worker.stop()
            await anyio.to_thread.run_sync(self._join_threads)

    def _join_threads(self) -> None:
        self.worker.join()
        self.checkpointer.close()

    async def __aenter__(self) -> ConversationStore:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _call(self, method: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """Run *method* on the store's connection: on the loop while the store's thread is
        idle (no hop), else on the thread."""
        return await self._run(True, method, args, kwargs)

    async def _call_on_thread(self, method: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """Always on the store's thread: calls carrying images, whose encoding is heavy."""
        return await self._run(False, method, args, kwargs)

    async def _run(
        self, inline: bool, method: Callable[..., T], args: tuple, kwargs: dict[str, Any]
    ) -> T:
        if self._sync is None:
            raise StoreClosedError(
                f"the conversation store for {self.path} is closed; open a new one"
            )
        run = self.worker.call_inline if inline else self.worker.call
        try:
            return await run(method, self._sync, *args, **kwargs)
        except sqlite3.ProgrammingError as exc:
            if self._sync is None:
                # A call queued behind close() found the connection closed.
                raise StoreClosedError(
                    f"the conversation store for {self.path} was closed while this call waited"
                ) from exc
            raise _failed(self.path, exc) from exc
        except sqlite3.Error as exc:
            raise _failed(self.path, exc) from exc

    # ------------------------------------------------------------------ conversations

    async def conversation_id(self, key: ConversationKey) -> int:
        """The id of *key*'s conversation, created on first use."""
        if type(key) is not ConversationKey:
            key = ConversationKey(*key)
        cached = self._ids.get(key)
        if cached is not None:
            return cached
        conversation_id = await self._call(
            SyncStore.conversation_id, key.channel, key.chat_id, key.thread_id
        )
        if len(self._ids) >= _KEY_CACHE_MAX:
            self._ids.clear()
        self._ids[key] = conversation_id
        return conversation_id

    async def load_window(
        self, conversation_id: int, *, speakers: Iterable[str] | None = None
    ) -> list[StoredMessage]:
        """The messages the next turn replays, oldest first, the summary (if any) leading.

        Committed turns appear whole; a turn that is not committed contributes only its
        user message (followed by its stop marker when one was appended). Call this before
        :meth:`begin_turn` to get the history without the new user message. Rows that are
        unreadable or content-less are skipped with a warning, never replayed.

        *speakers* narrows the window to the turns of those speakers (a guest's turn passes
        ``{"guest"}``): every row of another speaker's turn is left out, and so is the
        compaction summary, which was written from the whole window.
        """
        return await self._call(SyncStore.load_window, conversation_id, self._speakers(speakers))

    @staticmethod
    def _speakers(speakers: Iterable[str] | None) -> frozenset[str] | None:
        allowed = None if speakers is None else frozenset(speakers)
        if allowed is not None and not allowed <= _SPEAKER_SET:
            raise ValueError(f"speakers must be among {', '.join(SPEAKERS)}, not {sorted(allowed)}")
        return allowed

    @staticmethod
    def _check_turn_opening(user: Message, speaker: str) -> None:
        if user.role != "user":
            raise ValueError(f"a turn opens with a user message, not a {user.role!r} one")
        if speaker not in SPEAKERS:
            raise ValueError(f"speaker must be one of {', '.join(SPEAKERS)}, not {speaker!r}")
        _refuse_empty(user, "the user message")

    async def clear_window(self, conversation_id: int) -> None:
        """``/new``: start an empty window; every row stays in the database."""
        await self._call(SyncStore.clear_window, conversation_id)

    async def replace_with_summary(
        self,
        conversation_id: int,
        summary: str,
        keep_last: int,
        *,
        covered_through: int | None = None,
    ) -> None:
        """Compaction: the window becomes ``[summary] + `` the last *keep_last* messages.

        The summary is stored as a ``system`` message of kind ``"summary"``. When the cut
        falls inside a turn, the whole turn is kept (back to its user message), so the tail
        never opens with an orphaned tool result and nothing the caller left out of the
        summary — it summarizes what precedes the last *keep_last* — leaves the window.
        *covered_through* is the ``seq`` of the last message the summary was written from;
        messages after it (a turn that committed while the summary was being written) stay
        in the window whole. Nothing is deleted: older rows just leave the window.
        """
        if keep_last < 0:
            raise ValueError(f"keep_last must be 0 or more, not {keep_last}")
        message = _refuse_empty(Message.system(summary), "a compaction summary")
        await self._call(
            SyncStore.replace_with_summary, conversation_id, message, keep_last, covered_through
        )

    async def next_session_number(self) -> int:
        """A number never handed out before in this database (session ids ``main-<n>``)."""
        return await self._call(SyncStore.next_session_number)

    # ------------------------------------------------------------------ turns

    async def begin_turn(
        self,
        conversation_id: int,
        user: Message,
        *,
        speaker: str,
        sender_id: str | None,
        session_id: str,
        run_profile: str = "normal",
        sender_name: str | None = None,
    ) -> TurnHandle:
        """Persist the user message and open a turn (status ``started``).

        *sender_name* is the display name the channel reported, kept to label the message
        when a group chat is replayed.
        """
        self._check_turn_opening(user, speaker)
        call = self._call_on_thread if user.has_images else self._call
        return await call(
            SyncStore.begin_turn,
            conversation_id,
            user,
            speaker=speaker,
            sender_id=sender_id,
            session_id=session_id,
            run_profile=run_profile,
            sender_name=sender_name,
        )

    async def start_turn(
        self,
        conversation_id: int,
        user: Message,
        *,
        speaker: str,
        sender_id: str | None,
        speakers: Iterable[str] | None = None,
        run_profile: str = "normal",
        sender_name: str | None = None,
    ) -> TurnStart:
        """What a turn needs before its model call, in one transaction and one hop.

        The same as :meth:`load_window` (narrowed to *speakers*), then
        :meth:`next_session_number` (the session id is ``main-<n>``), then
        :meth:`begin_turn` — with no other write between them. The returned window does
        not contain the new user message.
        """
        allowed = self._speakers(speakers)
        self._check_turn_opening(user, speaker)
        # _run directly (not _call): one coroutine and one re-packing of arguments less
        # on the path of every turn.
        return await self._run(
            not user.has_images,
            SyncStore.start_turn,
            (conversation_id, user),
            {
                "speakers": allowed,
                "speaker": speaker,
                "sender_id": sender_id,
                "run_profile": run_profile,
                "sender_name": sender_name,
            },
        )

    async def commit_turn(
        self,
        turn_id: int,
        messages: Sequence[Message],
        *,
        usage: Usage,
        model: str | None,
        provider: str | None,
    ) -> list[int]:
        """Store what the turn produced and mark it committed, all in one transaction.

        Returns the new rows' ids. Raises :class:`EmptyMessageError` (nothing written) when
        *messages* is empty or any of them is content-less, and
        :class:`~fermix_core.store.TurnStateError` when the turn is unknown or no longer
        ``started`` (stopped, failed or already committed).
        """
        if not messages:
            raise EmptyMessageError(
                f"turn {turn_id} produced no messages; abandon it as 'empty' instead"
            )
        heavy = False
        for i, message in enumerate(messages):
            if message.is_empty:
                _refuse_empty(message, f"message {i} of turn {turn_id}")
            heavy = heavy or message.has_images
        return await self._run(
            not heavy,
            SyncStore.commit_turn,
            (turn_id, list(messages)),
            {"usage": usage, "model": model, "provider": provider},
        )

    async def abandon_turn(self, turn_id: int, status: TurnEndState) -> bool:
        """Close a ``started`` turn as stopped, failed or empty; its reply is never stored.

        Returns whether the status changed: a turn that already finished (committed, or
        abandoned before) is left as it is, so a late ``/stop`` cannot hide a reply that
        was committed first.
        """
        if status not in TURN_END_STATES:
            raise ValueError(f"status must be one of {', '.join(TURN_END_STATES)}, not {status!r}")
        return await self._call(SyncStore.abandon_turn, turn_id, status)

    async def turn_status(self, turn_id: int) -> str | None:
        """``started``, ``committed``, ``stopped``, ``failed``, ``empty``; None if unknown."""
        return await self._call(SyncStore.turn_status, turn_id)

    async def append_marker(self, conversation_id: int, text: str) -> bool:
        """Append an assistant marker after an orphaned user message; returns whether it did.

        Only when the conversation's last stored message is a user message whose turn did
        not commit — so a second ``/stop`` never double-marks and user/assistant turns keep
        alternating. A turn still ``started`` at that point is closed as ``stopped`` in the
        same transaction, so the cancelled run can no longer commit behind the marker.
        """
        marker = _refuse_empty(Message.assistant(text), "a stop marker")
        return await self._call(SyncStore.append_marker, conversation_id, marker)
