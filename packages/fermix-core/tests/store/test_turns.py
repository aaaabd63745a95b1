"""Turns, windows, stop markers and compaction against a real SQLite file."""

from __future__ import annotations

import sqlite3

import anyio
import pytest
from fermix_core.channel import ConversationKey
from fermix_core.messages import ImagePart, Message, TextPart, ToolCall, ToolResult, Usage
from fermix_core.store import (
    ConversationStore,
    EmptyMessageError,
    StoreClosedError,
    StoreError,
    TurnStateError,
    engine,
)

pytestmark = pytest.mark.anyio

KEY = ConversationKey("telegram", "42")
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256))


def tool_exchange(call_id: str = "c1", answer: str = "done") -> list[Message]:
    return [
        Message.assistant(tool_calls=[ToolCall(id=call_id, name="read_file", arguments={"p": 1})]),
        Message.tool(ToolResult(call_id=call_id, name="read_file", content="file body")),
        Message.assistant(answer),
    ]


async def run_turn(
    store: ConversationStore,
    conversation_id: int,
    question: str,
    answer: str | list[Message] = "ok",
    *,
    speaker: str = "owner",
) -> list[int]:
    handle = await store.begin_turn(
        conversation_id,
        Message.user(question),
        speaker=speaker,
        sender_id="u1",
        session_id="main-1",
    )
    produced = [Message.assistant(answer)] if isinstance(answer, str) else answer
    return await store.commit_turn(
        handle.turn_id,
        produced,
        usage=Usage(input_tokens=5, output_tokens=2),
        model="m",
        provider="p",
    )


def texts(window: list) -> list[str]:
    return [f"{m.message.role}:{m.message.text}" for m in window]


def count(raw: sqlite3.Connection, sql: str, *args: object) -> int:
    return raw.execute(sql, args).fetchone()[0]


# --------------------------------------------------------------------------- conversations


async def test_conversation_ids_are_stable_and_keyed_by_all_three_parts(
    store: ConversationStore, db_path
) -> None:
    a = await store.conversation_id(KEY)
    assert await store.conversation_id(ConversationKey("telegram", "42")) == a
    others = {
        await store.conversation_id(ConversationKey("telegram", "42", "t1")),
        await store.conversation_id(ConversationKey("telegram", "42", "")),
        await store.conversation_id(ConversationKey("slack", "42")),
        await store.conversation_id(("telegram", "43", None)),  # a plain tuple works too
    }
    assert a not in others and len(others) == 4, "no thread, thread '' and others are distinct"
    # A second store on the same file (another process) resolves the same ids.
    async with await ConversationStore.open(db_path) as second:
        assert await second.conversation_id(KEY) == a


async def test_unknown_conversation_is_a_clear_error(store: ConversationStore) -> None:
    with pytest.raises(StoreError, match="unknown conversation id 999"):
        await store.load_window(999)
    with pytest.raises(StoreError, match="unknown conversation id"):
        await store.begin_turn(
            999, Message.user("x"), speaker="owner", sender_id=None, session_id="main-1"
        )


# --------------------------------------------------------------------------- turns


async def test_begin_and_commit_round_trip_every_message_shape(
    store: ConversationStore, raw: sqlite3.Connection
) -> None:
    cid = await store.conversation_id(KEY)
    image = ImagePart(media_type="image/png", data=PNG)
    handle = await store.begin_turn(
        cid,
        Message.user("what is this?", image),
        speaker="owner",
        sender_id="u1",
        session_id="main-7",
        run_profile="ultra",
    )
    assert (handle.conversation_id, handle.user_message_id) == (cid, handle.user_message_id)
    assert await store.turn_status(handle.turn_id) == "started"
    produced = [
        *tool_exchange(),
        Message.tool(
            ToolResult(call_id="c2", name="screenshot", content=[TextPart(text="shot"), image])
        ),
        Message.assistant("a picture of bytes"),
    ]
    ids = await store.commit_turn(
        handle.turn_id,
        produced,
        usage=Usage(input_tokens=10, output_tokens=3, cached_input_tokens=4, reasoning_tokens=1),
        model="gpt-x",
        provider="openai",
    )
    assert len(ids) == 5 and ids == sorted(ids)
    window = await store.load_window(cid)
    assert [m.message for m in window] == [Message.user("what is this?", image), *produced]
    assert window[0].message.images[0].data == PNG, "image bytes survive the JSON round trip"
    assert [m.seq for m in window] == [1, 2, 3, 4, 5, 6]
    assert {m.kind for m in window} == {"message"}
    assert {m.speaker for m in window} == {"owner"}
    assert window[0].sender_id == "u1" and window[1].sender_id is None
    assert {m.turn_id for m in window} == {handle.turn_id}
    row = raw.execute(
        "SELECT status, model, provider, input_tokens, output_tokens, cached_input_tokens, "
        "reasoning_tokens, session_id, run_profile, sender_id FROM turns WHERE id = ?",
        (handle.turn_id,),
    ).fetchone()
    assert row == ("committed", "gpt-x", "openai", 10, 3, 4, 1, "main-7", "ultra", "u1")


@pytest.mark.parametrize(
    "bad",
    [
        Message.assistant(""),
        Message.assistant("   \n\t"),
        Message(role="assistant", content=[TextPart(text="")]),
        Message.system(" "),
        Message.user(""),
    ],
    ids=["assistant-empty", "assistant-whitespace", "assistant-empty-part", "system", "user"],
)
async def test_commit_refuses_any_content_less_message_and_writes_nothing(
    store: ConversationStore, raw: sqlite3.Connection, bad: Message
) -> None:
    cid = await store.conversation_id(KEY)
    handle = await store.begin_turn(
        cid, Message.user("hi"), speaker="owner", sender_id=None, session_id="main-1"
    )
    before = count(raw, "SELECT COUNT(*) FROM messages")
    with pytest.raises(EmptyMessageError, match="abandon the turn as 'empty'"):
        await store.commit_turn(
            handle.turn_id,
            [Message.assistant("fine"), bad],
            usage=Usage(),
            model=None,
            provider=None,
        )
    assert count(raw, "SELECT COUNT(*) FROM messages") == before, "not even the valid message"
    assert await store.turn_status(handle.turn_id) == "started"


async def test_content_less_user_messages_and_empty_commits_are_refused(
    store: ConversationStore, raw: sqlite3.Connection
) -> None:
    cid = await store.conversation_id(KEY)
    with pytest.raises(EmptyMessageError):
        await store.begin_turn(
            cid, Message.user("  "), speaker="owner", sender_id=None, session_id="s"
        )
    assert count(raw, "SELECT COUNT(*) FROM turns") == 0
    handle = await store.begin_turn(
        cid, Message.user("hi"), speaker="owner", sender_id=None, session_id="s"
    )
    with pytest.raises(EmptyMessageError, match="produced no messages"):
        await store.commit_turn(handle.turn_id, [], usage=Usage(), model=None, provider=None)
    with pytest.raises(EmptyMessageError):
        await store.append_marker(cid, "")
    with pytest.raises(EmptyMessageError):
        await store.replace_with_summary(cid, " ", keep_last=0)


async def test_begin_turn_validates_its_arguments(store: ConversationStore) -> None:
    cid = await store.conversation_id(KEY)
    with pytest.raises(ValueError, match="opens with a user message"):
        await store.begin_turn(
            cid, Message.assistant("hi"), speaker="owner", sender_id=None, session_id="s"
        )
    with pytest.raises(ValueError, match="speaker must be one of"):
        await store.begin_turn(
            cid, Message.user("hi"), speaker="admin", sender_id=None, session_id="s"
        )


async def test_a_turn_commits_once_and_never_after_being_abandoned(
    store: ConversationStore,
) -> None:
    cid = await store.conversation_id(KEY)
    first = await store.begin_turn(
        cid, Message.user("a"), speaker="owner", sender_id=None, session_id="s"
    )
    await store.commit_turn(
        first.turn_id, [Message.assistant("1")], usage=Usage(), model=None, provider=None
    )
    with pytest.raises(TurnStateError, match="already committed"):
        await store.commit_turn(
            first.turn_id, [Message.assistant("2")], usage=Usage(), model=None, provider=None
        )
    assert await store.abandon_turn(first.turn_id, "stopped") is False, "commit wins"
    assert await store.turn_status(first.turn_id) == "committed"

    second = await store.begin_turn(
        cid, Message.user("b"), speaker="owner", sender_id=None, session_id="s"
    )
    assert await store.abandon_turn(second.turn_id, "stopped") is True
    assert await store.abandon_turn(second.turn_id, "failed") is False, "first end state sticks"
    with pytest.raises(TurnStateError, match="already stopped"):
        await store.commit_turn(
            second.turn_id, [Message.assistant("late")], usage=Usage(), model=None, provider=None
        )
    assert texts(await store.load_window(cid)) == ["user:a", "assistant:1", "user:b"]

    with pytest.raises(TurnStateError, match="no turn 12345"):
        await store.commit_turn(
            12345, [Message.assistant("x")], usage=Usage(), model=None, provider=None
        )
    with pytest.raises(TurnStateError, match="no turn 12345"):
        await store.abandon_turn(12345, "failed")
    with pytest.raises(ValueError, match="status must be one of"):
        await store.abandon_turn(second.turn_id, "committed")  # type: ignore[arg-type]
    assert await store.turn_status(12345) is None


async def test_window_shows_only_the_user_message_of_turns_that_did_not_commit(
    store: ConversationStore,
) -> None:
    cid = await store.conversation_id(KEY)
    await run_turn(store, cid, "one", "1")
    for status in ("failed", "empty"):
        handle = await store.begin_turn(
            cid, Message.user(status), speaker="owner", sender_id=None, session_id="s"
        )
        await store.abandon_turn(handle.turn_id, status)  # type: ignore[arg-type]
    active = await store.begin_turn(
        cid, Message.user("in flight"), speaker="owner", sender_id=None, session_id="s"
    )
    assert texts(await store.load_window(cid)) == [
        "user:one",
        "assistant:1",
        "user:failed",
        "user:empty",
        "user:in flight",
    ]
    await store.commit_turn(
        active.turn_id, [Message.assistant("answer")], usage=Usage(), model=None, provider=None
    )
    assert texts(await store.load_window(cid))[-2:] == ["user:in flight", "assistant:answer"]


async def test_window_never_replays_rows_of_uncommitted_turns_or_bad_rows(
    store: ConversationStore, raw: sqlite3.Connection, caplog: pytest.LogCaptureFixture
) -> None:
    """Rows the store itself would never write (another writer, an old bug, corruption)."""
    cid = await store.conversation_id(KEY)
    await run_turn(store, cid, "good", "answer")
    handle = await store.begin_turn(
        cid, Message.user("pending"), speaker="owner", sender_id=None, session_id="s"
    )
    insert = (
        "INSERT INTO messages (conversation_id, turn_id, seq, anchor_seq, kind, role, speaker, "
        "body, text, created_at) VALUES (?, ?, ?, ?, 'message', ?, 'owner', ?, '', 0)"
    )
    seq = count(raw, "SELECT MAX(seq) FROM messages") + 1
    half = Message.assistant("half an answer").model_dump_json()
    raw.execute(insert, (cid, handle.turn_id, seq, 3, "assistant", half))
    empty = '{"role":"assistant","content":[{"type":"text","text":"  "}]}'
    raw.execute(insert, (cid, None, seq + 1, seq + 1, "assistant", empty))
    raw.execute(insert, (cid, None, seq + 2, seq + 2, "assistant", "{not json"))
    raw.execute(insert, (cid, None, seq + 3, seq + 3, "user", '{"role":"user","content":[]}'))
    with caplog.at_level("WARNING", logger="fermix.store"):
        window = await store.load_window(cid)
    assert texts(window) == ["user:good", "assistant:answer", "user:pending"]
    assert "not a valid message" in caplog.text and "content-less" in caplog.text


async def test_concurrent_turns_of_one_conversation_stay_grouped(
    store: ConversationStore,
) -> None:
    """A background turn committing between a foreground turn's question and answer."""
    cid = await store.conversation_id(KEY)
    fg = await store.begin_turn(
        cid, Message.user("foreground"), speaker="owner", sender_id=None, session_id="s"
    )
    bg = await store.begin_turn(
        cid, Message.user("background"), speaker="owner", sender_id=None, session_id="s"
    )
    await store.commit_turn(
        bg.turn_id, tool_exchange("b", "bg done"), usage=Usage(), model=None, provider=None
    )
    await store.commit_turn(
        fg.turn_id, [Message.assistant("fg done")], usage=Usage(), model=None, provider=None
    )
    assert texts(await store.load_window(cid)) == [
        "user:foreground",
        "assistant:fg done",
        "user:background",
        "assistant:",
        "tool:file body",
        "assistant:bg done",
    ]


async def test_many_conversations_in_parallel_keep_their_own_sequence(
    store: ConversationStore,
) -> None:
    keys = [ConversationKey("cli", str(i)) for i in range(20)]

    async def chat(key: ConversationKey) -> None:
        cid = await store.conversation_id(key)
        for n in range(5):
            await run_turn(store, cid, f"{key.chat_id}-q{n}", f"{key.chat_id}-a{n}")

    async with anyio.create_task_group() as tg:
        for key in keys:
            tg.start_soon(chat, key)
    for key in keys:
        window = await store.load_window(await store.conversation_id(key))
        assert [m.seq for m in window] == list(range(1, 11))
        expected = [f"{key.chat_id}-{kind}{n}" for n in range(5) for kind in ("q", "a")]
        assert [m.message.text for m in window] == expected


async def test_cancelling_a_commit_never_leaves_half_a_turn(
    store: ConversationStore, raw: sqlite3.Connection
) -> None:
    cid = await store.conversation_id(KEY)
    handle = await store.begin_turn(
        cid, Message.user("q"), speaker="owner", sender_id=None, session_id="s"
    )
    produced = [Message.assistant(f"part {i}") for i in range(50)]
    with anyio.CancelScope() as scope:
        scope.cancel()  # cancelled before it even reaches the worker thread
        await store.commit_turn(handle.turn_id, produced, usage=Usage(), model=None, provider=None)
    async with anyio.create_task_group() as tg:

        async def commit() -> None:
            await store.commit_turn(
                handle.turn_id, produced, usage=Usage(), model=None, provider=None
            )

        tg.start_soon(commit)
        await anyio.lowlevel.checkpoint()
        tg.cancel_scope.cancel()
    status = await store.turn_status(handle.turn_id)
    rows = count(raw, "SELECT COUNT(*) FROM messages WHERE turn_id = ?", handle.turn_id)
    assert (status, rows) in {("started", 1), ("committed", 51)}


async def test_closed_store_raises_a_typed_error(db_path) -> None:
    store = await ConversationStore.open(db_path)
    await store.close()
    await store.close()  # twice is fine
    with pytest.raises(StoreClosedError, match="closed"):
        await store.conversation_id(KEY)


# --------------------------------------------------------------------------- markers


async def test_stop_marker_follows_an_orphaned_user_message_exactly_once(
    store: ConversationStore, raw: sqlite3.Connection
) -> None:
    cid = await store.conversation_id(KEY)
    assert await store.append_marker(cid, "stopped") is False, "nothing to mark yet"
    await run_turn(store, cid, "q1", "a1")
    assert await store.append_marker(cid, "stopped") is False, "last message is an answer"
    handle = await store.begin_turn(
        cid, Message.user("q2"), speaker="owner", sender_id=None, session_id="s"
    )
    assert await store.append_marker(cid, "stopped before I finished") is True
    assert await store.append_marker(cid, "stopped before I finished") is False, "no double"
    assert await store.turn_status(handle.turn_id) == "stopped", "the marked turn is closed"
    with pytest.raises(TurnStateError):
        await store.commit_turn(
            handle.turn_id, [Message.assistant("late")], usage=Usage(), model=None, provider=None
        )
    window = await store.load_window(cid)
    assert texts(window) == [
        "user:q1",
        "assistant:a1",
        "user:q2",
        "assistant:stopped before I finished",
    ]
    assert (window[-1].kind, window[-1].speaker, window[-1].turn_id) == (
        "marker",
        "system",
        handle.turn_id,
    )
    # The next turn follows the marker, so roles keep alternating.
    await run_turn(store, cid, "q3", "a3")
    roles = [m.message.role for m in await store.load_window(cid)]
    assert roles == ["user", "assistant"] * 3
    assert count(raw, "SELECT COUNT(*) FROM messages WHERE kind = 'marker'") == 1


async def test_marker_keeps_an_already_abandoned_status(store: ConversationStore) -> None:
    cid = await store.conversation_id(KEY)
    handle = await store.begin_turn(
        cid, Message.user("q"), speaker="owner", sender_id=None, session_id="s"
    )
    await store.abandon_turn(handle.turn_id, "failed")
    assert await store.append_marker(cid, "stopped") is True
    assert await store.turn_status(handle.turn_id) == "failed"


# --------------------------------------------------------------------------- window resets


async def test_clear_window_keeps_history_but_starts_fresh(
    store: ConversationStore, raw: sqlite3.Connection
) -> None:
    cid = await store.conversation_id(KEY)
    await run_turn(store, cid, "old", "old answer")
    await store.replace_with_summary(cid, "a summary", keep_last=0)
    await store.clear_window(cid)
    assert await store.load_window(cid) == []
    await run_turn(store, cid, "new", "new answer")
    assert texts(await store.load_window(cid)) == ["user:new", "assistant:new answer"]
    assert count(raw, "SELECT COUNT(*) FROM messages WHERE conversation_id = ?", cid) == 5
    other = await store.conversation_id(ConversationKey("cli", "x"))
    await run_turn(store, other, "elsewhere")
    await store.clear_window(cid)
    assert texts(await store.load_window(other)) == ["user:elsewhere", "assistant:ok"]


async def test_a_turn_in_flight_across_clear_window_stays_out_of_the_new_window(
    store: ConversationStore,
) -> None:
    cid = await store.conversation_id(KEY)
    handle = await store.begin_turn(
        cid, Message.user("before /new"), speaker="owner", sender_id=None, session_id="s"
    )
    await store.clear_window(cid)
    await store.commit_turn(
        handle.turn_id, [Message.assistant("late")], usage=Usage(), model=None, provider=None
    )
    assert await store.load_window(cid) == [], "no answer without its question"


async def test_summary_leads_the_window_and_older_rows_leave_it(
    store: ConversationStore, raw: sqlite3.Connection
) -> None:
    cid = await store.conversation_id(KEY)
    for n in range(4):
        await run_turn(store, cid, f"q{n}", f"a{n}")
    await store.replace_with_summary(cid, "we talked about q0..q3", keep_last=4)
    window = await store.load_window(cid)
    assert texts(window) == [
        "system:we talked about q0..q3",
        "user:q2",
        "assistant:a2",
        "user:q3",
        "assistant:a3",
    ]
    assert (window[0].kind, window[0].speaker, window[0].turn_id) == ("summary", "system", None)
    assert count(raw, "SELECT COUNT(*) FROM messages WHERE kind = 'message'") == 8, "no delete"

    await run_turn(store, cid, "q4", "a4")
    await store.replace_with_summary(cid, "second summary", keep_last=2)
    assert texts(await store.load_window(cid)) == [
        "system:second summary",
        "user:q4",
        "assistant:a4",
    ], "only the newest summary leads"
    await store.replace_with_summary(cid, "everything", keep_last=0)
    assert texts(await store.load_window(cid)) == ["system:everything"]
    await run_turn(store, cid, "q5", "a5")
    assert texts(await store.load_window(cid)) == ["system:everything", "user:q5", "assistant:a5"]
    with pytest.raises(ValueError, match="keep_last"):
        await store.replace_with_summary(cid, "x", keep_last=-1)


async def test_a_cut_inside_a_turn_keeps_that_whole_turn(store: ConversationStore) -> None:
    cid = await store.conversation_id(KEY)
    await run_turn(store, cid, "q0", "a0")
    await run_turn(store, cid, "q1", tool_exchange("x", "a1"))
    # keep_last=3 would start at the tool result, orphaned from its call and its question.
    await store.replace_with_summary(cid, "summary", keep_last=3)
    assert texts(await store.load_window(cid)) == [
        "system:summary",
        "user:q1",
        "assistant:",
        "tool:file body",
        "assistant:a1",
    ]
    await run_turn(store, cid, "q2", "a2")
    await run_turn(store, cid, "q3", tool_exchange("y", "a3"))
    await store.replace_with_summary(cid, "summary 2", keep_last=5)  # starts at a2
    assert texts(await store.load_window(cid)) == [
        "system:summary 2",
        "user:q2",
        "assistant:a2",
        "user:q3",
        "assistant:",
        "tool:file body",
        "assistant:a3",
    ]
    await store.replace_with_summary(cid, "summary 3", keep_last=100)
    assert len(await store.load_window(cid)) == 1 + 6, "more than the window keeps it all"


async def test_summary_never_swallows_what_its_author_did_not_see(
    store: ConversationStore,
) -> None:
    cid = await store.conversation_id(KEY)
    await run_turn(store, cid, "q0", "a0")
    seen = await store.load_window(cid)
    # While the summary is being written, another turn runs a long tool loop and commits.
    await run_turn(store, cid, "q1", tool_exchange("z", "a1") + tool_exchange("w", "a1b"))
    await store.replace_with_summary(
        cid, "summary of q0", keep_last=2, covered_through=seen[-1].seq
    )
    assert texts(await store.load_window(cid))[:3] == [
        "system:summary of q0",
        "user:q1",
        "assistant:",
    ]
    assert len(await store.load_window(cid)) == 1 + 7


async def test_session_numbers_are_unique_and_persist(store: ConversationStore, db_path) -> None:
    from fermix_core.store.engine import SESSION_BLOCK

    assert [await store.next_session_number() for _ in range(3)] == [1, 2, 3]
    async with await ConversationStore.open(db_path) as second:
        # Another connection (another process) reserves the next block: no number twice.
        assert await second.next_session_number() == SESSION_BLOCK + 1
    assert await store.next_session_number() == 4
    # The counter is written once per block, not once per number.
    raw = sqlite3.connect(db_path)
    try:
        assert raw.execute("SELECT value FROM counters").fetchone()[0] == 2 * SESSION_BLOCK
    finally:
        raw.close()
    handed = [4] + [await store.next_session_number() for _ in range(SESSION_BLOCK)]
    assert handed == sorted(set(handed)) and SESSION_BLOCK + 1 not in handed
    assert handed[-1] > 2 * SESSION_BLOCK  # the first block ran out: the third one is next
    await store.close()
    async with await ConversationStore.open(db_path) as reopened:
        # After a restart numbers continue above everything handed out (gaps are fine).
        assert await reopened.next_session_number() > max(handed)


async def test_a_start_that_fails_gives_up_the_block_it_reserved(
    store: ConversationStore, db_path
) -> None:
    cid = await store.conversation_id(KEY)
    sync = store._sync
    real = sync._begin

    def fail(*args, **kwargs):
        raise OSError("disk full")

    sync._begin = fail
    with pytest.raises(OSError, match="disk full"):
        await store.start_turn(cid, Message.user("q"), speaker="owner", sender_id=None)
    sync._begin = real
    raw = sqlite3.connect(db_path)
    try:
        # The reservation was rolled back with the rest, and the store forgot the block:
        # keeping it would hand out numbers another process may reserve too.
        assert raw.execute("SELECT COUNT(*) FROM counters").fetchone()[0] == 0
        async with await ConversationStore.open(db_path) as other:
            theirs = await other.next_session_number()
        start = await store.start_turn(cid, Message.user("q"), speaker="owner", sender_id=None)
        assert start.session_id != f"main-{theirs}"
        stored = raw.execute("SELECT session_id FROM turns").fetchall()
        assert stored == [(start.session_id,)]
    finally:
        raw.close()


async def test_a_lost_group_commit_forgets_reserved_numbers_and_open_turns(
    store: ConversationStore,
) -> None:
    sync = store._sync
    cid = await store.conversation_id(KEY)
    conn = sync.conn
    conn.execute("BEGIN IMMEDIATE")
    start = sync.start_turn(
        cid, Message.user("q"), speakers=None, speaker="owner", sender_id=None, run_profile="n"
    )
    assert start.handle.turn_id in sync._open and sync._sessions[1] > 0
    conn.execute("ROLLBACK")
    sync.forget_parsed()  # what the worker's on_rollback does after a lost batch
    assert sync._open == {} and sync._sessions[0] > sync._sessions[1]
    again = await store.start_turn(cid, Message.user("q"), speaker="owner", sender_id=None)
    # The rolled-back turn's id is free again and is reused; its remembered facts are gone.
    assert again.handle.turn_id == start.handle.turn_id
    await store.commit_turn(
        again.handle.turn_id, [Message.assistant("a")], usage=Usage(), model=None, provider=None
    )
    assert [m.message.text for m in await store.load_window(cid)] == ["q", "a"]


async def test_the_turn_row_names_its_user_message_and_updated_at_is_the_start(
    store: ConversationStore, raw: sqlite3.Connection
) -> None:
    cid = await store.conversation_id(KEY)
    start = await store.start_turn(cid, Message.user("q"), speaker="owner", sender_id="u")
    handle = start.handle
    row = raw.execute(
        "SELECT t.user_message_id, m.turn_id, m.text FROM turns t "
        "JOIN messages m ON m.id = t.user_message_id WHERE t.id = ?",
        (handle.turn_id,),
    ).fetchone()
    assert row == (handle.user_message_id, handle.turn_id, "q")
    (started,) = raw.execute("SELECT updated_at FROM conversations WHERE id = ?", (cid,)).fetchone()
    (created,) = raw.execute(
        "SELECT created_at FROM messages WHERE id = ?", (handle.user_message_id,)
    ).fetchone()
    assert started == created  # the user message's time
    await store.commit_turn(
        handle.turn_id, [Message.assistant("a")], usage=Usage(), model=None, provider=None
    )
    # One updated_at write per turn: a conversation's activity is when its turns start.
    assert raw.execute("SELECT updated_at FROM conversations WHERE id = ?", (cid,)).fetchone() == (
        started,
    )


async def test_a_reply_goes_in_with_one_insert_and_its_ids_are_the_rows(
    store: ConversationStore, raw: sqlite3.Connection
) -> None:
    """A tool turn's call, result and answer are one multi-row INSERT; a reply longer than
    one statement's rows takes several; the ids returned are those rows', in order."""
    cid = await store.conversation_id(KEY)
    await run_turn(store, cid, "warm", "up")
    for produced in (
        tool_exchange(),
        [Message.assistant("only")],
        [m for i in range(12) for m in tool_exchange(f"c{i}", f"answer {i}")],  # 36 rows
    ):
        start = await store.start_turn(cid, Message.user("q"), speaker="owner", sender_id="u")
        statements: list[str] = []
        store._sync.conn.set_trace_callback(statements.append)
        try:
            ids = await store.commit_turn(
                start.handle.turn_id, produced, usage=Usage(), model="m", provider="p"
            )
        finally:
            store._sync.conn.set_trace_callback(None)
        inserts = [s for s in statements if s.startswith("INSERT INTO messages")]
        assert len(inserts) == -(-len(produced) // engine._REPLY_ROWS_MAX)
        rows = raw.execute(
            "SELECT id, seq, body FROM messages WHERE turn_id = ? AND id != ? ORDER BY seq",
            (start.handle.turn_id, start.handle.user_message_id),
        ).fetchall()
        assert ids == [row[0] for row in rows]
        assert [Message.model_validate_json(row[2]) for row in rows] == produced
        user_seq = start.window[-1].seq + 1
        assert [row[1] for row in rows] == list(range(user_seq + 1, user_seq + 1 + len(produced)))
        window = await store.load_window(cid)
        assert [m.id for m in window[-len(produced) :]] == ids
        assert [m.message for m in window[-len(produced) :]] == produced


async def test_message_ids_near_the_limit_refuse_a_turn_and_write_nothing(
    store: ConversationStore, raw: sqlite3.Connection
) -> None:
    """Reply ids are worked out from SQLite's "largest id + 1" rule, which stops holding at
    an id of 2**63 - 1: a database whose ids came anywhere near it starts no turn."""
    cid = await store.conversation_id(KEY)
    await run_turn(store, cid, "q", "a")
    (updated,) = raw.execute("SELECT updated_at FROM conversations WHERE id = ?", (cid,)).fetchone()
    raw.execute(
        "INSERT INTO messages (id, conversation_id, turn_id, seq, anchor_seq, kind, role, "
        "speaker, sender_id, body, text, created_at) "
        "VALUES (?, ?, NULL, 99, 99, 'marker', 'assistant', 'system', NULL, ?, 'x', 0)",
        (engine.MAX_MESSAGE_ID, cid, Message.assistant("x").model_dump_json()),
    )
    for attempt in (
        store.start_turn(cid, Message.user("next"), speaker="owner", sender_id="u"),
        store.begin_turn(cid, Message.user("next"), speaker="owner", sender_id="u", session_id="s"),
    ):
        with pytest.raises(StoreError, match=r"message ids .* have reached"):
            await attempt
    assert count(raw, "SELECT COUNT(*) FROM turns") == 1
    assert count(raw, "SELECT COUNT(*) FROM messages") == 3
    assert raw.execute("SELECT updated_at FROM conversations WHERE id = ?", (cid,)).fetchone() == (
        updated,
    )


async def test_sqlite_failures_are_typed_and_leave_the_store_usable(
    store: ConversationStore, raw: sqlite3.Connection
) -> None:
    cid = await store.conversation_id(KEY)
    conn = store._sync.conn  # fault injection: make every write fail like a read-only disk
    conn.execute("PRAGMA query_only = ON")
    with pytest.raises(StoreError, match="check free disk space") as info:
        await store.begin_turn(
            cid, Message.user("q"), speaker="owner", sender_id=None, session_id="s"
        )
    assert isinstance(info.value.__cause__, sqlite3.Error)
    assert not conn.in_transaction, "the failed write was rolled back"
    conn.execute("PRAGMA query_only = OFF")
    await run_turn(store, cid, "after", "recovered")
    assert texts(await store.load_window(cid)) == ["user:after", "assistant:recovered"]
    assert count(raw, "SELECT COUNT(*) FROM turns") == 1


# --------------------------------------------------------------------------- shared chats


async def test_a_speaker_filter_leaves_other_turns_out_whole(store: ConversationStore) -> None:
    cid = await store.conversation_id(KEY)
    await run_turn(store, cid, "owner asks", tool_exchange("c1", "owner answer"))
    await run_turn(store, cid, "guest asks", "guest answer", speaker="guest")
    stopped = await store.begin_turn(
        cid, Message.user("owner again"), speaker="owner", sender_id="u1", session_id="s"
    )
    await store.append_marker(cid, "owner stopped")
    guest = await store.begin_turn(
        cid, Message.user("guest again"), speaker="guest", sender_id="u2", session_id="s"
    )
    await store.append_marker(cid, "guest stopped")
    assert await store.turn_status(stopped.turn_id) == "stopped"
    assert await store.turn_status(guest.turn_id) == "stopped"

    only_guests = await store.load_window(cid, speakers={"guest"})
    assert texts(only_guests) == [
        "user:guest asks",
        "assistant:guest answer",
        "user:guest again",
        "assistant:guest stopped",
    ]
    assert {row.turn_speaker for row in only_guests} == {"guest"}
    everything = await store.load_window(cid)
    assert len(everything) == 10 and texts(everything)[:3] == [
        "user:owner asks",
        "assistant:",
        "tool:file body",
    ]
    with pytest.raises(ValueError, match="speakers"):
        await store.load_window(cid, speakers={"stranger"})


async def test_a_compaction_summary_is_never_shown_to_a_filtered_view(
    store: ConversationStore,
) -> None:
    cid = await store.conversation_id(KEY)
    for n in range(3):
        await run_turn(store, cid, f"owner {n}", f"answer {n}")
        await run_turn(store, cid, f"guest {n}", f"reply {n}", speaker="guest")
    await store.replace_with_summary(cid, "SUMMARY of owner and guest turns", keep_last=4)
    assert texts(await store.load_window(cid))[0] == "system:SUMMARY of owner and guest turns"
    assert texts(await store.load_window(cid, speakers={"guest"})) == [
        "user:guest 2",
        "assistant:reply 2",
    ]


async def test_sender_names_are_kept_for_user_messages(store: ConversationStore) -> None:
    cid = await store.conversation_id(KEY)
    handle = await store.begin_turn(
        cid,
        Message.user("hi"),
        speaker="guest",
        sender_id="7",
        session_id="s",
        sender_name="Sam",
    )
    await store.commit_turn(
        handle.turn_id, [Message.assistant("hello")], usage=Usage(), model=None, provider=None
    )
    window = await store.load_window(cid)
    assert [(row.sender_id, row.sender_name) for row in window] == [("7", "Sam"), (None, None)]


def test_the_fast_row_constructor_builds_the_same_frozen_row() -> None:
    import dataclasses

    from fermix_core.store.records import StoredMessage, stored_message

    values = (7, 2, 3, 4, "marker", "system", Message.user("q"), 1.5, "s", "Ann", "guest")
    fast, slow = stored_message(*values), StoredMessage(*values)
    assert type(fast) is StoredMessage
    assert fast == slow and repr(fast) == repr(slow)
    assert dataclasses.astuple(fast) == values
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.seq = 5  # type: ignore[misc]
    defaults = stored_message(*values[:8])
    assert (defaults.sender_id, defaults.sender_name, defaults.turn_speaker) == (None, None, None)
