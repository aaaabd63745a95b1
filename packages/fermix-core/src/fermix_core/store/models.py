"""The conversation store's tables, declared once as SQLModel models.

These classes are the schema's source of truth: a fresh ``memory.db`` is created from
them (see :mod:`fermix_core.store.schema`) and the tests compare the live database with
them. The per-turn code path deliberately does not go through them — it speaks plain SQL
over the standard library's ``sqlite3`` — because importing SQLAlchemy costs about half a
second on a small machine and the ORM's per-statement overhead would eat most of the
store's per-turn budget. Importing this module is therefore reserved for creating or
migrating a database.

The models live in their own SQLAlchemy registry rather than ``SQLModel.metadata`` so
that other components keeping tables in the same ``memory.db`` (long-term memory, jobs)
can never collide with these names at import time, and so that creating this store's
tables creates exactly these and nothing else.
"""

from __future__ import annotations

from sqlalchemy import CheckConstraint, UniqueConstraint
from sqlalchemy.orm import registry
from sqlmodel import Field, SQLModel

from fermix_core.store.schema import KINDS, ROLES, SPEAKERS, STATUSES, one_of_sql

__all__ = [
    "ConversationRow",
    "CounterRow",
    "MessageRow",
    "SchemaVersionRow",
    "StoreModel",
    "TurnRow",
    "store_registry",
]

store_registry = registry()


def _one_of(column: str, values: tuple[str, ...], name: str) -> CheckConstraint:
    # ``=`` comparisons joined by OR, not ``IN (...)``: SQLite evaluates an IN list of three
    # or more values by building a temporary index for every statement that checks it
    # (~2 µs each; a turn's writes checked nine of them).
    return CheckConstraint(one_of_sql(column, values), name=name)


class StoreModel(SQLModel, registry=store_registry):
    """Base of the conversation store's tables (a private registry, see the module doc)."""


class SchemaVersionRow(StoreModel, table=True):
    """One schema version per component sharing ``memory.db``.

    Keyed by component because history, long-term memory and jobs live in the same file
    but evolve separately; a single global number would force them to migrate in lockstep.
    """

    __tablename__ = "schema_version"

    component: str = Field(primary_key=True)
    version: int


class ConversationRow(StoreModel, table=True):
    """One conversation per ``(channel, chat_id, thread_id)`` key.

    ``key`` is the canonical JSON of the three parts; it keeps "no thread" and "thread
    ''" apart, which a unique index over a nullable column would not. The window is
    everything anchored at or after ``window_start_seq``, preceded by the summary row
    ``summary_message_id`` when compaction left one.
    """

    __tablename__ = "conversations"

    id: int | None = Field(default=None, primary_key=True)
    key: str = Field(unique=True)
    channel: str
    chat_id: str
    thread_id: str | None = None
    window_start_seq: int = 0
    summary_message_id: int | None = None
    created_at: float
    updated_at: float


class TurnRow(StoreModel, table=True):
    """One agent turn: its state, who asked, and what it cost."""

    __tablename__ = "turns"
    __table_args__ = (
        _one_of("status", STATUSES, "ck_turns_status"),
        _one_of("speaker", SPEAKERS, "ck_turns_speaker"),
    )

    id: int | None = Field(default=None, primary_key=True)
    #: Not indexed: no query selects turns by conversation, and rows are never deleted (an
    #: index would cost every turn's ``COMMIT`` a page).
    conversation_id: int = Field(foreign_key="conversations.id")
    #: Not a foreign key: the user message row points back at this turn, and a cycle of
    #: foreign keys would make inserting either row first impossible.
    user_message_id: int | None = None
    status: str = "started"
    speaker: str
    sender_id: str | None = None
    session_id: str
    run_profile: str = "normal"
    model: str | None = None
    provider: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0
    reasoning_tokens: int = 0
    started_at: float
    finished_at: float | None = None


class MessageRow(StoreModel, table=True):
    """One history entry; ``body`` is the JSON of a :class:`fermix_core.messages.Message`.

    ``seq`` grows by one per row within a conversation. ``anchor_seq`` is the ``seq`` of
    the user message that opened the row's turn (its own ``seq`` for rows outside a turn),
    so a turn's answer sorts right after its question even when another turn of the same
    conversation (background work) committed in between. ``text`` is the plain text of
    the message, kept for search and previews without parsing ``body``.
    """

    __tablename__ = "messages"
    __table_args__ = (
        # Also the index of every query by conversation: windows read the range from their
        # start's seq (anchor_seq <= seq), so no second index of the window's own order is
        # kept (it cost every turn's two commits a page each).
        UniqueConstraint("conversation_id", "seq", name="uq_messages_conversation_seq"),
        _one_of("kind", KINDS, "ck_messages_kind"),
        _one_of("role", ROLES, "ck_messages_role"),
        _one_of("speaker", SPEAKERS, "ck_messages_speaker"),
    )

    id: int | None = Field(default=None, primary_key=True)
    conversation_id: int = Field(foreign_key="conversations.id")
    #: Not indexed, like ``turns.conversation_id``: no query selects rows by turn.
    turn_id: int | None = Field(default=None, foreign_key="turns.id")
    seq: int
    anchor_seq: int
    kind: str
    role: str
    speaker: str
    sender_id: str | None = None
    #: The sender's display name at the time (user messages only); a label, never trust.
    sender_name: str | None = None
    body: str
    text: str = ""
    created_at: float


class CounterRow(StoreModel, table=True):
    """Named monotonic counters (the ``main-<n>`` session number)."""

    __tablename__ = "counters"

    name: str = Field(primary_key=True)
    value: int
