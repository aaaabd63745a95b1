"""The store keeps each live window decoded and reads no history rows while it is current.

Every test compares what the caching store hands out with a cold read of the same file by
a second store (its own connection, as another process would have), after each kind of
change: turns of this store, interleaved turns, stop markers, ``/new``, compaction, a
failed commit, and writes by the other store.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from fermix_core.channel import ConversationKey
from fermix_core.messages import ImagePart, Message, ToolCall, ToolResult, Usage
from fermix_core.store import ConversationStore
from fermix_core.store.engine import encode

pytestmark = pytest.mark.anyio

KEY = ConversationKey("telegram", "42")


def as_rows(window: list) -> list[tuple]:
    return [
        (
            m.id,
            m.turn_id,
            m.seq,
            m.kind,
            m.speaker,
            m.sender_id,
            m.sender_name,
            m.turn_speaker,
            m.created_at,
            m.message,
        )
        for m in window
    ]


async def cold(path: Path, conversation_id: int, speakers=None) -> list[tuple]:
    other = await ConversationStore.open(path)
    try:
        return as_rows(await other.load_window(conversation_id, speakers=speakers))
    finally:
        await other.close()


async def assert_current(store: ConversationStore, path: Path, cid: int) -> None:
    for speakers in (None, {"guest"}, {"owner"}):
        cached = as_rows(await store.load_window(cid, speakers=speakers))
        assert cached == await cold(path, cid, speakers), speakers


async def turn(store, cid, text, answer="ok", *, speaker="owner", sender_name=None):
    start = await store.start_turn(
        cid,
        Message.user(text),
        speaker=speaker,
        sender_id="u1",
        sender_name=sender_name,
    )
    await store.commit_turn(
        start.handle.turn_id,
        [Message.assistant(answer)],
        usage=Usage(),
        model="m",
        provider="p",
    )
    return start


def window_reads(store: ConversationStore) -> list[str]:
    """Record the window SELECTs the store's connection runs from now on."""
    statements: list[str] = []
    store.worker.conn.set_trace_callback(statements.append)
    return statements


def reads_of_rows(statements: list[str]) -> list[str]:
    return [s for s in statements if "FROM messages m LEFT JOIN turns t" in s]


async def test_a_live_window_is_not_read_again_and_equals_a_cold_read(store, db_path) -> None:
    cid = await store.conversation_id(KEY)
    await turn(store, cid, "first")
    statements = window_reads(store)
    second = await turn(store, cid, "second", sender_name="Ann")
    third = await turn(store, cid, "third")
    assert reads_of_rows(statements) == [], "the window came from memory"
    assert [m.message.text for m in third.window] == ["first", "ok", "second", "ok"]
    assert second.window == third.window[:2]
    await assert_current(store, db_path, cid)


async def test_interleaved_turns_tool_rows_and_guests_stay_in_window_order(store, db_path) -> None:
    cid = await store.conversation_id(KEY)
    await store.load_window(cid)
    early = await store.begin_turn(
        cid, Message.user("slow one"), speaker="owner", sender_id="u1", session_id="main-1"
    )
    await turn(store, cid, "guest asks", speaker="guest")
    await store.commit_turn(
        early.turn_id,
        [
            Message.assistant(tool_calls=[ToolCall(id="c1", name="clock")]),
            Message.tool(ToolResult(call_id="c1", name="clock", content="12:00")),
            Message.assistant("late answer"),
        ],
        usage=Usage(),
        model="m",
        provider="p",
    )
    window = await store.load_window(cid)
    assert [m.message.text for m in window][:2] == ["slow one", ""]
    assert [m.message.text for m in window][-2:] == ["guest asks", "ok"]
    await assert_current(store, db_path, cid)


async def test_stop_marker_abandoned_turn_new_and_compaction_are_seen(store, db_path) -> None:
    cid = await store.conversation_id(KEY)
    for i in range(4):
        await turn(store, cid, f"q{i}")
    stopped = await store.start_turn(cid, Message.user("stop me"), speaker="owner", sender_id="u")
    await store.abandon_turn(stopped.handle.turn_id, "stopped")
    await store.append_marker(cid, "(stopped)")
    await assert_current(store, db_path, cid)
    failed = await store.start_turn(cid, Message.user("fails"), speaker="owner", sender_id="u")
    await store.abandon_turn(failed.handle.turn_id, "failed")
    await assert_current(store, db_path, cid)
    await store.replace_with_summary(cid, "the summary", keep_last=2)
    await assert_current(store, db_path, cid)
    assert (await store.load_window(cid))[0].kind == "summary"
    await turn(store, cid, "after the summary")
    await assert_current(store, db_path, cid)
    await store.clear_window(cid)
    assert await store.load_window(cid) == []
    await turn(store, cid, "fresh")
    await assert_current(store, db_path, cid)


async def test_writes_by_another_connection_are_seen(store, db_path) -> None:
    cid = await store.conversation_id(KEY)
    await turn(store, cid, "mine")
    other = await ConversationStore.open(db_path)
    try:
        await turn(other, cid, "theirs")
        start = await store.start_turn(cid, Message.user("next"), speaker="owner", sender_id="u")
        assert [m.message.text for m in start.window] == ["mine", "ok", "theirs", "ok"]
        await store.commit_turn(
            start.handle.turn_id, [Message.assistant("ok")], usage=Usage(), model="m", provider="p"
        )
        await other.replace_with_summary(cid, "their summary", keep_last=2)
        await assert_current(store, db_path, cid)
        await other.append_marker(cid, "(never: the last message is an answer)")
        await other.clear_window(cid)
        assert await store.load_window(cid) == []
        await turn(other, cid, "theirs again")
        await assert_current(store, db_path, cid)
    finally:
        await other.close()


async def test_a_failed_commit_leaves_no_row_in_the_cached_window(store, db_path) -> None:
    cid = await store.conversation_id(KEY)
    await turn(store, cid, "kept")
    start = await store.start_turn(cid, Message.user("doomed"), speaker="owner", sender_id="u")

    def fail(ids: list[int]) -> None:
        raise OSError("disk full")

    store._sync._after_insert = fail
    with pytest.raises(OSError, match="disk full"):
        await store.commit_turn(
            start.handle.turn_id,
            [Message.assistant("never stored")],
            usage=Usage(),
            model="m",
            provider="p",
        )
    del store._sync._after_insert
    window = await store.load_window(cid)
    assert "never stored" not in [m.message.text for m in window]
    await assert_current(store, db_path, cid)
    await store.commit_turn(
        start.handle.turn_id, [Message.assistant("stored")], usage=Usage(), model="m", provider="p"
    )
    await assert_current(store, db_path, cid)


async def test_many_conversations_stay_within_the_cache_bound(store, db_path) -> None:
    cache = store._sync._windows
    cache.MAX_ROWS = 40  # this instance only
    ids = [await store.conversation_id(ConversationKey("cli", f"c{i}")) for i in range(12)]
    for round_ in range(3):
        for cid in ids:
            await turn(store, cid, f"r{round_}")
    assert cache._rows <= 40
    assert cache._rows == sum(len(w.rows) + 1 for w in cache._items.values())
    for cid in ids:
        await assert_current(store, db_path, cid)


def _window_selects(statements: list[str]) -> int:
    return sum(1 for sql in statements if "AND m.anchor_seq >= " in sql)


async def test_conversations_taking_turns_past_the_bound_still_hit_the_windows_that_fit(
    store, db_path
) -> None:
    """Plain LRU would evict exactly the window needed next (every turn a miss); windows
    used recently are never evicted, so the ones that fit keep being reused."""
    cache = store._sync._windows
    cache.MAX_ROWS = 60  # this instance only
    ids = [await store.conversation_id(ConversationKey("cli", f"c{i}")) for i in range(8)]
    for round_ in range(5):  # windows of 10 rows: 8 x 11 > 60
        for cid in ids:
            await turn(store, cid, f"r{round_}")
    statements = window_reads(store)
    for round_ in range(5, 8):
        for cid in ids:
            await turn(store, cid, f"r{round_}")
    reads = _window_selects(statements)
    assert 0 < reads <= 3 * 4, f"{reads} window reads in 24 turns: the cached windows must hit"
    assert cache._rows <= 60
    assert cache._rows == sum(len(w.rows) + 1 for w in cache._items.values())
    for cid in ids:
        await assert_current(store, db_path, cid)


async def test_idle_windows_make_room_for_a_new_conversation(store, db_path) -> None:
    cache = store._sync._windows
    cache.MAX_ROWS = 32  # this instance only
    cache.LIVE_USES = 4
    ids = [await store.conversation_id(ConversationKey("cli", f"c{i}")) for i in range(6)]
    for round_ in range(2):  # six windows of 4 rows: 30 rows cached
        for cid in ids:
            await turn(store, cid, f"r{round_}")
    assert cache._rows == 30
    new = await store.conversation_id(ConversationKey("cli", "new"))
    for n in range(3):  # the others are idle by now: the oldest make room
        await turn(store, new, f"n{n}")
    statements = window_reads(store)
    await turn(store, new, "again")
    assert _window_selects(statements) == 0, "the new conversation's window is cached"
    assert cache._rows <= 32
    assert cache._rows == sum(len(w.rows) + 1 for w in cache._items.values())
    assert ids[0] not in cache._items, "the least recently used window made room"
    await assert_current(store, db_path, new)
    for cid in ids:
        await assert_current(store, db_path, cid)


async def test_own_rows_never_join_a_window_another_connection_moved_on(store, db_path) -> None:
    """begin_turn/commit_turn check the newest seq themselves: rows written after another
    connection's must not be appended to the stale cached window (whose state would then
    look current again)."""
    cid = await store.conversation_id(KEY)
    await turn(store, cid, "mine")
    other = await ConversationStore.open(db_path)
    try:
        await turn(other, cid, "theirs")
    finally:
        await other.close()
    handle = await store.begin_turn(
        cid, Message.user("begun here"), speaker="owner", sender_id="u", session_id="main-9"
    )
    await store.commit_turn(
        handle.turn_id, [Message.assistant("ok")], usage=Usage(), model="m", provider="p"
    )
    assert [m.message.text for m in await store.load_window(cid)] == [
        "mine",
        "ok",
        "theirs",
        "ok",
        "begun here",
        "ok",
    ]
    await assert_current(store, db_path, cid)


async def test_a_commit_after_another_connection_appended_goes_after_its_rows(
    store, db_path
) -> None:
    """The commit's rows take the seq after the cached window's newest; when another
    connection appended between this turn's start and its commit, the unique seq refuses
    that, and the rows go after the other connection's."""
    cid = await store.conversation_id(KEY)
    await turn(store, cid, "mine")
    start = await store.start_turn(cid, Message.user("slow"), speaker="owner", sender_id="u")
    other = await ConversationStore.open(db_path)
    try:
        await turn(other, cid, "theirs", "their answer")
    finally:
        await other.close()
    ids = await store.commit_turn(
        start.handle.turn_id,
        [Message.assistant("slow answer"), Message.assistant("and more")],
        usage=Usage(),
        model="m",
        provider="p",
    )
    window = await store.load_window(cid)
    assert [m.message.text for m in window] == [
        "mine",
        "ok",
        "slow",
        "slow answer",
        "and more",
        "theirs",
        "their answer",
    ]
    seqs = {m.id: m.seq for m in window}
    assert [seqs[i] for i in ids] == [6, 7]  # after the other connection's rows (4, 5)
    await assert_current(store, db_path, cid)


async def test_a_turn_begun_by_another_connection_commits_here(store, db_path) -> None:
    cid = await store.conversation_id(KEY)
    await turn(store, cid, "mine")
    other = await ConversationStore.open(db_path)
    try:
        start = await other.start_turn(cid, Message.user("theirs"), speaker="guest", sender_id="g")
    finally:
        await other.close()
    await store.commit_turn(
        start.handle.turn_id,
        [Message.assistant("answered here")],
        usage=Usage(),
        model="m",
        provider="p",
    )
    window = await store.load_window(cid)
    assert [(m.message.text, m.speaker) for m in window][-2:] == [
        ("theirs", "guest"),
        ("answered here", "guest"),
    ]
    await assert_current(store, db_path, cid)


async def test_a_turn_another_connection_stopped_cannot_commit_here(store, db_path) -> None:
    from fermix_core.store import TurnStateError

    cid = await store.conversation_id(KEY)
    start = await store.start_turn(cid, Message.user("q"), speaker="owner", sender_id="u")
    other = await ConversationStore.open(db_path)
    try:
        assert await other.append_marker(cid, "(stopped)")
    finally:
        await other.close()
    with pytest.raises(TurnStateError, match="already stopped"):
        await store.commit_turn(
            start.handle.turn_id,
            [Message.assistant("late")],
            usage=Usage(),
            model="m",
            provider="p",
        )
    assert "late" not in [m.message.text for m in await store.load_window(cid)]
    await assert_current(store, db_path, cid)


@pytest.mark.parametrize(
    "message",
    [
        Message.user("plain"),
        Message.user('non-ASCII é ✓ \u2028 and <b>&amp;</b> "quoted" \\ back'),
        Message.user("look", ImagePart(media_type="image/png", data=b"\x89PNG\x00\xff")),
        Message.user(ImagePart(media_type="image/jpeg", path="abc.jpg")),
        Message.assistant(
            "calling", tool_calls=[ToolCall(id="c1", name="search", arguments={"q": "ü", "n": 3})]
        ),
        Message.tool(ToolResult(call_id="c1", name="search", content=["found"], is_error=True)),
        Message.system("a summary"),
    ],
)
def test_encode_stores_exactly_what_model_dump_json_writes(message: Message) -> None:
    role, body, text = encode(message)
    assert (role, body, text) == (message.role, message.model_dump_json(), message.text)
    assert Message.model_validate_json(body) == message
