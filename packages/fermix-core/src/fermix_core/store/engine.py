"""The conversation store's SQL, run synchronously on one ``sqlite3`` connection.

Everything here executes on the store's worker thread, one call at a time (the async
facade in :mod:`fermix_core.store.conversations` guarantees that), so the connection is
never shared between two threads at once. Each public method is one transaction: either
all of its rows land or none do. Write transactions start with ``BEGIN IMMEDIATE`` so a
second process writing the same file waits on ``busy_timeout`` up front instead of
failing halfway with "database is locked".

This layer trusts its caller to have refused content-less messages already. It serializes
messages itself — on the worker thread, so a large image is never base64-encoded on the
event loop — and before opening the transaction, so that work never holds the write lock.
"""

from __future__ import annotations

import bisect
import json
import logging
import sqlite3
import time
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path

from fermix_core.messages import Message, Usage
from fermix_core.sqlite_files import create_private, open_connection, use_wal
from fermix_core.sqlite_worker import read_transaction, write_transaction
from fermix_core.store.records import (
    StoreCorruptError,
    StoredMessage,
    StoreError,
    TurnHandle,
    TurnStart,
    TurnStateError,
    stored_message,
)
from fermix_core.store.schema import ensure_schema, probe_version

__all__ = ["BUSY_TIMEOUT_S", "EncodedMessage", "SyncStore", "connect", "encode"]

log = logging.getLogger("fermix.store")

#: How long a write waits for another process's transaction before giving up.
BUSY_TIMEOUT_S = 10.0

#: ``(role, body_json, plain_text)``: a message as its row stores it.
EncodedMessage = tuple[str, str, str]


def encode(message: Message) -> EncodedMessage:
    # ``model_dump_json()`` without its Python wrapper, which passes fifteen keyword
    # arguments (all defaults) on every call; the same serializer, the same JSON.
    return message.role, message.__pydantic_serializer__.to_json(message).decode(), message.text


_SESSION_COUNTER = "session"
#: Session numbers reserved per write to the counter: the counter's page is written once per
#: this many turns instead of every turn. Numbers of a block a process never hands out are
#: skipped for good (the numbers stay unique and increase within a process and across its
#: restarts; they never were dense across processes sharing the file).
SESSION_BLOCK = 100
#: A turn starts only while every message id is below this. Reply rows take the ids after
#: the table's largest (SQLite's rule until an id of 2**63 - 1 exists, when it starts picking
#: ids at random), and a commit works its rows' ids out from that rule; this bound keeps
#: any database this store writes a few quintillion rows away from the exception.
MAX_MESSAGE_ID = 2**62
#: Open turns this connection remembers for a cheaper commit (beyond it, commits read the row).
_OPEN_TURNS_MAX = 4096

# The window: rows anchored at or after the window start, summaries aside, and of turns that
# did not commit only the user message (and its stop marker). A row's anchor_seq is never
# above its seq, so the rows are a range of the unique (conversation_id, seq) index from the
# start on (parameters: conversation id, start, start), read in that index's order. Window
# order is (anchor_seq, seq): the same, unless a turn committed after a later one began; the
# reader puts such rows in place itself (SQLite's sorter would copy every row, bodies
# included, to sort what is almost always sorted already).
_WINDOW_WHERE = """
    FROM messages m LEFT JOIN turns t ON t.id = m.turn_id
    WHERE m.conversation_id = ? AND m.seq >= ? AND m.anchor_seq >= ? AND m.kind != 'summary'
      AND (m.turn_id IS NULL OR m.kind = 'marker' OR t.status = 'committed'
           OR t.user_message_id = m.id)
    ORDER BY m.seq
"""
_COLUMNS = (
    "SELECT m.id, m.turn_id, m.seq, m.kind, m.speaker, m.sender_id, m.body, m.created_at, "
    "m.sender_name, t.speaker, m.anchor_seq"
)
_SELECT_WINDOW = _COLUMNS + _WINDOW_WHERE
_SELECT_WINDOW_POSITIONS = "SELECT m.seq, m.anchor_seq" + _WINDOW_WHERE
_SELECT_ONE = _COLUMNS + " FROM messages m LEFT JOIN turns t ON t.id = m.turn_id WHERE m.id = ?"
# What a cached window is checked against: the window's start, its summary and the newest
# row's seq (``seq`` grows by one with every row of the conversation, and rows never change
# once written, so an unchanged triple means an unchanged window, whoever writes the file).
_SELECT_STATE = (
    "SELECT window_start_seq, summary_message_id, "
    "(SELECT MAX(m.seq) FROM messages m WHERE m.conversation_id = conversations.id) "
    "FROM conversations WHERE id = ?"
)
# A turn's start reads the conversation's state and the newest message id (the user message
# takes the next one, named in its turn's row at once), then touches the conversation. Two
# statements: as one ``UPDATE … RETURNING`` SQLite builds a scratch table for the returned
# row, which cost more than the second statement does (16 k instructions a turn).
_STATE_AND_NEWEST_ID = (
    "SELECT window_start_seq, summary_message_id, "
    "(SELECT MAX(m.seq) FROM messages m WHERE m.conversation_id = conversations.id), "
    "(SELECT MAX(id) FROM messages) FROM conversations WHERE id = ?"
)
_TOUCH = "UPDATE conversations SET updated_at = ? WHERE id = ?"
_INSERT_TURN = (
    "INSERT INTO turns (conversation_id, user_message_id, status, speaker, sender_id, "
    "session_id, run_profile, model, provider, input_tokens, output_tokens, "
    "cached_input_tokens, reasoning_tokens, started_at, finished_at) "
    "VALUES (?, ?, 'started', ?, ?, ?, ?, NULL, NULL, 0, 0, 0, 0, ?, NULL)"
)
_INSERT_USER = (
    "INSERT INTO messages (id, conversation_id, turn_id, seq, anchor_seq, kind, role, speaker, "
    "sender_id, sender_name, body, text, created_at) "
    "VALUES (?, ?, ?, ?, ?, 'message', ?, ?, ?, ?, ?, ?, ?)"
)
_INSERT_REPLY_HEAD = (
    "INSERT INTO messages (conversation_id, turn_id, seq, anchor_seq, kind, role, speaker, "
    "sender_id, body, text, created_at) VALUES "
)
_REPLY_ROW = "(?, ?, ?, ?, 'message', ?, ?, NULL, ?, ?, ?)"
#: A reply's rows go in with one ``INSERT`` of up to this many rows (a tool turn's call,
#: result and answer are three); a longer reply takes more statements of this size.
_REPLY_ROWS_MAX = 16
#: ``_INSERT_REPLIES[n]``: the ``INSERT`` of *n* reply rows. No ``RETURNING``: it costs
#: SQLite a scratch table per statement; the ids follow from the last one (see _insert_rows).
_INSERT_REPLIES = tuple(
    _INSERT_REPLY_HEAD + ", ".join([_REPLY_ROW] * n) for n in range(_REPLY_ROWS_MAX + 1)
)
_FINISH_TURN = (
    "UPDATE turns SET status = 'committed', model = ?, provider = ?, input_tokens = ?, "
    "output_tokens = ?, cached_input_tokens = ?, reasoning_tokens = ?, finished_at = ? "
    "WHERE id = ? AND status = 'started'"
)
_SELECT_TURN = (
    "SELECT t.conversation_id, t.speaker, m.seq FROM turns t "
    "LEFT JOIN messages m ON m.id = t.user_message_id WHERE t.id = ?"
)
_SELECT_TOP = "SELECT COALESCE(MAX(seq), 0) FROM messages WHERE conversation_id = ?"
# The conversation's last row in window order (summaries aside). The newest row's anchor
# bounds it from below: a row after that one in (anchor_seq, seq) order has a larger
# anchor_seq, and so a larger seq. The rows from there are a short range of the unique
# (conversation_id, seq) index (the turns since the newest row's question).
_SELECT_LAST = (
    "SELECT m.role, m.turn_id, m.anchor_seq, t.status FROM messages m "
    "LEFT JOIN turns t ON t.id = m.turn_id "
    "WHERE m.conversation_id = ? AND m.kind != 'summary' AND m.seq >= ("
    "SELECT n.anchor_seq FROM messages n WHERE n.conversation_id = ? AND n.kind != 'summary' "
    "ORDER BY n.seq DESC LIMIT 1) "
    "ORDER BY m.anchor_seq DESC, m.seq DESC LIMIT 1"
)
#: SQLite's message for a ``seq`` already taken in the conversation.
_SEQ_TAKEN = "UNIQUE constraint failed: messages.conversation_id, messages.seq"


def connect(path: Path) -> sqlite3.Connection:
    """Open *path* for the store: private file, WAL, ``synchronous=NORMAL``, foreign keys.

    The schema version is checked over a read-only connection first, so a database
    written by a newer Fermix is never switched to WAL or otherwise modified.
    """
    probe_version(path)
    create_private(path, StoreError)
    conn = open_connection(path, StoreError, BUSY_TIMEOUT_S)
    try:
        conn.execute("PRAGMA foreign_keys = ON")
        use_wal(conn, path, StoreError)
        # Checkpoints run on the store's own checkpointer thread (sqlite_worker), never
        # inside a turn's COMMIT.
        conn.execute("PRAGMA wal_autocheckpoint = 0")
        ensure_schema(conn, path=path)
    except sqlite3.OperationalError as exc:
        conn.close()
        raise StoreError(
            f"cannot prepare {path} ({exc}); if another Fermix process holds it, stop that "
            "one (`fermix stop`) and try again"
        ) from exc
    except sqlite3.DatabaseError as exc:
        conn.close()
        raise StoreCorruptError(
            f"{path} is not a usable SQLite database ({exc}); move it aside to start with "
            "empty history, or restore it from a backup"
        ) from exc
    except BaseException:
        conn.close()
        raise
    return conn


def conversation_key_json(channel: str, chat_id: str, thread_id: str | None) -> str:
    return json.dumps([channel, chat_id, thread_id], ensure_ascii=False, separators=(",", ":"))


class SyncStore:
    """All SQL of the conversation store; not thread-safe (one caller at a time)."""

    def __init__(self, conn: sqlite3.Connection, path: Path) -> None:
        self.conn = conn
        #: The turn path's statements run on this one cursor (``conn.execute`` makes a new
        #: cursor per statement); each is consumed at once, never iterated across another.
        self._cur = conn.cursor()
        #: The write transaction of the turn path's calls (begin, start and commit of a
        #: turn), on that cursor; one at a time, so one object serves them all.
        self._tx = write_transaction(conn, self._cur)
        self.path = path
        self._parsed = _ParsedCache()
        self._windows = _WindowCache()
        #: ``[next, last]`` session numbers reserved by this connection, not handed out yet.
        self._sessions = [1, 0]
        #: Turns this connection began and has not finished: ``turn id -> (conversation id,
        #: speaker, anchor seq)``, facts a turn's row never changes, so a commit need not
        #: read them back. Only turns whose start is known to have committed are kept.
        self._open: dict[int, tuple[int, str, int]] = {}

    @classmethod
    def open(cls, path: Path) -> SyncStore:
        return cls(connect(path), path)

    def close(self) -> None:
        self.conn.close()

    # ------------------------------------------------------------------ helpers

    def forget_parsed(self) -> None:
        """Drop cached parses and windows, reserved session numbers and open turns: a
        rolled-back group commit may have let a read see its rows, and what it reserved
        or began did not land."""
        self._parsed = _ParsedCache()
        self._windows = _WindowCache()
        self._sessions = [1, 0]
        self._open.clear()

    def _state(self, conversation_id: int) -> tuple[int, int | None, int]:
        """(window start, summary id, newest seq or 0) of the conversation, or StoreError."""
        row = self.conn.execute(_SELECT_STATE, (conversation_id,)).fetchone()
        if row is None:
            raise _unknown_conversation(conversation_id)
        return int(row[0]), row[1], int(row[2] or 0)

    def _touch(self, conversation_id: int, now: float) -> tuple[tuple[int, int | None, int], int]:
        """Set the conversation's ``updated_at`` (inside a write transaction) and return its
        state as :meth:`_state` does, with the newest message id of the file (or 0)."""
        cur = self._cur
        row = cur.execute(_STATE_AND_NEWEST_ID, (conversation_id,)).fetchone()
        if row is None:
            raise _unknown_conversation(conversation_id)
        newest_id = int(row[3] or 0)
        if newest_id >= MAX_MESSAGE_ID:
            raise StoreError(
                f"message ids in {self.path} have reached {newest_id}, past what this store "
                f"numbers ({MAX_MESSAGE_ID}); nothing was written. Move memory.db aside to "
                "start with empty history (the old file can still be read)"
            )
        cur.execute(_TOUCH, (now, conversation_id))
        return (int(row[0]), row[1], int(row[2] or 0)), newest_id

    def _window(
        self, conversation_id: int, state: tuple[int, int | None, int] | None = None
    ) -> _Window:
        """The conversation's window: the cached one while its *state* (read here when not
        given) is unchanged, else read and decoded again. Inside a transaction."""
        if state is None:
            state = self._state(conversation_id)
        window = self._windows.get(conversation_id, state)
        if window is not None:
            return window
        start, summary_id, top = state
        conn = self.conn
        summary = None
        if summary_id is not None:
            row = conn.execute(_SELECT_ONE, (summary_id,)).fetchone()
            summary = None if row is None else _decode(conversation_id, row, self._parsed)
        rows: list[StoredMessage] = []
        keys: list[tuple[int, int]] = []
        anchor = ordered = 0
        for row in conn.execute(_SELECT_WINDOW, (conversation_id, start, start)).fetchall():
            stored = _decode(conversation_id, row, self._parsed)
            if stored is not None:
                rows.append(stored)
                keys.append((row[10], row[2]))
                if row[10] < anchor:
                    ordered = -1
                anchor = row[10]
        if ordered:  # a turn committed after a later one began: its rows go back to it
            pairs = sorted(zip(keys, rows, strict=True), key=_first)
            keys = [key for key, _ in pairs]
            rows = [row for _, row in pairs]
        window = _Window(start, summary_id, top, summary, rows, keys)
        self._windows.put(conversation_id, window)
        return window

    def _next_seq(self, conversation_id: int) -> int:
        row = self.conn.execute(
            "SELECT COALESCE(MAX(seq), 0) + 1 FROM messages WHERE conversation_id = ?",
            (conversation_id,),
        ).fetchone()
        return int(row[0])

    def _conversation(self, conversation_id: int) -> tuple[int, int | None]:
        row = self.conn.execute(
            "SELECT window_start_seq, summary_message_id FROM conversations WHERE id = ?",
            (conversation_id,),
        ).fetchone()
        if row is None:
            raise _unknown_conversation(conversation_id)
        return int(row[0]), row[1]

    # ------------------------------------------------------------------ conversations

    def conversation_id(self, channel: str, chat_id: str, thread_id: str | None) -> int:
        key = conversation_key_json(channel, chat_id, thread_id)
        conn = self.conn
        row = conn.execute("SELECT id FROM conversations WHERE key = ?", (key,)).fetchone()
        if row is not None:
            return int(row[0])
        now = time.time()
        conn.execute(
            "INSERT INTO conversations (key, channel, chat_id, thread_id, window_start_seq, "
            "summary_message_id, created_at, updated_at) VALUES (?, ?, ?, ?, 0, NULL, ?, ?) "
            "ON CONFLICT (key) DO NOTHING",
            (key, channel, chat_id, thread_id, now, now),
        )
        row = conn.execute("SELECT id FROM conversations WHERE key = ?", (key,)).fetchone()
        return int(row[0])

    def load_window(
        self, conversation_id: int, speakers: frozenset[str] | None = None
    ) -> list[StoredMessage]:
        with read_transaction(self.conn):
            return self._window(conversation_id).view(speakers)

    def clear_window(self, conversation_id: int) -> None:
        self._windows.drop(conversation_id)
        with write_transaction(self.conn) as conn:
            self._conversation(conversation_id)
            conn.execute(
                "UPDATE conversations SET window_start_seq = ?, summary_message_id = NULL, "
                "updated_at = ? WHERE id = ?",
                (self._next_seq(conversation_id), time.time(), conversation_id),
            )

    def replace_with_summary(
        self,
        conversation_id: int,
        summary: Message,
        keep_last: int,
        covered_through: int | None,
    ) -> int:
        role, body, text = encode(summary)
        self._windows.drop(conversation_id)
        with write_transaction(self.conn) as conn:
            start, _ = self._conversation(conversation_id)
            rows = conn.execute(
                _SELECT_WINDOW_POSITIONS, (conversation_id, start, start)
            ).fetchall()
            rows.sort(key=_window_order)  # read in seq order (see _WINDOW_WHERE)
            seq = self._next_seq(conversation_id)
            # A cut inside a turn moves back to that turn's user message: the tail never
            # opens with a tool result whose call left the window, and nothing the caller
            # did not summarize (it summarizes what precedes the last keep_last) is lost.
            cut = max(len(rows) - keep_last, 0) if keep_last > 0 else len(rows)
            new_start = rows[cut][1] if cut < len(rows) else seq
            if covered_through is not None:
                # Whatever the summary's author never saw stays verbatim, whole turns at a time.
                uncovered = [anchor for row_seq, anchor in rows if row_seq > covered_through]
                if uncovered:
                    new_start = min(new_start, min(uncovered))
            now = time.time()
            cursor = conn.execute(
                "INSERT INTO messages (conversation_id, turn_id, seq, anchor_seq, kind, role, "
                "speaker, sender_id, body, text, created_at) "
                "VALUES (?, NULL, ?, ?, 'summary', ?, 'system', NULL, ?, ?, ?)",
                (conversation_id, seq, seq, role, body, text, now),
            )
            summary_id = int(cursor.lastrowid)
            conn.execute(
                "UPDATE conversations SET window_start_seq = ?, summary_message_id = ?, "
                "updated_at = ? WHERE id = ?",
                (new_start, summary_id, now, conversation_id),
            )
        return summary_id

    # ------------------------------------------------------------------ turns

    def begin_turn(
        self,
        conversation_id: int,
        user: Message,
        *,
        speaker: str,
        sender_id: str | None,
        session_id: str,
        run_profile: str,
        sender_name: str | None = None,
    ) -> TurnHandle:
        encoded = encode(user)
        try:
            with self._tx:
                now = time.time()
                state, newest_id = self._touch(conversation_id, now)
                handle, opened = self._begin(
                    conversation_id,
                    user,
                    encoded,
                    state[2],
                    newest_id,
                    now,
                    speaker=speaker,
                    sender_id=sender_id,
                    session_id=session_id,
                    run_profile=run_profile,
                    sender_name=sender_name,
                )
        except BaseException:
            self._windows.drop(conversation_id)
            raise
        self._opened(handle.turn_id, opened)
        return handle

    def start_turn(
        self,
        conversation_id: int,
        user: Message,
        *,
        speakers: frozenset[str] | None,
        speaker: str,
        sender_id: str | None,
        run_profile: str,
        sender_name: str | None = None,
        session_prefix: str = "main-",
    ) -> TurnStart:
        """``load_window`` + ``next_session_number`` + ``begin_turn`` in one transaction.

        Six statements: ``BEGIN IMMEDIATE``; a ``SELECT`` of the state the cached window is
        checked against (which also checks the conversation) and the newest message id; the
        ``UPDATE`` of its ``updated_at`` (the user message's time, the one write of it per
        turn); the turn's row,
        naming its user message's id in advance (the next one: the write lock is held);
        the user message; ``COMMIT``. The session counter is written once per
        :data:`SESSION_BLOCK` turns.
        """
        encoded = encode(user)
        sessions = self._sessions
        reserved = sessions[0] > sessions[1]
        try:
            with self._tx:
                now = time.time()
                state, newest_id = self._touch(conversation_id, now)
                current = self._window(conversation_id, state)
                window = current.view(speakers)
                session_id = f"{session_prefix}{self._session_number()}"
                handle, opened = self._begin(
                    conversation_id,
                    user,
                    encoded,
                    current.top,
                    newest_id,
                    now,
                    speaker=speaker,
                    sender_id=sender_id,
                    session_id=session_id,
                    run_profile=run_profile,
                    sender_name=sender_name,
                )
        except BaseException:
            self._windows.drop(conversation_id)
            if reserved:
                self._sessions = [1, 0]  # the block it reserved may not have landed
            raise
        self._opened(handle.turn_id, opened)
        return TurnStart(window, session_id, handle)

    def _begin(
        self,
        conversation_id: int,
        user: Message,
        encoded: EncodedMessage,
        top: int,
        newest_id: int,
        now: float,
        *,
        speaker: str,
        sender_id: str | None,
        session_id: str,
        run_profile: str,
        sender_name: str | None,
    ) -> tuple[TurnHandle, tuple[int, str, int]]:
        """Insert the turn and its user message, inside the caller's write transaction,
        which read *top* (the conversation's newest seq) and *newest_id* (the file's newest
        message id) and already checked the conversation and set its ``updated_at``."""
        role, body, text = encoded
        cur = self._cur
        seq = top + 1
        message_id = newest_id + 1
        turn_id = cur.execute(
            _INSERT_TURN,
            (conversation_id, message_id, speaker, sender_id, session_id, run_profile, now),
        ).lastrowid
        cur.execute(
            _INSERT_USER,
            (
                message_id,
                conversation_id,
                turn_id,
                seq,
                seq,
                role,
                speaker,
                sender_id,
                sender_name,
                body,
                text,
                now,
            ),
        )
        stored = stored_message(
            message_id,
            conversation_id,
            turn_id,
            seq,
            "message",
            speaker,
            user,
            now,
            sender_id,
            sender_name,
            speaker,
        )
        self._windows.extend(conversation_id, top, [(seq, stored)])
        return TurnHandle(turn_id, conversation_id, message_id), (conversation_id, speaker, seq)

    def _opened(self, turn_id: int, facts: tuple[int, str, int]) -> None:
        """Remember a turn whose start just landed (committed, or released into a group
        commit's transaction, which :meth:`forget_parsed` answers for if it is lost)."""
        if len(self._open) >= _OPEN_TURNS_MAX:
            self._open.clear()  # turns begun and never finished here: commits read the row
        self._open[turn_id] = facts

    def commit_turn(
        self,
        turn_id: int,
        messages: Sequence[Message],
        *,
        usage: Usage,
        model: str | None,
        provider: str | None,
    ) -> list[int]:
        """The reply's rows and the status flip, in one transaction.

        For a turn this connection began, four statements: ``BEGIN IMMEDIATE``, the flip
        (``… WHERE status = 'started'``: a stopped or finished turn changes nothing, and the
        whole transaction is given up), one multi-row ``INSERT`` of the messages (see
        :meth:`_insert_reply`), ``COMMIT``. The first row takes the seq after the cached
        window's newest; the unique ``(conversation_id, seq)`` constraint proves that
        right, and if another writer took it, the newest seq is read and the rows go after
        it. Otherwise the turn and the newest seq are read.
        """
        encoded = [encode(m) for m in messages]
        facts = self._open.get(turn_id)
        touched: int | None = None if facts is None else facts[0]
        try:
            with self._tx:
                now = time.time()
                flipped = self._cur.execute(
                    _FINISH_TURN,
                    (
                        model,
                        provider,
                        usage.input_tokens,
                        usage.output_tokens,
                        usage.cached_input_tokens,
                        usage.reasoning_tokens,
                        now,
                        turn_id,
                    ),
                ).rowcount
                if not flipped:
                    raise self._not_open(turn_id)
                if facts is None:
                    facts = self._read_turn(turn_id)
                    touched = facts[0]
                conversation_id, speaker, anchor = facts
                window = self._windows.peek(conversation_id)
                top = window.top if window is not None else None
                ids = self._insert_reply(
                    conversation_id, turn_id, speaker, anchor, top, encoded, now
                )
                top = ids[0][1] - 1
                self._after_insert([message_id for message_id, _ in ids])
                added = [
                    (
                        anchor,
                        stored_message(
                            message_id,
                            conversation_id,
                            turn_id,
                            seq,
                            "message",
                            speaker,
                            message,
                            now,
                            None,
                            None,
                            speaker,
                        ),
                    )
                    for (message_id, seq), message in zip(ids, messages, strict=True)
                ]
                self._windows.extend(conversation_id, top, added)
        except BaseException:
            if touched is not None:
                self._windows.drop(touched)
            raise
        self._open.pop(turn_id, None)
        return [message_id for message_id, _ in ids]

    def _insert_reply(
        self,
        conversation_id: int,
        turn_id: int,
        speaker: str,
        anchor: int,
        top: int | None,
        encoded: list[EncodedMessage],
        now: float,
    ) -> list[tuple[int, int]]:
        """Insert a reply's rows after the conversation's newest seq (*top* when the cached
        window knows it, proved by the unique constraint); their ``(id, seq)``.

        One multi-row ``INSERT`` (per :data:`_REPLY_ROWS_MAX` rows): a tool turn's call,
        result and answer are one statement, not three. A seq another writer took fails
        the statement as a whole — nothing of it is written and the transaction goes on —
        and the rows then go after the newest seq. Only the first statement can meet that
        (the write lock is held from there on).
        """
        cur = self._cur
        if top is None:
            top = int(cur.execute(_SELECT_TOP, (conversation_id,)).fetchone()[0])
        try:
            return self._insert_rows(conversation_id, turn_id, speaker, anchor, top, encoded, now)
        except sqlite3.IntegrityError as exc:
            if str(exc) != _SEQ_TAKEN:
                raise
            # Another writer appended since the window was cached.
            self._windows.drop(conversation_id)
            top = int(cur.execute(_SELECT_TOP, (conversation_id,)).fetchone()[0])
            return self._insert_rows(conversation_id, turn_id, speaker, anchor, top, encoded, now)

    def _insert_rows(
        self,
        conversation_id: int,
        turn_id: int,
        speaker: str,
        anchor: int,
        top: int,
        encoded: list[EncodedMessage],
        now: float,
    ) -> list[tuple[int, int]]:
        """The rows' ``INSERT``s at seqs ``top + 1 …``; their ``(id, seq)``.

        SQLite gives each new row the table's largest id + 1, in the order of the
        ``VALUES`` (it picks ids at random only once an id of 2**63 - 1 exists, which
        :data:`MAX_MESSAGE_ID` keeps this store far from), so a statement's rows have the
        ids that end at its ``lastrowid``: no ``RETURNING`` (a scratch table per statement).
        """
        cur = self._cur
        if len(encoded) == 1:
            role, body, text = encoded[0]
            row = (conversation_id, turn_id, top + 1, anchor, role, speaker, body, text, now)
            return [(cur.execute(_INSERT_REPLIES[1], row).lastrowid, top + 1)]
        ids: list[tuple[int, int]] = []
        for at in range(0, len(encoded), _REPLY_ROWS_MAX):
            chunk = encoded[at : at + _REPLY_ROWS_MAX]
            params: list[object] = []
            for i, (role, body, text) in enumerate(chunk, start=top + at + 1):
                params += (conversation_id, turn_id, i, anchor, role, speaker, body, text, now)
            first = cur.execute(_INSERT_REPLIES[len(chunk)], params).lastrowid - len(chunk) + 1
            ids += [(first + i, top + at + 1 + i) for i in range(len(chunk))]
        return ids

    def _read_turn(self, turn_id: int) -> tuple[int, str, int]:
        """``(conversation id, speaker, anchor seq)`` of a turn begun elsewhere."""
        row = self.conn.execute(_SELECT_TURN, (turn_id,)).fetchone()
        if row[2] is None:
            raise StoreCorruptError(
                f"turn {turn_id} has no user message row, so its reply has no place in the "
                "window; nothing was committed (restore memory.db from a backup if rows are "
                "missing)"
            )
        return int(row[0]), str(row[1]), int(row[2])

    def _not_open(self, turn_id: int) -> TurnStateError:
        """Why a commit's status flip changed nothing: no such turn, or it is finished."""
        self._open.pop(turn_id, None)
        row = self.conn.execute("SELECT status FROM turns WHERE id = ?", (turn_id,)).fetchone()
        if row is None:
            return TurnStateError(f"no turn {turn_id}; commit the id begin_turn returned")
        return TurnStateError(
            f"turn {turn_id} is already {row[0]}, so nothing was committed; a "
            "stopped or finished turn cannot take a reply"
        )

    def _after_insert(self, ids: list[int]) -> None:
        """Seam between a commit's inserts and its status flip (fault-injection tests)."""

    def abandon_turn(self, turn_id: int, status: str) -> bool:
        conn = self.conn
        self._open.pop(turn_id, None)
        changed = conn.execute(
            "UPDATE turns SET status = ?, finished_at = ? WHERE id = ? AND status = 'started'",
            (status, time.time(), turn_id),
        ).rowcount
        if changed:
            return True
        if conn.execute("SELECT 1 FROM turns WHERE id = ?", (turn_id,)).fetchone() is None:
            raise TurnStateError(f"no turn {turn_id}; abandon the id begin_turn returned")
        return False

    def turn_status(self, turn_id: int) -> str | None:
        row = self.conn.execute("SELECT status FROM turns WHERE id = ?", (turn_id,)).fetchone()
        return None if row is None else str(row[0])

    def append_marker(self, conversation_id: int, marker: Message) -> bool:
        role, body, text = encode(marker)
        self._windows.drop(conversation_id)
        with write_transaction(self.conn) as conn:
            self._conversation(conversation_id)
            last = conn.execute(_SELECT_LAST, (conversation_id, conversation_id)).fetchone()
            if last is None:
                return False
            last_role, turn_id, anchor, status = last
            if last_role != "user" or status == "committed":
                return False
            now = time.time()
            conn.execute(
                "INSERT INTO messages (conversation_id, turn_id, seq, anchor_seq, kind, role, "
                "speaker, sender_id, body, text, created_at) "
                "VALUES (?, ?, ?, ?, 'marker', ?, 'system', NULL, ?, ?, ?)",
                (
                    conversation_id,
                    turn_id,
                    self._next_seq(conversation_id),
                    anchor,
                    role,
                    body,
                    text,
                    now,
                ),
            )
            if turn_id is not None:
                # A marked turn is over: a late commit from the cancelled run must not land.
                conn.execute(
                    "UPDATE turns SET status = 'stopped', finished_at = ? "
                    "WHERE id = ? AND status = 'started'",
                    (now, turn_id),
                )
        return True

    def next_session_number(self) -> int:
        reserved = self._sessions[0] > self._sessions[1]
        try:
            return self._session_number()
        except BaseException:
            if reserved:
                self._sessions = [1, 0]
            raise

    def _session_number(self) -> int:
        """A number never handed out before in this database, from this connection's block
        (reserving the next :data:`SESSION_BLOCK` when it is used up).

        The reservation is a write in the caller's transaction: whoever calls this must
        drop the block (``self._sessions = [1, 0]``) if that transaction may not land.
        """
        sessions = self._sessions
        if sessions[0] > sessions[1]:
            rows = self._cur.execute(
                "INSERT INTO counters (name, value) VALUES (?, ?) "
                "ON CONFLICT (name) DO UPDATE SET value = value + excluded.value "
                "RETURNING value",
                (_SESSION_COUNTER, SESSION_BLOCK),
            ).fetchall()
            last = int(rows[0][0])
            sessions[0], sessions[1] = last - SESSION_BLOCK + 1, last
        number = sessions[0]
        sessions[0] += 1
        return number


_warned_rows: set[tuple[str, int]] = set()


def _first(pair: tuple) -> object:
    return pair[0]


def _window_order(position: tuple[int, int]) -> tuple[int, int]:
    """A ``(seq, anchor_seq)`` row's place in window order."""
    return position[1], position[0]


def _unknown_conversation(conversation_id: int) -> StoreError:
    return StoreError(
        f"unknown conversation id {conversation_id}; get ids from conversation_id(key)"
    )


class _ParsedCache:
    """Parsed messages by row id, so each turn does not re-parse the whole window.

    Rows are immutable once written and :class:`Message` is frozen, so a cached parse can
    never go stale. It is bounded twice, evicting the least recently used first: by the
    total size of the cached bodies (images make single rows large) and by entry count,
    because a parsed message costs far more heap than its JSON (a 100-character row is ~1 KiB
    of objects). The bounds are sized for the live windows of many active conversations; a
    cache of every conversation ever loaded grew a 100,000-turn soak by 160 %.
    """

    MAX_CHARS = 2 * 1024 * 1024
    MAX_ENTRIES = 8192

    def __init__(self) -> None:
        self._items: OrderedDict[int, tuple[Message, int]] = OrderedDict()
        self._chars = 0

    def get(self, message_id: int) -> Message | None:
        item = self._items.get(message_id)
        if item is None:
            return None
        self._items.move_to_end(message_id)
        return item[0]

    def put(self, message_id: int, message: Message, size: int) -> None:
        if size > self.MAX_CHARS // 8:
            return
        self._items[message_id] = (message, size)
        self._chars += size
        while self._chars > self.MAX_CHARS or len(self._items) > self.MAX_ENTRIES:
            _, (_, dropped) = self._items.popitem(last=False)
            self._chars -= dropped


class _Window:
    """One conversation's window as this connection last read or wrote it.

    ``rows`` in window order (``keys``: each row's ``(anchor_seq, seq)``), the summary
    apart (only an unfiltered view gets it), and the state it was current for: window start,
    summary id and the conversation's newest seq (``top``). ``used`` is the cache's access
    count when the window was last used.
    """

    __slots__ = ("keys", "rows", "start", "summary", "summary_id", "top", "used")

    def __init__(
        self,
        start: int,
        summary_id: int | None,
        top: int,
        summary: StoredMessage | None,
        rows: list[StoredMessage],
        keys: list[tuple[int, int]],
    ) -> None:
        self.start = start
        self.summary_id = summary_id
        self.top = top
        self.summary = summary
        self.rows = rows
        self.keys = keys
        self.used = 0

    def add(self, anchor: int, stored: StoredMessage) -> None:
        """A row just written (its seq is the conversation's newest), in window order."""
        key = (anchor, stored.seq)
        if not self.keys or key > self.keys[-1]:
            self.keys.append(key)
            self.rows.append(stored)
        else:  # a turn that began before a later one committed after it (/background)
            at = bisect.bisect(self.keys, key)
            self.keys.insert(at, key)
            self.rows.insert(at, stored)
        self.top = stored.seq

    def view(self, speakers: frozenset[str] | None) -> list[StoredMessage]:
        if speakers is None:
            # A summary is written from the whole window, so only an unfiltered view gets it.
            return [self.summary, *self.rows] if self.summary is not None else list(self.rows)
        # Filtered by the speaker of each row's turn (its own speaker outside a turn), so a
        # turn leaves whole: question, tool calls, results, answer and stop marker.
        return [row for row in self.rows if (row.turn_speaker or row.speaker) in speakers]


class _WindowCache:
    """Decoded windows of recently used conversations, so a turn reads no history rows.

    A window is used only while its conversation's state (window start, summary id, newest
    seq) is what it was cached for, checked in the same transaction; rows this connection
    writes join it directly. Any other change (another process, compaction, ``/new``, a
    stop marker, a failed write) sends the next turn back to the rows.

    Bounded by rows held in total. To make room, windows are evicted least recently used
    first, but only *idle* ones: not used in the last :attr:`LIVE_USES` uses of the cache.
    When every other window is live, the window that does not fit is the one left out (read
    from the rows each time). Plain LRU would evict, under many conversations taking turns
    whose windows together exceed the bound, exactly the window needed next, so that every
    turn missed; this way the windows that fit keep hitting.
    """

    MAX_ROWS = 8192
    #: A window used within this many uses of the cache (window reads) is live.
    LIVE_USES = 256

    def __init__(self) -> None:
        self._items: OrderedDict[int, _Window] = OrderedDict()
        self._rows = 0
        self._uses = 0

    def get(self, conversation_id: int, state: tuple[int, int | None, int]) -> _Window | None:
        window = self._items.get(conversation_id)
        if window is None:
            return None
        if (window.start, window.summary_id, window.top) != state:
            self.drop(conversation_id)
            return None
        self._items.move_to_end(conversation_id)
        self._uses += 1
        window.used = self._uses
        return window

    def peek(self, conversation_id: int) -> _Window | None:
        return self._items.get(conversation_id)

    def extend(
        self, conversation_id: int, before: int, added: list[tuple[int, StoredMessage]]
    ) -> None:
        """Rows just written (``(anchor_seq, row)``) join the conversation's window, if it
        is cached and was current when its newest seq was *before*; else it is dropped."""
        window = self._items.get(conversation_id)
        if window is None:
            return
        if window.top != before:
            self.drop(conversation_id)
            return
        for anchor, stored in added:
            window.add(anchor, stored)
        self._rows += len(added)
        if len(window.rows) > self.MAX_ROWS // 4 or not self._room(0, conversation_id):
            self.drop(conversation_id)

    def put(self, conversation_id: int, window: _Window) -> None:
        self.drop(conversation_id)
        if len(window.rows) > self.MAX_ROWS // 4:
            return  # a very long window is read each time rather than crowding out the rest
        self._uses += 1
        if not self._room(len(window.rows) + 1, conversation_id):
            return  # every cached window is live: this one is read each time
        window.used = self._uses
        self._items[conversation_id] = window
        self._rows += len(window.rows) + 1

    def _room(self, rows: int, keep: int) -> bool:
        """Evict idle windows (least recently used first, never *keep*) until *rows* more
        fit under the bound; whether they do."""
        over = self._rows + rows - self.MAX_ROWS
        if over <= 0:
            return True
        horizon = self._uses - self.LIVE_USES
        idle: list[int] = []
        for conversation_id, window in self._items.items():
            if conversation_id == keep:
                continue
            if window.used > horizon:
                break  # in order of use: every window after this one is live too
            idle.append(conversation_id)
            over -= len(window.rows) + 1
            if over <= 0:
                break
        for conversation_id in idle:
            self.drop(conversation_id)
        return over <= 0

    def drop(self, conversation_id: int) -> None:
        window = self._items.pop(conversation_id, None)
        if window is not None:
            self._rows -= len(window.rows) + 1


def _decode(conversation_id: int, row: tuple, cache: _ParsedCache) -> StoredMessage | None:
    """Parse one row; a row that is unreadable or content-less is skipped, never replayed."""
    message_id, turn_id, seq, kind, speaker, sender_id, body, created_at, name, owner, _ = row
    message = cache.get(message_id)
    if message is None:
        message = _parse(conversation_id, message_id, body)
        if message is None:
            return None
        cache.put(message_id, message, len(body))
    return stored_message(
        message_id,
        conversation_id,
        turn_id,
        seq,
        kind,
        speaker,
        message,
        created_at,
        sender_id,
        name,
        owner,
    )


def _parse(conversation_id: int, message_id: int, body: str) -> Message | None:
    try:
        message = Message.model_validate_json(body)
    except ValueError as exc:
        _warn_once(
            "unreadable",
            message_id,
            "skipping history row %s of conversation %s: its body is not a valid message (%s)",
            message_id,
            conversation_id,
            type(exc).__name__,
        )
        return None
    if message.is_empty:
        _warn_once(
            "empty",
            message_id,
            "skipping content-less history row %s of conversation %s",
            message_id,
            conversation_id,
        )
        return None
    return message


def _warn_once(reason: str, message_id: int, fmt: str, *args: object) -> None:
    # Every turn reloads the window; one warning per bad row keeps the log readable.
    if (reason, message_id) in _warned_rows:
        return
    if len(_warned_rows) < 10_000:
        _warned_rows.add((reason, message_id))
    log.warning(fmt, *args)
