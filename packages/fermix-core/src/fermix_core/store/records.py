"""What the conversation store hands out, and the errors it raises.

Kept apart from the SQLite code so that the turn runner, the CLI and tests can name these
types without importing anything that touches a database.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Literal, get_args

from fermix_core.messages import Message

__all__ = [
    "KINDS",
    "SPEAKERS",
    "TURN_END_STATES",
    "EmptyMessageError",
    "MessageKind",
    "StoreClosedError",
    "StoreCorruptError",
    "StoreError",
    "StoreSchemaError",
    "StoredMessage",
    "StoredSpeaker",
    "TurnEndState",
    "TurnHandle",
    "TurnStart",
    "TurnStateError",
]

MessageKind = Literal["message", "summary", "marker"]
StoredSpeaker = Literal["owner", "guest", "job", "system"]
TurnEndState = Literal["stopped", "failed", "empty"]

KINDS: tuple[str, ...] = get_args(MessageKind)
SPEAKERS: tuple[str, ...] = get_args(StoredSpeaker)
TURN_END_STATES: tuple[str, ...] = get_args(TurnEndState)


class StoreError(RuntimeError):
    """The conversation store cannot do what was asked; the message says what to do."""


class StoreSchemaError(StoreError):
    """``memory.db`` was written by a newer Fermix than the one running.

    Opening stops before anything is written, because an older build that "repaired" a
    newer schema would destroy history the newer build still needs.
    """


class StoreCorruptError(StoreError):
    """The file at the store's path is not a SQLite database this build can read."""


class StoreClosedError(StoreError):
    """A call arrived after :meth:`ConversationStore.close`."""


class TurnStateError(StoreError):
    """A turn id that does not exist, or a turn that is no longer open.

    Committing a turn that ``/stop`` already abandoned is the case this exists for: the
    stopped turn must neither deliver nor commit, whichever side of the race wins.
    """


class EmptyMessageError(ValueError):
    """Refusing a message with no text, no image, no tool call and no tool result.

    Such a message teaches the model nothing and several provider wires reject it, so one
    stored by accident would break every later turn of its conversation.
    """


@dataclass(frozen=True, slots=True)
class StoredMessage:
    """One row of a conversation's history as the turn runner replays it.

    ``speaker`` says whose turn the row belongs to: the user message and everything the
    agent produced answering it share the speaker of that turn, while compaction summaries
    and stop markers are ``"system"``. ``sender_id`` and ``sender_name`` are set on user
    messages only. ``turn_speaker`` is the speaker of the turn a row belongs to — for a
    stop marker, the turn it closed — so a filter by trust keeps a turn's marker with it.
    """

    id: int
    conversation_id: int
    turn_id: int | None
    seq: int
    kind: MessageKind
    speaker: StoredSpeaker
    message: Message
    created_at: float
    sender_id: str | None = None
    sender_name: str | None = None
    turn_speaker: StoredSpeaker | None = None


_FIELDS = tuple(f.name for f in fields(StoredMessage))
if StoredMessage.__slots__ != _FIELDS:  # pragma: no cover - guards stored_message below
    raise RuntimeError(f"StoredMessage slots {StoredMessage.__slots__} != fields {_FIELDS}")
(
    _set_id,
    _set_conversation_id,
    _set_turn_id,
    _set_seq,
    _set_kind,
    _set_speaker,
    _set_message,
    _set_created_at,
    _set_sender_id,
    _set_sender_name,
    _set_turn_speaker,
) = (getattr(StoredMessage, name).__set__ for name in _FIELDS)


def stored_message(
    id: int,
    conversation_id: int,
    turn_id: int | None,
    seq: int,
    kind: str,
    speaker: str,
    message: Message,
    created_at: float,
    sender_id: str | None = None,
    sender_name: str | None = None,
    turn_speaker: str | None = None,
    _new: object = object.__new__,
) -> StoredMessage:
    """``StoredMessage(...)`` for the store's own rows, at half the cost.

    A frozen dataclass's ``__init__`` sets each of its eleven fields through
    ``object.__setattr__``; this sets the slots directly (the store builds one per row it
    writes and per row of a window it reads). The result is the same frozen object, equal
    and printing the same (a test compares them field by field).
    """
    row = _new(StoredMessage)  # type: ignore[operator]
    _set_id(row, id)
    _set_conversation_id(row, conversation_id)
    _set_turn_id(row, turn_id)
    _set_seq(row, seq)
    _set_kind(row, kind)
    _set_speaker(row, speaker)
    _set_message(row, message)
    _set_created_at(row, created_at)
    _set_sender_id(row, sender_id)
    _set_sender_name(row, sender_name)
    _set_turn_speaker(row, turn_speaker)
    return row


@dataclass(frozen=True, slots=True)
class TurnHandle:
    """What :meth:`ConversationStore.begin_turn` returns: enough to commit or abandon."""

    turn_id: int
    conversation_id: int
    user_message_id: int


@dataclass(frozen=True, slots=True)
class TurnStart:
    """What :meth:`ConversationStore.start_turn` returns, from one transaction.

    ``window`` is the history *before* the new user message (what ``load_window`` returned
    just before ``begin_turn``), ``session_id`` the turn's fresh ``main-<n>`` id, ``handle``
    the opened turn.
    """

    window: list[StoredMessage]
    session_id: str
    handle: TurnHandle
